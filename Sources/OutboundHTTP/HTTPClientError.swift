/// Why a control-plane HTTP call produced no usable response.
///
/// `kind` is the closed list callers branch on; `description` adds libcurl's detail for logs.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    /// The failure classes a caller can act on.
    public enum Kind: Sendable, Equatable {
        /// The whole exchange took longer than the timeout.
        case timeout
        /// The host name could not be resolved (or the proxy's).
        case dns
        /// The TCP connection was refused or unreachable.
        case connect
        /// The TLS handshake failed: unknown CA, wrong host name, protocol below TLS 1.2, ...
        case tls
        /// The body was longer than `maxBodyBytes`.
        case bodyTooLarge
        /// The server answered with a status the caller does not accept (e.g. a key-set fetch that is not 200).
        case unexpectedStatus(Int)
        /// The request could not be formed (bad URL, unsupported scheme, handle allocation).
        case invalidRequest
        /// Any other transport failure (connection reset, malformed response, ...).
        case transport
    }

    public let kind: Kind
    public let description: String

    public init(kind: Kind, description: String) {
        self.kind = kind
        self.description = description
    }

    static func timeout(_ detail: String) -> HTTPClientError { .init(kind: .timeout, description: "timeout: \(detail)") }
    static func dns(_ detail: String) -> HTTPClientError { .init(kind: .dns, description: "DNS: \(detail)") }
    static func connect(_ detail: String) -> HTTPClientError { .init(kind: .connect, description: "connect: \(detail)") }
    static func tls(_ detail: String) -> HTTPClientError { .init(kind: .tls, description: "TLS: \(detail)") }
    static func bodyTooLarge(_ limit: Int) -> HTTPClientError {
        .init(kind: .bodyTooLarge, description: "body too large: more than \(limit) bytes")
    }
    static func invalidRequest(_ detail: String) -> HTTPClientError {
        .init(kind: .invalidRequest, description: "invalid request: \(detail)")
    }
    static func transport(_ detail: String) -> HTTPClientError {
        .init(kind: .transport, description: "transport: \(detail)")
    }
}
