/// A resumable HTTP/1.x request parser: bytes in, events out, no I/O.
///
/// Usage: call ``next(_:)`` with all unconsumed bytes; after each event drop `consumed` bytes from the front and
/// call again (adding newly read bytes after a `.needMore`). Any split of the same bytes yields the same heads,
/// body bytes and outcome. After `.end` the parser reads the next pipelined request; `.error` is terminal.
///
/// Strictness (see ``HTTP1ParseError/Code``) follows RFC 9112 wherever it lets a server reject, because the
/// gateway forwards requests to servers whose leniencies it does not know (request smuggling defence).
public struct HTTP1RequestParser: Sendable {
    private enum Phase: Sendable {
        case head
        /// The head had no body: the next call reports `.end(consumed: 0)`.
        case pendingEnd
        case fixed(remaining: Int)
        case chunked
        case failed(HTTP1ParseError)
    }

    private let limits: HTTP1Limits
    private var phase = Phase.head
    private var accumulator = HTTP1HeadAccumulator(allowsLeadingEmptyLine: true)
    private var requestLine: HTTP1RequestLine?
    private var chunked = HTTP1ChunkedDecoder()

    /// Creates a parser enforcing `limits`.
    public init(limits: HTTP1Limits) {
        self.limits = limits
    }

    /// Keep a chunked request's trailer fields for ``takeTrailers()`` (otherwise they are checked and dropped).
    public var keepsTrailers = false

    /// The trailer field lines (`name: value` CRLF each, checked like head fields) of the chunked request whose
    /// `.end` just came, once; empty when it had none.
    public mutating func takeTrailers() -> [UInt8] {
        defer { chunked.trailers = [] }
        return chunked.trailers
    }

    /// Produces the next event from `input`, the caller's unconsumed bytes.
    public mutating func next(_ input: UnsafeRawBufferPointer) -> HTTP1ParseEvent<HTTP1RequestHead> {
        switch phase {
        case .head:
            return nextHead(input)
        case .pendingEnd:
            phase = .head
            return .end(consumed: 0)
        case .fixed(let remaining):
            guard !input.isEmpty else { return .needMore(consumed: 0) }
            let take = min(remaining, input.count)
            phase = take == remaining ? .pendingEnd : .fixed(remaining: remaining - take)
            return .body(0..<take, consumed: take)
        case .chunked:
            switch chunked.decode(input, limits) {
            case .body(let r, let consumed): return .body(r, consumed: consumed)
            case .needMore(let consumed): return .needMore(consumed: consumed)
            case .end(let consumed):
                phase = .head
                return .end(consumed: consumed)
            case .error(let code): return fail(HTTP1ParseError(code))
            }
        case .failed(let error):
            return .error(error)
        }
    }

    private mutating func fail(_ error: HTTP1ParseError) -> HTTP1ParseEvent<HTTP1RequestHead> {
        phase = .failed(error)
        return .error(error)
    }

    private mutating func nextHead(_ p: UnsafeRawBufferPointer) -> HTTP1ParseEvent<HTTP1RequestHead> {
        while true {
            switch accumulator.scan(p, limits) {
            case .partialStartLine(let line, let exhausted):
                // 414 takes precedence over 431 so an over-long URL gets the status that names the problem.
                if HTTP1RequestLine.targetTooLong(p, line, max: limits.maxTargetBytes) {
                    return fail(HTTP1ParseError(.targetTooLong))
                }
                if exhausted { return fail(HTTP1ParseError(.headerTooLarge)) }
                return .needMore(consumed: 0)
            case .startLine(let line, let bareLF):
                if HTTP1RequestLine.targetTooLong(p, line, max: limits.maxTargetBytes) {
                    return fail(HTTP1ParseError(.targetTooLong))
                }
                if bareLF { return fail(HTTP1ParseError(.bareLF)) }
                do {
                    requestLine = try HTTP1RequestLine.parse(p, line, origin: accumulator.headStart)
                } catch {
                    return fail(error)
                }
            case .needMore:
                return .needMore(consumed: 0)
            case .error(let code):
                return fail(HTTP1ParseError(code))
            case .complete(let headEnd):
                return completeHead(p, headEnd: headEnd)
            }
        }
    }

    private mutating func completeHead(
        _ p: UnsafeRawBufferPointer, headEnd: Int
    ) -> HTTP1ParseEvent<HTTP1RequestHead> {
        guard let line = requestLine else { return fail(HTTP1ParseError(.malformedRequestLine)) }
        let facts = accumulator.facts
        let framing: HTTP1BodyFraming
        switch facts.requestFraming(line.version) {
        case .failure(let error): return fail(error)
        case .success(let f): framing = f
        }
        var head = HTTP1RequestHead(
            bytes: accumulator.headBytes(p, headEnd: headEnd), method: line.method, target: line.target,
            version: line.version, fields: accumulator.takeFields(), framing: framing,
            keepAlive: facts.persists(line.version),
            expectsContinue: facts.expectsContinue && line.version == .http11, host: facts.host)
        head.upgradeWebSocket = facts.upgradeWebSocket
        head.connectionUpgrade = facts.connectionUpgrade
        head.teTrailers = facts.teTrailers
        head.grpc = facts.grpc
        requestLine = nil
        switch framing {
        case .none, .untilClose: phase = .pendingEnd
        case .contentLength(let n): phase = .fixed(remaining: n)
        case .chunked:
            chunked = HTTP1ChunkedDecoder(keepsTrailers: keepsTrailers)
            phase = .chunked
        }
        return .head(head, consumed: headEnd)
    }
}
