import HTTP1

/// Why an exchange with the upstream failed; the client gets 502 or 504 from this.
enum UpstreamFailure {
    case connectFailed
    case connectTimeout
    case responseTimeout
    case invalidResponse
    /// The upstream closed (or reset) before a complete response.
    case closed

    var response: LocalResponse {
        switch self {
        case .connectFailed: .badGateway("upstream_unreachable")
        case .connectTimeout: .badGateway("upstream_connect_timeout")
        case .responseTimeout: .gatewayTimeout()
        case .invalidResponse: .badGateway("upstream_invalid_response")
        case .closed: .badGateway("upstream_closed")
        }
    }
}

/// What an upstream connection tells the exchange it serves: the only way it reaches the client's side.
protocol UpstreamClient: AnyObject {
    /// A response head (interim ones too).
    func upstreamResponseHead(_ response: HTTP1ResponseHead)
    /// Response-body bytes; true when the upstream should stop reading (the client is slow).
    func upstreamResponseBody(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The response is complete; `reusable`: the connection may serve another request.
    func upstreamResponseEnd(from up: UpstreamConnection, reusable: Bool)
    /// The exchange failed (502/504, or a cut connection once the response has started).
    func upstreamFailed(_ failure: UpstreamFailure)
    /// A pooled connection failed before sending a byte: the request moves to a fresh connection.
    func retryOnFreshConnection(from old: UpstreamConnection)
    /// The request buffer drained below the high-water mark: more of the body may come.
    func upstreamCanTakeMore()
    /// A read ended: relay what it brought now, not when the next one comes.
    func upstreamReadEnded()
    /// The upstream answered a WebSocket handshake with 101 (only when `expectsUpgrade` was set): from here on the
    /// connection carries the tunnel's bytes; what follows the head is still in `up.inBuf`.
    func upstreamSwitchedProtocols(_ response: HTTP1ResponseHead, from up: UpstreamConnection)
}
