/// Body framing decisions (RFC 9112 section 6.3), made once per head from the collected facts.
///
/// The gateway is a proxy: whenever two readings of a head are possible, it refuses the message instead of picking
/// one, because the next hop may pick the other and see a different message boundary (request smuggling).
extension HTTP1FieldFacts {
    /// Framing of a request, or why the head must be rejected. Also enforces the Host rules (RFC 9112 3.2).
    func requestFraming(_ version: HTTP1Version) -> Result<HTTP1BodyFraming, HTTP1ParseError> {
        let framing: HTTP1BodyFraming
        switch commonFramingChecks(version) {
        case .failure(let e): return .failure(e)
        case .success(let hasTE):
            if hasTE {
                // Only a single, bare "chunked": any other coding would have to be decoded to find the end of
                // the body, and "chunked, chunked" or a second TE field means two parsers may count differently.
                guard transferEncodingFields == 1, transferCodings == 1, lastCodingIsChunked else {
                    return .failure(HTTP1ParseError(.unsupportedTransferEncoding))
                }
                framing = .chunked
            } else if let n = contentLength, n > 0 {
                framing = .contentLength(n)
            } else {
                framing = .none
            }
        }
        // Exactly one Host in 1.1; two Hosts in any version make routing ambiguous.
        if hostFields > 1 { return .failure(HTTP1ParseError(.multipleHost)) }
        if hostFields == 0, version == .http11 { return .failure(HTTP1ParseError(.missingHost)) }
        if hostInvalid { return .failure(HTTP1ParseError(.invalidHost)) }
        return .success(framing)
    }

    /// Framing of a response to a request that was `HEAD` or not.
    func responseFraming(
        _ version: HTTP1Version, status: Int, toHEAD: Bool
    ) -> Result<HTTP1BodyFraming, HTTP1ParseError> {
        let hasTE: Bool
        switch commonFramingChecks(version) {
        case .failure(let e): return .failure(e)
        case .success(let t): hasTE = t
        }
        if hasTE, emptyCoding || chunkedCodings > 1 || (chunkedCodings == 1 && !lastCodingIsChunked) {
            // RFC 9112 6.1: chunked at most once and only last; otherwise the body end is unknowable.
            return .failure(HTTP1ParseError(.unsupportedTransferEncoding))
        }
        if toHEAD || status < 200 || status == 204 || status == 304 { return .success(.none) }
        if hasTE { return .success(lastCodingIsChunked ? .chunked : .untilClose) }
        if let n = contentLength { return .success(n > 0 ? .contentLength(n) : .none) }
        return .success(.untilClose)
    }

    /// Checks shared by both directions; on success tells whether Transfer-Encoding is present.
    private func commonFramingChecks(_ version: HTTP1Version) -> Result<Bool, HTTP1ParseError> {
        let hasTE = transferEncodingFields > 0
        // RFC 9112 6.1 lets a recipient drop CL when TE is present; a proxy must not, since the next hop may
        // honour CL instead (the CL.TE / TE.CL attacks). Rejected even for "Content-Length: 0".
        if hasTE, sawContentLength { return .failure(HTTP1ParseError(.contentLengthWithTransferEncoding)) }
        if let e = contentLengthError { return .failure(HTTP1ParseError(e)) }
        // RFC 9112 6.1: TE in a 1.0 message means the framing is faulty.
        if hasTE, version == .http10 { return .failure(HTTP1ParseError(.transferEncodingOnHTTP10)) }
        return .success(hasTE)
    }
}
