/// Size limits applied while parsing HTTP/1.1 messages.
///
/// Every limit bounds memory the parser (and the caller's buffer) may hold for one message before it gives up,
/// so a peer cannot make the gateway buffer without bound by never finishing a head or a chunk-size line.
public struct HTTP1Limits: Sendable, Equatable {
    /// The whole head, request/status line through the final CRLF. Exceeding it gives `.headerTooLarge` (431),
    /// reported as soon as that many bytes are buffered without the end of the head.
    /// The same bound applies to a chunked body's trailer section.
    public var maxHeaderBytes: Int
    /// The number of field lines in a head (or trailer section). Exceeding it gives `.tooManyHeaders` (431).
    public var maxHeaders: Int
    /// The request-target length. Exceeding it gives `.targetTooLong` (414), checked before `.headerTooLarge`.
    public var maxTargetBytes: Int
    /// A chunk-size line including extensions, CRLF excluded. Exceeding it gives `.badChunkSize` (400).
    public var maxChunkLineBytes: Int

    /// Creates limits; the defaults suit an edge proxy (nginx uses similar magnitudes).
    public init(
        maxHeaderBytes: Int = 32 * 1024, maxHeaders: Int = 100, maxTargetBytes: Int = 8 * 1024,
        maxChunkLineBytes: Int = 4096
    ) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaders = maxHeaders
        self.maxTargetBytes = maxTargetBytes
        self.maxChunkLineBytes = maxChunkLineBytes
    }
}
