/// Makes a request-target's path canonical (RFC 3986 §6.2.2 and §5.2.4), so that routing, verification and the
/// upstream all read one path however the client spelled it — or refuses the target when servers would read it
/// differently (`ambiguous_path`).
///
/// Why: a decoding upstream (WSGI, Go's `r.URL.Path`, Rails) serves `/%61pi/users`, `//api/users`,
/// `/./api/users` and `/x/../api/users` as `/api/users`. A proxy that routes on the raw bytes sends those past a
/// protected `/api/` route to a public catch-all (Envoy CVE-2019-9901). The canonical path is what the gateway
/// routes on *and* what it forwards, so the two can never disagree.
///
/// Always: `%XX` of an unreserved character is decoded, other `%XX` keep their encoding with upper-case hex, dot
/// segments (also `%2E` spellings) are removed. Refused: `..` above the root, a raw `\`, a raw `#`, `%XX` of NUL or
/// a control byte, malformed `%` escapes. By option: repeated slashes merged, `%2F`/`%5C` refused or kept encoded,
/// `;` path parameters refused or kept (a kept parameter never turns `..;` into a way up: such a segment is refused).
/// The query string is never touched.
public enum RequestTargetCanonicalizer {
    public struct Options: Sendable, Equatable {
        public var mergeSlashes: Bool
        /// false: `%2F`/`%5C` are refused; true: kept encoded (never decoded).
        public var keepEscapedSlashes: Bool
        /// false: a `;` in a segment is refused; true: kept as sent.
        public var keepPathParameters: Bool
        public init(mergeSlashes: Bool = true, keepEscapedSlashes: Bool = false, keepPathParameters: Bool = false) {
            self.mergeSlashes = mergeSlashes
            self.keepEscapedSlashes = keepEscapedSlashes
            self.keepPathParameters = keepPathParameters
        }
    }

    public enum Result: Equatable {
        /// The target is already canonical: route and forward it as it is.
        case unchanged
        /// The canonical origin-form target (path, then the query as sent).
        case canonical([UInt8])
        /// Servers would read this target differently: 400 `ambiguous_path`.
        case ambiguous
    }

    /// `target` in origin form (`/path?query`). Another form (`*`) is returned unchanged.
    public static func canonicalize(_ target: UnsafeRawBufferPointer, options: Options) -> Result {
        let n = target.count
        guard n > 0, target[0] == UInt8(ascii: "/") else { return .unchanged }
        var pathEnd = n
        // Fast scan: most targets need nothing done; only then is the slow path (which allocates) taken.
        var needsWork = false
        var i = 0
        while i < n {
            let c = target[i]
            if c == UInt8(ascii: "?") { pathEnd = i; break }
            switch c {
            case UInt8(ascii: "%"), UInt8(ascii: "\\"), UInt8(ascii: "#"), UInt8(ascii: ";"):
                needsWork = true
            case UInt8(ascii: "/"):
                if i + 1 < n {
                    let d = target[i + 1]
                    if d == UInt8(ascii: "/") || d == UInt8(ascii: ".") { needsWork = true }
                }
            default:
                break
            }
            i += 1
        }
        guard needsWork else { return .unchanged }
        guard let path = canonicalPath(UnsafeRawBufferPointer(rebasing: target[0..<pathEnd]), options: options) else {
            return .ambiguous
        }
        var out = path
        if pathEnd < n { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: target[pathEnd..<n])) }
        if out.count == n && out.withUnsafeBytes({ memcmp($0.baseAddress!, target.baseAddress!, n) == 0 }) {
            return .unchanged
        }
        return .canonical(out)
    }

    /// The canonical form of `path` (starts with "/", no query), or nil when it is ambiguous.
    static func canonicalPath(_ path: UnsafeRawBufferPointer, options: Options) -> [UInt8]? {
        // 1. Split into segments, decoding each; a segment is kept as the bytes it is forwarded as.
        var segments: [[UInt8]] = []
        var current: [UInt8] = []
        /// The segment, decoded, is exactly "." or ".." — judged on its decoded form, so %2E counts.
        var dots = 0
        var otherBytes = false
        var hasParameter = false
        var trailingSlash = false

        func endSegment(last: Bool) -> Bool {
            if hasParameter {
                // "..;x" is ".." to Tomcat and Spring: never a plain segment, whatever the option says.
                let beforeParameter = current.prefix { $0 != UInt8(ascii: ";") }
                if beforeParameter.allSatisfy({ $0 == UInt8(ascii: ".") }) && (beforeParameter.count == 1 || beforeParameter.count == 2) {
                    return false
                }
            }
            if !otherBytes && !hasParameter && dots == 1 {
                // "." is removed; at the end it leaves the slash before it ("/a/." → "/a/").
                if last { trailingSlash = true }
            } else if !otherBytes && !hasParameter && dots == 2 {
                guard !segments.isEmpty else { return false }   // ".." above the root
                segments.removeLast()
                if last { trailingSlash = true }
            } else if current.isEmpty {
                if last {
                    trailingSlash = true
                } else if !options.mergeSlashes {
                    segments.append([])
                }
            } else {
                segments.append(current)
            }
            current.removeAll(keepingCapacity: true)
            dots = 0
            otherBytes = false
            hasParameter = false
            return true
        }

        let n = path.count
        var i = 1   // after the leading "/"
        while i <= n {
            if i == n {
                guard endSegment(last: true) else { return nil }
                break
            }
            var c = path[i]
            if c == UInt8(ascii: "/") {
                guard endSegment(last: false) else { return nil }
                i += 1
                continue
            }
            if c == UInt8(ascii: "\\") || c == UInt8(ascii: "#") { return nil }
            if c == UInt8(ascii: "%") {
                guard i + 2 < n, let hi = hexValue(path[i + 1]), let lo = hexValue(path[i + 2]) else { return nil }
                let decoded = hi << 4 | lo
                i += 3
                if decoded < 0x20 || decoded == 0x7F { return nil }
                if isUnreserved(decoded) {
                    c = decoded
                    // fall through to the plain byte below
                } else {
                    if decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\") {
                        guard options.keepEscapedSlashes else { return nil }
                    }
                    current.append(UInt8(ascii: "%"))
                    current.append(hexDigit(decoded >> 4))
                    current.append(hexDigit(decoded & 0xF))
                    otherBytes = true
                    continue
                }
            } else {
                i += 1
                if c == UInt8(ascii: ";") {
                    guard options.keepPathParameters else { return nil }
                    hasParameter = true
                }
            }
            current.append(c)
            if c == UInt8(ascii: ".") { dots += 1 } else { otherBytes = true }
        }

        var out: [UInt8] = [UInt8(ascii: "/")]
        out.reserveCapacity(n)
        for (k, s) in segments.enumerated() {
            if k > 0 { out.append(UInt8(ascii: "/")) }
            out.append(contentsOf: s)
        }
        if trailingSlash && !segments.isEmpty { out.append(UInt8(ascii: "/")) }
        return out
    }

    @inline(__always) static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    @inline(__always) static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? v + 48 : v + 55 }

    /// RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~".
    @inline(__always) static func isUnreserved(_ c: UInt8) -> Bool {
        (c | 0x20) &- 0x61 < 26 || (c &- 0x30) < 10 || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
            || c == UInt8(ascii: "_") || c == UInt8(ascii: "~")
    }
}

#if canImport(Glibc)
import Glibc
#endif
