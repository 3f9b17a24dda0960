public import GatewayCore
/// The HTTP versions the gateway speaks on the wire. Anything else is `.unsupportedVersion` (505).
public enum HTTP1Version: Sendable, Equatable {
    case http10, http11
}

/// How the body of a message is delimited (RFC 9112 section 6.3).
public enum HTTP1BodyFraming: Sendable, Equatable {
    /// No body.
    case none
    /// Exactly n bytes (n > 0; `Content-Length: 0` gives `.none`).
    case contentLength(Int)
    /// Chunked transfer coding; the parser strips the framing and reports only data bytes.
    case chunked
    /// Responses only: the body runs until the server closes the connection.
    case untilClose
}

/// A header field as offsets into the owning head's `bytes` (GatewayCore's `HeaderField`). `value` has OWS trimmed
/// on both sides.
public typealias HTTP1Field = HeaderField

/// What one call to a parser's `next` produced. Exactly one event per call; the caller drops `consumed` bytes
/// from the front of its buffer and calls again with the rest plus anything newly read.
public enum HTTP1ParseEvent<Head: Sendable>: Sendable {
    /// Nothing more can be produced from the input; `consumed` bytes (possibly 0) were used up (e.g. a chunk-size
    /// line) and the caller drops them before calling again with more data.
    case needMore(consumed: Int)
    /// A complete head; `consumed` covers it (and an ignored leading empty line, if any).
    case head(Head, consumed: Int)
    /// Body bytes: `range` indexes the input buffer passed to this call; `consumed` >= range.upperBound.
    case body(Range<Int>, consumed: Int)
    /// The message is complete; the parser is ready for the next message (pipelining).
    case end(consumed: Int)
    /// Terminal: the caller answers (see ``HTTP1ParseError/status``) and closes the connection.
    case error(HTTP1ParseError)
}
