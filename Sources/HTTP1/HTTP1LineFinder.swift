/// Finds CRLF-terminated lines in a buffer that grows between calls, remembering how far it has searched so that
/// delivering a head one byte at a time costs linear, not quadratic, time.
///
/// Offsets are indices into the caller's input, which must keep the same origin between calls (the head parsers
/// consume nothing until the head is complete).
struct HTTP1LineFinder: Sendable, Equatable {
    /// Where the next unreturned line starts.
    var lineStart = 0
    /// No LF exists in `lineStart..<searched`.
    var searched = 0

    enum Found: Equatable {
        /// A complete line; `content` excludes the line ending. `bareLF` when the LF had no CR before it.
        case line(content: Range<Int>, bareLF: Bool)
        /// No LF yet, and fewer than `limit` bytes are buffered.
        case incomplete
        /// No LF before index `limit` although that many bytes are buffered: the line can never fit.
        case exhausted
    }

    /// The next line whose LF lies before index `limit`.
    @inline(__always)
    mutating func next(_ p: UnsafeRawBufferPointer, limit: Int) -> Found {
        let end = min(p.count, limit)
        let from = max(searched, lineStart)
        if let lf = HTTP1Bytes.find(HTTP1Bytes.lf, in: p, from: from, to: end) {
            let bare = lf == lineStart || p[lf - 1] != HTTP1Bytes.cr
            let content = lineStart..<(bare ? lf : lf - 1)
            lineStart = lf + 1
            searched = lineStart
            return .line(content: content, bareLF: bare)
        }
        searched = max(end, lineStart)
        return p.count >= limit ? .exhausted : .incomplete
    }
}
