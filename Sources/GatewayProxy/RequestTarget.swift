import GatewayCore
import HTTP1

/// The request-target as the gateway reads it: one canonical path for routing, verification and the upstream
/// (CONFIG.md `paths`), and for an absolute-form target the authority that wins over Host (RFC 9112 §3.2.2).
struct RequestTarget {
    /// The canonical origin-form target, when it differs from what was sent (nil: forward the target as sent).
    var canonical: [UInt8]?
    /// An absolute-form target's authority (range into the head's bytes): the host that routes the request and
    /// that the upstream is told in `Host`.
    var authority: Range<Int>?

    /// Resolves `head`'s target; nil when it cannot be read one way only (400 `ambiguous_path`).
    static func resolve(_ head: HTTP1RequestHead, _ raw: UnsafeRawBufferPointer,
                        options: RequestTargetCanonicalizer.Options) -> RequestTarget? {
        let full = UnsafeRawBufferPointer(rebasing: raw[head.target])
        var resolved = RequestTarget()
        var origin = full
        if full.count > 0 && full[0] != UInt8(ascii: "/") {
            // authority-form (CONNECT) names no path: no route matches it (404), nothing to make canonical.
            if full[0] == UInt8(ascii: "*") || head.methodIs("CONNECT") { return resolved }
            guard let authority = absoluteFormAuthority(full) else { return nil }
            resolved.authority = (head.target.lowerBound + authority.lowerBound)..<(head.target.lowerBound + authority.upperBound)
            origin = HeaderFilter.originForm(full)
        }
        switch RequestTargetCanonicalizer.canonicalize(origin, options: options) {
        case .unchanged: break
        case .canonical(let t): resolved.canonical = t
        case .ambiguous: return nil
        }
        return resolved
    }

    /// The authority of `scheme://authority[/path][?query]` (relative to `target`); nil when it is empty or carries
    /// userinfo (`http://user@host/`: deprecated, and read differently by different parsers).
    static func absoluteFormAuthority(_ target: UnsafeRawBufferPointer) -> Range<Int>? {
        var i = 0
        while i + 2 < target.count {
            if target[i] == UInt8(ascii: ":") && target[i + 1] == UInt8(ascii: "/") && target[i + 2] == UInt8(ascii: "/") {
                let start = i + 3
                var j = start
                while j < target.count && target[j] != UInt8(ascii: "/") && target[j] != UInt8(ascii: "?") {
                    if !isAuthorityByte(target[j]) { return nil }
                    j += 1
                }
                return j > start ? start..<j : nil
            }
            i += 1
        }
        return nil
    }

    /// Host names, IP literals and a port: ALPHA DIGIT "-" "." "_" "~" ":" "[" "]". Stricter than reg-name (no
    /// sub-delims, no `%`, no `@`): an authority anything else would mean different hosts to different parsers.
    @inline(__always) static func isAuthorityByte(_ c: UInt8) -> Bool {
        (c | 0x20) &- 0x61 < 26 || (c &- 0x30) < 10 || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
            || c == UInt8(ascii: "_") || c == UInt8(ascii: "~") || c == UInt8(ascii: ":") || c == UInt8(ascii: "[")
            || c == UInt8(ascii: "]")
    }
}

extension ProxyExchange {
    /// The path (no query) a request is routed on: the canonical one, else the target as sent in origin form.
    /// `raw` is `head.bytes` (the caller holds it, so the head is not copied here).
    @inline(__always)
    static func withRoutingPath<R>(canonical: [UInt8]?, _ head: HTTP1RequestHead, _ raw: UnsafeRawBufferPointer,
                                   _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let canonical {
            return canonical.withUnsafeBytes { body(HeaderFilter.path(of: $0)) }
        }
        return body(HeaderFilter.path(of: UnsafeRawBufferPointer(rebasing: raw[head.target])))
    }
}
