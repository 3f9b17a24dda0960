public import GatewayCore
/// A parsed request head. All ranges index `bytes`, which holds the head exactly as received, so the proxy can
/// forward unchanged fields without re-serialising them.
public struct HTTP1RequestHead: Sendable, Equatable {
    /// The head exactly as received: request line through the empty line (CRLF CRLF).
    public var bytes: [UInt8]
    /// The method token (case-sensitive).
    public var method: Range<Int>
    /// The request-target (origin-, absolute-, authority- or asterisk-form).
    public var target: Range<Int>
    /// The request's HTTP version.
    public var version: HTTP1Version
    /// The header fields in wire order.
    public var fields: [HTTP1Field]
    /// `.none`, `.contentLength` or `.chunked`.
    public var framing: HTTP1BodyFraming
    /// 1.1: true unless Connection has "close"; 1.0: only with Connection "keep-alive" (and no "close").
    public var keepAlive: Bool
    /// `Expect: 100-continue` (case-insensitive) on an HTTP/1.1 request; 1.0 peers do not know 100 (RFC 9110 10.1.1).
    public var expectsContinue: Bool
    /// The Host field value (at most one Host field is accepted).
    public var host: Range<Int>?
    /// An Upgrade field names `websocket`: a WebSocket handshake is attempted (RFC 6455 4.1), whatever else the
    /// head says; only such a request may switch protocols.
    public var upgradeWebSocket = false
    /// Connection names `upgrade`.
    public var connectionUpgrade = false
    /// The client's TE lists "trailers".
    public var teTrailers = false
    /// A gRPC call (Content-Type application/grpc…): rejections are trailers-only, idle limits are per stream.
    public var grpc = false

    /// Creates a head; normally only ``HTTP1RequestParser`` does.
    public init(
        bytes: [UInt8], method: Range<Int>, target: Range<Int>, version: HTTP1Version, fields: [HTTP1Field],
        framing: HTTP1BodyFraming, keepAlive: Bool, expectsContinue: Bool, host: Range<Int>?
    ) {
        self.bytes = bytes
        self.method = method
        self.target = target
        self.version = version
        self.fields = fields
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectsContinue = expectsContinue
        self.host = host
    }

    /// Whether field `i`'s name equals `lowercasedName` ASCII-case-insensitively (`lowercasedName` must be lower-case).
    public func fieldName(_ i: Int, equals lowercasedName: StaticString) -> Bool {
        HTTP1HeadAccess.fieldName(bytes, fields, i, equals: lowercasedName)
    }

    /// The value of the first field named `lowercasedName` (case-insensitive), if any.
    public func firstValue(named lowercasedName: StaticString) -> Range<Int>? {
        HTTP1HeadAccess.firstValue(bytes, fields, named: lowercasedName)
    }

    /// A well-formed WebSocket opening handshake (RFC 6455 4.1): an HTTP/1.1 GET without a body whose Upgrade names
    /// websocket and whose Connection names upgrade. A request with `upgradeWebSocket` and not this shape is refused.
    public var isWebSocketHandshake: Bool {
        upgradeWebSocket && connectionUpgrade && version == .http11 && framing == .none && methodIs("GET")
    }

    /// A CORS preflight (Fetch standard, "CORS-preflight request"): OPTIONS without a body, with an Origin and an
    /// Access-Control-Request-Method naming a method token. Anything short of that is an ordinary OPTIONS request.
    public var isCORSPreflight: Bool {
        guard framing == .none, methodIs("OPTIONS") else { return false }
        return bytes.withUnsafeBytes { p -> Bool in
            var origin = false, method = false
            for f in fields {
                if f.name.count == 6 && HTTP1Bytes.equalsLowercased(p, f.name, "origin") {
                    origin = !f.value.isEmpty
                } else if f.name.count == 29 && HTTP1Bytes.equalsLowercased(p, f.name, "access-control-request-method") {
                    method = !f.value.isEmpty && f.value.allSatisfy { HTTP1Bytes.isToken(p[$0]) }
                }
            }
            return origin && method
        }
    }

    /// Whether the method is exactly `m` (methods are case-sensitive).
    public func methodIs(_ m: StaticString) -> Bool {
        bytes.withUnsafeBytes { HTTP1Bytes.equalsExactly($0, method, m) }
    }

    /// `bytes[r]` decoded as UTF-8 (invalid sequences repaired) — for logs and tests, not the hot path.
    public func string(_ r: Range<Int>) -> String { HTTP1HeadAccess.string(bytes, r) }

    /// Field values of `Connection` split into tokens (lower-cased strings) — used to drop the headers it names.
    public func connectionTokens() -> [String] { HTTP1HeadAccess.connectionTokens(bytes, fields) }
}
