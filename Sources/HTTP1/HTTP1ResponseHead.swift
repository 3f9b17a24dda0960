public import GatewayCore
/// A parsed response head. All ranges index `bytes`, the head exactly as received.
public struct HTTP1ResponseHead: Sendable, Equatable {
    /// The head exactly as received: status line through the empty line.
    public var bytes: [UInt8]
    /// The response's HTTP version.
    public var version: HTTP1Version
    /// The status code, 100...599.
    public var status: Int
    /// The reason phrase; may be empty.
    public var reason: Range<Int>
    /// The header fields in wire order.
    public var fields: [HTTP1Field]
    /// `.none` for 1xx/204/304 and responses to HEAD; then chunked, Content-Length, or `.untilClose`.
    public var framing: HTTP1BodyFraming
    /// False when framing is `.untilClose`, with Connection "close", for 1.0 without "keep-alive", and for 101.
    public var keepAlive: Bool

    /// Creates a head; normally only ``HTTP1ResponseParser`` does.
    public init(
        bytes: [UInt8], version: HTTP1Version, status: Int, reason: Range<Int>, fields: [HTTP1Field],
        framing: HTTP1BodyFraming, keepAlive: Bool
    ) {
        self.bytes = bytes
        self.version = version
        self.status = status
        self.reason = reason
        self.fields = fields
        self.framing = framing
        self.keepAlive = keepAlive
    }

    /// Whether field `i`'s name equals `lowercasedName` ASCII-case-insensitively (`lowercasedName` must be lower-case).
    public func fieldName(_ i: Int, equals lowercasedName: StaticString) -> Bool {
        HTTP1HeadAccess.fieldName(bytes, fields, i, equals: lowercasedName)
    }

    /// The value of the first field named `lowercasedName` (case-insensitive), if any.
    public func firstValue(named lowercasedName: StaticString) -> Range<Int>? {
        HTTP1HeadAccess.firstValue(bytes, fields, named: lowercasedName)
    }

    /// A 101 that switches to WebSocket: an Upgrade field names `websocket` (RFC 6455 4.2.2). Any other 101 answers
    /// something the gateway did not ask for.
    public var switchesToWebSocket: Bool {
        guard status == 101 else { return false }
        return bytes.withUnsafeBytes { p -> Bool in
            var found = false
            for f in fields where f.name.count == 7 && HTTP1Bytes.equalsLowercased(p, f.name, "upgrade") {
                HTTP1Bytes.forEachListElement(p, f.value) { element in
                    if HTTP1Bytes.equalsLowercased(p, element, "websocket") { found = true }
                    return true
                }
            }
            return found
        }
    }

    /// `bytes[r]` decoded as UTF-8 (invalid sequences repaired) — for logs and tests, not the hot path.
    public func string(_ r: Range<Int>) -> String { HTTP1HeadAccess.string(bytes, r) }

    /// Field values of `Connection` split into tokens (lower-cased strings) — used to drop the headers it names.
    public func connectionTokens() -> [String] { HTTP1HeadAccess.connectionTokens(bytes, fields) }
}

extension HTTP1ResponseHead {
    /// A response head that arrived as an HTTP/2 header block (`bytes` holds the names and values `fields` index;
    /// nghttp2 checked names, values and connection-specific fields). Framing: none when the block ended the
    /// stream (or `status`/`toHEAD` allow no content), a checked Content-Length when one is given, otherwise the
    /// stream's end (`untilClose`, relayed chunked to HTTP/1.1 clients). Nil: two different Content-Length values,
    /// or one that is not a number.
    public static func fromHTTP2(bytes: [UInt8], status: Int, fields: [(name: Range<Int>, value: Range<Int>)],
                                 endStream: Bool, toHEAD: Bool) -> HTTP1ResponseHead? {
        var length: Int? = nil
        var kept: [HTTP1Field] = []
        kept.reserveCapacity(fields.count)
        let ok = bytes.withUnsafeBytes { p -> Bool in
            for f in fields {
                if f.name.count == 14 && HTTP1Bytes.equalsLowercased(p, f.name, "content-length") {
                    var n = 0
                    guard !f.value.isEmpty, f.value.count <= 15 else { return false }
                    for k in f.value {
                        guard p[k] >= 48 && p[k] <= 57 else { return false }
                        n = n * 10 + Int(p[k] - 48)
                    }
                    if let l = length, l != n { return false }
                    length = n
                }
                kept.append(HTTP1Field(name: f.name, value: f.value))
            }
            return true
        }
        guard ok else { return nil }
        let framing: HTTP1BodyFraming
        if endStream || toHEAD || status < 200 || status == 204 || status == 304 {
            framing = .none
        } else if let length {
            framing = .contentLength(length)
        } else {
            framing = .untilClose
        }
        return HTTP1ResponseHead(bytes: bytes, version: .http11, status: status, reason: 0..<0, fields: kept,
                                 framing: framing, keepAlive: true)
    }
}
