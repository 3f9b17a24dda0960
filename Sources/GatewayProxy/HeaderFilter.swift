import GatewayCore
import HTTP1
import HTTP2

/// What the proxy does with a header field by name, decided once per field on the request path.
enum FieldClass {
    case forward
    /// Hop-by-hop (RFC 9110 7.6.1) or re-framed by the gateway: never forwarded.
    case drop
    /// Client-sent X-Attest-*: dropped so the upstream can trust the ones the gateway sets.
    case attest
    case xForwardedFor
    /// X-Forwarded-Proto / X-Forwarded-Host: kept from a trusted proxy, else replaced by the gateway's.
    case xForwardedProto
    case xForwardedHost
    /// Forwarded, X-Real-IP, X-Forwarded-Port, X-Forwarded-Prefix: kept from a trusted proxy, else dropped (a
    /// client could otherwise pass for another address, scheme or mount point).
    case forwardingChain
    case connection
}

/// What the gateway does with each header field by name (the heads it builds from that are in HeaderFilter+Heads).
enum HeaderFilter {
    /// Classifies a field name (any case) without allocating.
    ///
    /// A name that spells a dropped or gateway-set field with `_` for `-` (`X_Attest_Verdict`, `Transfer_Encoding`,
    /// `Content_Length`) is dropped too: CGI-style upstreams (PHP, WSGI, Rack) map both spellings to one variable
    /// (`HTTP_X_ATTEST_VERDICT`), where it would pass for the gateway's verdict or change the body framing.
    @inline(__always)
    static func classify(_ bytes: UnsafeRawBufferPointer) -> FieldClass {
        let n = bytes.count
        guard n >= 2 else { return .forward }
        let kind = classifyFolded(bytes, n)
        if kind == .forward { return .forward }
        // Only the few special names get here: look for an underscore spelling.
        for i in 0..<n where bytes[i] == UInt8(ascii: "_") { return .drop }
        return kind
    }

    @inline(__always)
    private static func classifyFolded(_ bytes: UnsafeRawBufferPointer, _ n: Int) -> FieldClass {
        switch Bytes.lower(bytes[0]) {
        case UInt8(ascii: "c"):
            if n == 10 && eq(bytes, "connection") { return .connection }
            // Content-Length itself is forwarded (re-written by appendUpstreamRequestHead); `Content_Length` is not.
            if n == 14 && eqFolded(bytes, "content-length") && !eq(bytes, "content-length") { return .drop }
        case UInt8(ascii: "k"):
            if n == 10 && eqFolded(bytes, "keep-alive") { return .drop }
        case UInt8(ascii: "t"):
            if n == 2 && eq(bytes, "te") { return .drop }
            if n == 7 && eq(bytes, "trailer") { return .drop }
            if n == 17 && eqFolded(bytes, "transfer-encoding") { return .drop }
        case UInt8(ascii: "u"):
            if n == 7 && eq(bytes, "upgrade") { return .drop }
        case UInt8(ascii: "p"):
            if n >= 6 && eqPrefixFolded(bytes, "proxy-") { return .drop }
        case UInt8(ascii: "e"):
            if n == 6 && eq(bytes, "expect") { return .drop }
        case UInt8(ascii: "f"):
            if n == 9 && eqFolded(bytes, "forwarded") { return .forwardingChain }
        case UInt8(ascii: "x"):
            if n >= 9 && eqPrefixFolded(bytes, "x-attest-") { return .attest }
            if n == 15 && eqFolded(bytes, "x-forwarded-for") { return .xForwardedFor }
            if n == 17 && eqFolded(bytes, "x-forwarded-proto") { return .xForwardedProto }
            if n == 16 && eqFolded(bytes, "x-forwarded-host") { return .xForwardedHost }
            if n == 16 && eqFolded(bytes, "x-forwarded-port") { return .forwardingChain }
            if n == 18 && eqFolded(bytes, "x-forwarded-prefix") { return .forwardingChain }
            if n == 9 && eqFolded(bytes, "x-real-ip") { return .forwardingChain }
            if n == 12 && eqFolded(bytes, "x-request-id") { return .drop }   // re-added as the exchange's id
        default:
            break
        }
        return .forward
    }

    /// Lower case, and `_` read as `-`.
    @inline(__always)
    static func folded(_ c: UInt8) -> UInt8 { c == UInt8(ascii: "_") ? UInt8(ascii: "-") : Bytes.lower(c) }

    @inline(__always)
    static func eqFolded(_ a: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard a.count == lower.utf8CodeUnitCount else { return false }
        let p = lower.utf8Start
        for i in 0..<a.count where folded(a[i]) != p[i] { return false }
        return true
    }

    @inline(__always)
    static func eqPrefixFolded(_ a: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard a.count >= lower.utf8CodeUnitCount else { return false }
        let p = lower.utf8Start
        for i in 0..<lower.utf8CodeUnitCount where folded(a[i]) != p[i] { return false }
        return true
    }

    @inline(__always)
    static func eq(_ a: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard a.count == lower.utf8CodeUnitCount else { return false }
        let p = lower.utf8Start
        for i in 0..<a.count where Bytes.lower(a[i]) != p[i] { return false }
        return true
    }

    @inline(__always)
    static func eqPrefix(_ a: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        guard a.count >= lower.utf8CodeUnitCount else { return false }
        let p = lower.utf8Start
        for i in 0..<lower.utf8CodeUnitCount where Bytes.lower(a[i]) != p[i] { return false }
        return true
    }

    /// The Connection tokens (as ranges into the head's bytes) that name other fields to drop. `close` and
    /// `keep-alive` name none, so the common heads allocate nothing here. `Content-Length` and `Host` are never
    /// dropped this way: the body is forwarded by that length and the request was routed by that host, so the next
    /// hop must see them (`Connection: content-length` would otherwise turn the body into a second request).
    @inline(__always)
    static func connectionNamed(_ raw: UnsafeRawBufferPointer, _ fields: [HTTP1Field]) -> [Range<Int>] {
        var named: [Range<Int>] = []
        for f in fields where f.name.count == 10 && eq(UnsafeRawBufferPointer(rebasing: raw[f.name]), "connection") {
            var i = f.value.lowerBound
            let end = f.value.upperBound
            while i < end {
                var j = i
                while j < end && raw[j] != UInt8(ascii: ",") { j += 1 }
                var lo = i, hi = j
                while lo < hi && (raw[lo] == 32 || raw[lo] == 9) { lo += 1 }
                while hi > lo && (raw[hi - 1] == 32 || raw[hi - 1] == 9) { hi -= 1 }
                if hi > lo {
                    let token = UnsafeRawBufferPointer(rebasing: raw[lo..<hi])
                    if !eq(token, "close") && !eq(token, "keep-alive") && !eq(token, "content-length")
                        && !eq(token, "host") {
                        named.append(lo..<hi)
                    }
                }
                i = j + 1
            }
        }
        return named
    }

    /// Whether `name` is one of the Connection-named tokens (case-insensitive).
    static func isNamed(_ name: UnsafeRawBufferPointer, _ raw: UnsafeRawBufferPointer, _ named: [Range<Int>]) -> Bool {
        for t in named where t.count == name.count {
            var same = true
            for k in 0..<name.count where Bytes.lower(name[k]) != Bytes.lower(raw[t.lowerBound + k]) { same = false; break }
            if same { return true }
        }
        return false
    }

    static func isStripped(_ name: UnsafeRawBufferPointer, _ strip: [[UInt8]]) -> Bool {
        for s in strip where s.count == name.count {
            var same = true
            for k in 0..<s.count where Bytes.lower(name[k]) != s[k] { same = false; break }
            if same { return true }
        }
        return false
    }

    /// The request-target in origin form: absolute-form (`http://host/p?q`) becomes `/p?q`.
    static func originForm(_ target: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard target.count > 0, target[0] != UInt8(ascii: "/") else { return target }
        // absolute-form: scheme "://" authority path-abempty [ "?" query ]
        var i = 0
        while i + 2 < target.count {
            if target[i] == UInt8(ascii: ":") && target[i + 1] == UInt8(ascii: "/") && target[i + 2] == UInt8(ascii: "/") {
                var j = i + 3
                while j < target.count && target[j] != UInt8(ascii: "/") && target[j] != UInt8(ascii: "?") { j += 1 }
                if j == target.count {
                    let slash: StaticString = "/"   // static storage: valid for the program's lifetime
                    return UnsafeRawBufferPointer(start: slash.utf8Start, count: 1)
                }
                return UnsafeRawBufferPointer(rebasing: target[j...])
            }
            i += 1
        }
        return target
    }

    /// The path of a request-target without its query, for routing and the access log.
    static func path(of target: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        let t = originForm(target)
        guard let base = t.baseAddress, t.count > 0 else { return t }
        if let q = memchr(base, Int32(UInt8(ascii: "?")), t.count) {
            return UnsafeRawBufferPointer(start: base, count: base.distance(to: UnsafeRawPointer(q)))
        }
        return t
    }
}

/// HTTP/1.1 chunked framing (RFC 9112 7.1), written where a body is re-framed: to upstreams and to clients.
extension ByteBuffer {
    /// One chunk holding `bytes` (nothing for an empty piece: an empty chunk would end the body).
    @inline(__always) func appendChunk(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        appendHex(bytes.count)
        append("\r\n" as StaticString)
        append(bytes)
        append("\r\n" as StaticString)
    }

    /// The last chunk, no trailers.
    @inline(__always) func appendLastChunk() { append("0\r\n\r\n" as StaticString) }

    /// The last chunk with trailer fields (RFC 9112 7.1.2); fields a trailer must not carry (framing, routing,
    /// authentication, hop-by-hop) are left out.
    func appendLastChunk(trailers: ResponseTrailers) {
        append("0\r\n" as StaticString)
        trailers.bytes.withUnsafeBytes { p in
            for f in trailers.fields where HeaderFilter.allowedInTrailer(UnsafeRawBufferPointer(rebasing: p[f.name])) {
                append(UnsafeRawBufferPointer(rebasing: p[f.name]))
                append(": " as StaticString)
                append(UnsafeRawBufferPointer(rebasing: p[f.value]))
                append("\r\n" as StaticString)
            }
        }
        append("\r\n" as StaticString)
    }
}

extension HeaderFilter {
    /// Whether a trailer field may be relayed: not framing, routing, authentication, connection-specific or the
    /// gateway's own (RFC 9110 6.5.1), and (these come from HTTP/2 or the chunked parser) a valid token name.
    static func allowedInTrailer(_ name: UnsafeRawBufferPointer) -> Bool {
        guard !name.isEmpty else { return false }
        for c in name {
            let ok = (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || "!#$%&'*+-.^_`|~".utf8.contains(c)
            if !ok { return false }
        }
        switch classify(name) {
        case .forward: break
        default: return false
        }
        for f in trailerForbidden where eq(name, f) { return false }
        return true
    }

    /// Names a trailer must not carry beyond the ones `classify` drops (framing, routing, auth, caching, control).
    private static let trailerForbidden: [StaticString] = [
        "content-length", "host", "authorization", "cookie", "set-cookie", "trailer", "content-encoding",
        "content-type", "content-range", "expect", "max-forwards", "www-authenticate", "proxy-authenticate",
        "proxy-authorization", "age", "cache-control", "expires", "date", "location", "retry-after", "vary",
    ]
}

#if canImport(Glibc)
import Glibc
#endif
