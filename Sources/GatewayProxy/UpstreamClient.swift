import HTTP1
import HTTP2
import GatewayCore

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
    /// The response's trailers (HTTP/2 trailers, HTTP/1.1 chunked trailer fields), before its end.
    func upstreamResponseTrailers(_ trailers: ResponseTrailers)
    /// The response is complete; `reusable`: the connection may serve another request.
    func upstreamResponseEnd(from up: any UpstreamLeg, reusable: Bool)
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

/// Trailer fields: lower-case names and values back to back in `bytes` (what nghttp2 takes as they are).
typealias ResponseTrailers = H2Fields

/// The exchange's handle on whatever carries its request upstream: an HTTP/1.1 connection of its own
/// (`UpstreamConnection`) or one stream of a shared HTTP/2 connection (`UpstreamH2Stream`).
protocol UpstreamLeg: AnyObject {
    var target: UpstreamTarget { get }
    /// The address this leg's connection went to (`ip:port`; a cluster's endpoint), for the access log.
    var peerLabel: String { get }
    /// Request bytes not yet sent (the exchange pauses the client's body above the high-water mark).
    var unsentRequestBytes: Int { get }
    /// A WebSocket handshake: a 101 naming websocket hands the connection to a tunnel (HTTP/1.1 only).
    var expectsUpgrade: Bool { get set }
    /// The request head as HTTP/1.1 text (`HeaderFilter`); an HTTP/2 stream turns it into its header block.
    func sendHead(_ write: (ByteBuffer) -> Void)
    /// Request-body bytes, as a chunk when the request goes to an HTTP/1.1 upstream chunked.
    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool)
    /// The request's trailers, before `sendBodyEnd` (dropped where the request is not chunked or HTTP/2).
    func sendTrailers(_ trailers: ResponseTrailers)
    /// The request body is complete.
    func sendBodyEnd(chunked: Bool)
    /// Sends what is buffered now.
    func flush()
    /// The client took the response bytes it had: read the upstream again.
    func resumeReading()
    /// The response is complete: back to the pool (`reusable`) or closed; an HTTP/2 stream just ends.
    func release(reusable: Bool)
    /// The exchange gives up (the client went, a limit): close the connection, or reset the stream.
    func abort()
}
