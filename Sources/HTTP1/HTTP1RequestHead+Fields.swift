import GatewayCore
/// A request head from fields that arrived apart (an HTTP/2 request's pseudo-header and header fields), checked by
/// the rules the parser applies to a head on the wire, without writing HTTP/1.1 text and parsing it again.
///
/// HTTP/2 removes some HTTP/1.1 ambiguities (framing lines, folding) but not those a proxy must care about next:
/// the next hop reads this request as HTTP/1.1, so two Hosts, a conflicting Content-Length or a field value
/// with control bytes are refused here exactly as they are on an HTTP/1.1 connection.
extension HTTP1RequestHead {
    /// The head of a request whose parts index `bytes`: `method`, `target` (`:path`), `authority` (empty: none,
    /// then a `host` field names the host) and `fields` (names lower-case, as HTTP/2 sends them). `hasBody`: data
    /// follows the head; without `content-length` its body goes to the upstream chunked.
    ///
    /// `te` and `expect` are not carried over (HTTP/2 has no 100-continue; `te` is hop-by-hop), a `host` field is
    /// the authority when there is one (a client's own `host` is then dropped), and the `cookie` crumbs become one
    /// field (RFC 9113 8.2.3). The limits count the head as the next hop gets it; a head is one request
    /// (`keepAlive` false).
    public static func assemble(
        bytes: consuming [UInt8], method: Range<Int>, target: Range<Int>, authority: Range<Int>,
        fields: [(name: Range<Int>, value: Range<Int>)], hasBody: Bool, limits: HTTP1Limits
    ) -> Result<HTTP1RequestHead, HTTP1ParseError> {
        var bytes = bytes
        var facts = HTTP1FieldFacts()
        var kept: [HTTP1Field] = []
        kept.reserveCapacity(fields.count + 1)
        var cookies: [Range<Int>] = []
        var cookieName: Range<Int>? = nil
        let outcome: HTTP1ParseError.Code? = bytes.withUnsafeBytes { p -> HTTP1ParseError.Code? in
            if target.count > limits.maxTargetBytes { return .targetTooLong }
            guard !method.isEmpty, !target.isEmpty else { return .malformedRequestLine }
            for k in method where !HTTP1Bytes.isToken(p[k]) { return .invalidMethod }
            for k in target where !HTTP1Bytes.isTarget(p[k]) { return .invalidTarget }
            do throws(HTTP1ParseError) {
                try HTTP1RequestLine.checkTargetForm(p, method: method, target: target)
            } catch { return error.code }
            if !authority.isEmpty {
                facts.hostFields = 1
                facts.host = authority
                for k in authority where !HTTP1Bytes.isHost(p[k]) { facts.hostInvalid = true }
            }
            for f in fields {
                guard !f.name.isEmpty else { return .invalidHeaderName }
                for k in f.name where !HTTP1Bytes.isToken(p[k]) { return .invalidHeaderName }
                let name = UnsafeRawBufferPointer(rebasing: p[f.name])
                if HTTP1Bytes.find(HTTP1Bytes.cr, in: p, from: f.value.lowerBound, to: f.value.upperBound) != nil {
                    return .bareCR
                }
                let value = HTTP1Bytes.trimOWS(p, f.value)
                guard HTTP1Bytes.allFieldValue(p, value) else { return .invalidHeaderValue }
                switch name.count {
                case 2 where HTTP1Bytes.equalsLowercased(p, f.name, "te"):
                    facts.note(p, name: f.name, value: value, origin: 0)   // noted (trailers), not kept
                    continue
                case 4 where HTTP1Bytes.equalsLowercased(p, f.name, "host"): if !authority.isEmpty { continue }
                case 6 where HTTP1Bytes.equalsLowercased(p, f.name, "expect"): continue
                case 6 where HTTP1Bytes.equalsLowercased(p, f.name, "cookie"):
                    if !value.isEmpty { cookies.append(value) }   // an empty crumb adds nothing to the list
                    cookieName = cookieName ?? f.name
                    continue
                default: break
                }
                facts.note(p, name: f.name, value: value, origin: 0)
                kept.append(HTTP1Field(name: f.name, value: value))
            }
            return nil
        }
        if let outcome { return .failure(HTTP1ParseError(outcome)) }
        if !authority.isEmpty {
            // The next hop reads the host from a Host field, first as HTTP/1.1 clients send it.
            let name = bytes.count..<(bytes.count + 4)
            bytes.append(contentsOf: [UInt8(ascii: "h"), UInt8(ascii: "o"), UInt8(ascii: "s"), UInt8(ascii: "t")])
            kept.insert(HTTP1Field(name: name, value: authority), at: 0)
        }
        if let cookieName {
            let start = bytes.count
            for (i, c) in cookies.enumerated() {
                if i > 0 { bytes.append(contentsOf: [UInt8(ascii: ";"), UInt8(ascii: " ")]) }
                bytes.append(contentsOf: bytes[c])
            }
            kept.append(HTTP1Field(name: cookieName, value: start..<bytes.count))
        }
        // The limits count the head as the next hop gets it: request line, each kept field line, the empty line
        // (cookie crumbs count once, joined, as the HTTP/1.1 client would have sent them).
        if kept.count > limits.maxHeaders { return .failure(HTTP1ParseError(.tooManyHeaders)) }
        var size = method.count + target.count + 12 + 2
        for f in kept { size += f.name.count + f.value.count + 4 }
        if size > limits.maxHeaderBytes { return .failure(HTTP1ParseError(.headerTooLarge)) }
        var framing: HTTP1BodyFraming
        switch facts.requestFraming(.http11) {
        case .failure(let error): return .failure(error)
        case .success(let f): framing = f
        }
        if framing == .none && hasBody && !facts.sawContentLength { framing = .chunked }
        // An Upgrade field is malformed on HTTP/2 (RFC 9113 8.2.2) and nghttp2 refuses it before it gets here; should
        // one arrive, it is still seen, and refused as a WebSocket attempt (HTTP/2 has no handshake of that form).
        var head = HTTP1RequestHead(
            bytes: bytes, method: method, target: target, version: .http11, fields: kept, framing: framing,
            keepAlive: false, expectsContinue: false, host: facts.host)
        head.upgradeWebSocket = facts.upgradeWebSocket
        head.teTrailers = facts.teTrailers
        head.grpc = facts.grpc
        return .success(head)
    }
}
