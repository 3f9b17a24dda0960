/// A resumable HTTP/1.x response parser for the upstream side of the proxy: bytes in, events out, no I/O.
///
/// The parser must be told about every response it is to read with ``expectResponse(toHEAD:)`` — before the
/// first one too. Bytes arriving while no response is expected are `.unsolicitedResponse`: an upstream that
/// sends them is out of step with us, and attaching its bytes to the next request would cross responses
/// between clients. Calls made while a response is in progress are queued (pipelining).
///
/// Framing follows RFC 9112 6.3; like the request side it refuses ambiguous framing (CL with TE, duplicate
/// differing CL) instead of guessing, because a wrong guess desynchronises a pooled upstream connection.
public struct HTTP1ResponseParser: Sendable {
    private enum Phase: Sendable {
        case idle
        case head
        /// The head had no body; `final` is false after a 1xx.
        case pendingEnd(final: Bool)
        case fixed(remaining: Int)
        case chunked
        case untilClose
        case failed(HTTP1ParseError)
    }

    private let limits: HTTP1Limits
    private var phase = Phase.idle
    private var toHEAD = false
    private var queued: [Bool] = []
    private var accumulator = HTTP1HeadAccumulator(allowsLeadingEmptyLine: false)
    private var statusLine: HTTP1StatusLine?
    private var chunked = HTTP1ChunkedDecoder()

    /// Creates an idle parser enforcing `limits`; call ``expectResponse(toHEAD:)`` before the first response.
    public init(limits: HTTP1Limits) {
        self.limits = limits
    }

    /// Keep a chunked response's trailer fields for ``takeTrailers()`` (otherwise they are checked and dropped).
    public var keepsTrailers: Bool {
        get { chunked.keepsTrailers }
        set { chunked.keepsTrailers = newValue }
    }

    /// The trailer field lines (`name: value` CRLF each, checked like head fields) of the chunked response that
    /// just ended (`.end`), once; empty when it had none. Call before the next response begins.
    public mutating func takeTrailers() -> [UInt8] {
        defer { chunked.trailers = [] }
        return chunked.trailers
    }

    /// Before each response: whether the request was HEAD (no body whatever the headers say).
    public mutating func expectResponse(toHEAD: Bool) {
        if case .idle = phase {
            self.toHEAD = toHEAD
            phase = .head
        } else {
            queued.append(toHEAD)
        }
    }

    /// Produces the next event from `input`, the caller's unconsumed bytes.
    public mutating func next(_ input: UnsafeRawBufferPointer) -> HTTP1ParseEvent<HTTP1ResponseHead> {
        switch phase {
        case .idle:
            return input.isEmpty ? .needMore(consumed: 0) : fail(.unsolicitedResponse)
        case .head:
            return nextHead(input)
        case .pendingEnd(let final):
            return finishMessage(final: final)
        case .fixed(let remaining):
            guard !input.isEmpty else { return .needMore(consumed: 0) }
            let take = min(remaining, input.count)
            phase = take == remaining ? .pendingEnd(final: true) : .fixed(remaining: remaining - take)
            return .body(0..<take, consumed: take)
        case .chunked:
            switch chunked.decode(input, limits) {
            case .body(let r, let consumed): return .body(r, consumed: consumed)
            case .needMore(let consumed): return .needMore(consumed: consumed)
            case .end(let consumed):
                _ = finishMessage(final: true)
                return .end(consumed: consumed)
            case .error(let code): return fail(code)
            }
        case .untilClose:
            guard !input.isEmpty else { return .needMore(consumed: 0) }
            return .body(0..<input.count, consumed: input.count)
        case .failed(let error):
            return .error(error)
        }
    }

    /// The peer closed: returns .end for an untilClose body in progress (or if idle between messages returns
    /// .needMore(0)), and .error(.truncatedMessage) if a head or CL/chunked body was truncated.
    ///
    /// `.needMore(consumed: 0)` is also returned when a response was expected but not one byte of it arrived:
    /// the caller knows it was waiting and may treat that as a closed idle connection (e.g. retry).
    public mutating func finishOnEOF() -> HTTP1ParseEvent<HTTP1ResponseHead> {
        switch phase {
        case .idle:
            return .needMore(consumed: 0)
        case .head:
            return accumulator.hasSeenBytes ? fail(.truncatedMessage) : .needMore(consumed: 0)
        case .pendingEnd(let final):
            return finishMessage(final: final)
        case .untilClose:
            return finishMessage(final: true)
        case .fixed, .chunked:
            return fail(.truncatedMessage)
        case .failed(let error):
            return .error(error)
        }
    }

    private mutating func fail(_ code: HTTP1ParseError.Code) -> HTTP1ParseEvent<HTTP1ResponseHead> {
        let error = HTTP1ParseError(code)
        phase = .failed(error)
        return .error(error)
    }

    /// After a 1xx the same request still awaits its final response; after a final one, the next queued one.
    private mutating func finishMessage(final: Bool) -> HTTP1ParseEvent<HTTP1ResponseHead> {
        if !final {
            phase = .head
        } else if queued.isEmpty {
            phase = .idle
        } else {
            toHEAD = queued.removeFirst()
            phase = .head
        }
        return .end(consumed: 0)
    }

    private mutating func nextHead(_ p: UnsafeRawBufferPointer) -> HTTP1ParseEvent<HTTP1ResponseHead> {
        while true {
            switch accumulator.scan(p, limits) {
            case .partialStartLine(_, let exhausted):
                return exhausted ? fail(.headerTooLarge) : .needMore(consumed: 0)
            case .startLine(let line, let bareLF):
                if bareLF { return fail(.bareLF) }
                do {
                    statusLine = try HTTP1StatusLine.parse(p, line, origin: accumulator.headStart)
                } catch {
                    return fail(error.code)
                }
            case .needMore:
                return .needMore(consumed: 0)
            case .error(let code):
                return fail(code)
            case .complete(let headEnd):
                return completeHead(p, headEnd: headEnd)
            }
        }
    }

    private mutating func completeHead(
        _ p: UnsafeRawBufferPointer, headEnd: Int
    ) -> HTTP1ParseEvent<HTTP1ResponseHead> {
        guard let line = statusLine else { return fail(.malformedStatusLine) }
        let facts = accumulator.facts
        var framing: HTTP1BodyFraming
        switch facts.responseFraming(line.version, status: line.status, toHEAD: toHEAD) {
        case .failure(let error): return fail(error.code)
        case .success(let f): framing = f
        }
        // 101 switches the connection to another protocol: this parser cannot follow it, so the exchange ends
        // here and the connection must not be reused for HTTP/1.1.
        let switching = line.status == 101
        if switching { framing = .none }
        let interim = line.status < 200 && !switching
        let keepAlive = !switching && framing != .untilClose && facts.persists(line.version)
        let head = HTTP1ResponseHead(
            bytes: accumulator.headBytes(p, headEnd: headEnd), version: line.version, status: line.status,
            reason: line.reason, fields: accumulator.takeFields(), framing: framing, keepAlive: keepAlive)
        statusLine = nil
        switch framing {
        case .none: phase = .pendingEnd(final: !interim)
        case .contentLength(let n): phase = .fixed(remaining: n)
        case .chunked:
            chunked = HTTP1ChunkedDecoder(keepsTrailers: chunked.keepsTrailers)
            phase = .chunked
        case .untilClose: phase = .untilClose
        }
        return .head(head, consumed: headEnd)
    }
}
