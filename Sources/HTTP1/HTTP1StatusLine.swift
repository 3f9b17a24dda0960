/// `HTTP-version SP 3DIGIT SP reason-phrase` (RFC 9112 section 4). The reason may be empty, and the
/// "SP reason" may be missing altogether (`HTTP/1.1 200`) — a common server quirk that is harmless for framing.
struct HTTP1StatusLine: Sendable, Equatable {
    var version: HTTP1Version
    var status: Int
    /// Relative to the head start.
    var reason: Range<Int>

    /// Parses the complete line `p[line]` (line ending excluded); `origin` is the head start.
    static func parse(
        _ p: UnsafeRawBufferPointer, _ line: Range<Int>, origin: Int
    ) throws(HTTP1ParseError) -> HTTP1StatusLine {
        let s = line.lowerBound
        let e = line.upperBound
        if HTTP1Bytes.find(HTTP1Bytes.cr, in: p, from: s, to: e) != nil { throw HTTP1ParseError(.bareCR) }
        guard e - s >= 12, p[s + 8] == HTTP1Bytes.sp else { throw HTTP1ParseError(.malformedStatusLine) }
        let version = try HTTP1RequestLine.parseVersion(p, s..<(s + 8), malformed: .malformedStatusLine)
        var status = 0
        for k in (s + 9)..<(s + 12) {
            guard HTTP1Bytes.isDigit(p[k]) else { throw HTTP1ParseError(.malformedStatusLine) }
            status = status * 10 + Int(p[k] &- 0x30)
        }
        guard (100...599).contains(status) else { throw HTTP1ParseError(.malformedStatusLine) }
        var reason = e..<e
        if e > s + 12 {
            guard p[s + 12] == HTTP1Bytes.sp else { throw HTTP1ParseError(.malformedStatusLine) }
            reason = (s + 13)..<e
            for k in reason where !HTTP1Bytes.isReason(p[k]) { throw HTTP1ParseError(.malformedStatusLine) }
        }
        return HTTP1StatusLine(
            version: version, status: status,
            reason: (reason.lowerBound - origin)..<(reason.upperBound - origin))
    }
}
