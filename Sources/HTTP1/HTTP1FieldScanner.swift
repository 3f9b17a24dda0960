/// Parses one field line (`field-name ":" OWS field-value OWS`, RFC 9112 section 5) with no leniency.
///
/// Each rejection below closes a known request-smuggling gap: proxies and servers that are lenient in different
/// ways (folding continuation lines, trimming "Host : x" to "Host", truncating at NUL) disagree about which fields a
/// message has, and an attacker hides a second Content-Length or Transfer-Encoding in that disagreement.
enum HTTP1FieldScanner {
    enum Line: Equatable {
        case field(name: Range<Int>, value: Range<Int>)
        case error(HTTP1ParseError.Code)
    }

    /// Scans `p[content]`, a line without its CRLF, known not to be empty.
    @inline(__always)
    static func scan(_ p: UnsafeRawBufferPointer, _ content: Range<Int>) -> Line {
        // obs-fold: RFC 9112 5.2 lets a server reject it with 400; unfolding it is what smuggling relies on.
        if HTTP1Bytes.isOWS(p[content.lowerBound]) { return .error(.obsFold) }
        let line = scanFieldLine(p, content)
        if case .error = line {
            // A CR not followed by LF: some peers treat it as a line end, so it could start a hidden field.
            // No CR can pass the name or value checks, so looking for it only on failure is enough.
            if HTTP1Bytes.find(HTTP1Bytes.cr, in: p, from: content.lowerBound, to: content.upperBound) != nil {
                return .error(.bareCR)
            }
        }
        return line
    }

    @inline(__always)
    private static func scanFieldLine(_ p: UnsafeRawBufferPointer, _ content: Range<Int>) -> Line {
        let start = content.lowerBound
        let end = content.upperBound
        var i = start
        while i < end, HTTP1Bytes.isToken(p[i]) { i += 1 }
        guard i < end else { return .error(.invalidHeaderName) }  // no colon at all
        let b = p[i]
        if b != UInt8(ascii: ":") {
            if HTTP1Bytes.isOWS(b) {
                // RFC 9112 5.1: a server MUST reject whitespace between name and colon.
                var j = i
                while j < end, HTTP1Bytes.isOWS(p[j]) { j += 1 }
                if j < end, p[j] == UInt8(ascii: ":"), i > start { return .error(.whitespaceBeforeColon) }
            }
            return .error(.invalidHeaderName)
        }
        if i == start { return .error(.invalidHeaderName) }  // empty name
        let name = start..<i

        let value = HTTP1Bytes.trimOWS(p, (i + 1)..<end)
        guard HTTP1Bytes.allFieldValue(p, value) else { return .error(.invalidHeaderValue) }
        return .field(name: name, value: value)
    }
}
