import GatewayCore
/// The resumable, direction-neutral part of head parsing: finds lines, enforces the size and count limits,
/// parses field lines and collects framing facts. The request and response parsers handle the start line.
///
/// Lines are processed as soon as they are complete, so no byte of a head is looked at twice however the input is
/// split, and errors surface in wire order — identical outcomes for any split of the same bytes.
struct HTTP1HeadAccumulator: Sendable {
    /// Requests may be preceded by one empty line (RFC 9112 2.2); responses may not.
    let allowsLeadingEmptyLine: Bool
    var lines = HTTP1LineFinder()
    /// Where the head starts in the input: 0, or 2 after an ignored leading CRLF.
    var headStart = 0
    var sawStartLine = false
    /// Fields with offsets relative to `headStart`.
    var fields: [HTTP1Field] = []
    var facts = HTTP1FieldFacts()

    init(allowsLeadingEmptyLine: Bool) {
        self.allowsLeadingEmptyLine = allowsLeadingEmptyLine
    }

    /// Whether any byte of this head has been seen (for EOF handling).
    var hasSeenBytes: Bool { lines.searched > 0 }

    enum Step: Equatable {
        /// The start line is complete (content without line ending). The caller parses it and scans on.
        case startLine(Range<Int>, bareLF: Bool)
        /// The start line is not complete yet; `exhausted` when it can no longer fit in `maxHeaderBytes`.
        case partialStartLine(Range<Int>, exhausted: Bool)
        /// The empty line ending the head was found; the head is `headStart..<headEnd`.
        case complete(headEnd: Int)
        case needMore
        case error(HTTP1ParseError.Code)
    }

    /// Scans as far as the input allows.
    mutating func scan(_ p: UnsafeRawBufferPointer, _ limits: HTTP1Limits) -> Step {
        while true {
            let limit = headStart + limits.maxHeaderBytes
            switch lines.next(p, limit: limit) {
            case .incomplete:
                if !sawStartLine { return .partialStartLine(lines.lineStart..<p.count, exhausted: false) }
                return .needMore
            case .exhausted:
                if !sawStartLine { return .partialStartLine(lines.lineStart..<limit, exhausted: true) }
                return .error(.headerTooLarge)
            case .line(let content, let bareLF):
                if !sawStartLine {
                    if content.isEmpty, !bareLF, allowsLeadingEmptyLine, headStart == 0 {
                        headStart = lines.lineStart
                        continue
                    }
                    sawStartLine = true
                    return .startLine(content, bareLF: bareLF)
                }
                // A bare LF ends a line for some parsers and not for others: reject, never normalise.
                if bareLF { return .error(.bareLF) }
                if content.isEmpty { return .complete(headEnd: lines.lineStart) }
                switch HTTP1FieldScanner.scan(p, content) {
                case .error(let code):
                    return .error(code)
                case .field(let name, let value):
                    if fields.count >= limits.maxHeaders { return .error(.tooManyHeaders) }
                    facts.note(p, name: name, value: value, origin: headStart)
                    if fields.isEmpty { fields.reserveCapacity(16) }
                    fields.append(
                        HTTP1Field(
                            name: (name.lowerBound - headStart)..<(name.upperBound - headStart),
                            value: (value.lowerBound - headStart)..<(value.upperBound - headStart)))
                }
            }
        }
    }

    /// A copy of the head's bytes, `headStart..<headEnd`.
    func headBytes(_ p: UnsafeRawBufferPointer, headEnd: Int) -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(rebasing: p[headStart..<headEnd]))
    }

    /// Hands the collected fields over and gets ready for the next head.
    mutating func takeFields() -> [HTTP1Field] {
        let taken = fields
        self = HTTP1HeadAccumulator(allowsLeadingEmptyLine: allowsLeadingEmptyLine)
        return taken
    }
}
