import GatewayCore
import GatewayPosix
import HTTP1
import Observability

extension ProxyExchange {
    /// The upstream switched a WebSocket handshake to the tunnel: the carrier takes both sockets from here on;
    /// the exchange only logs the tunnel when it ends (`tunnelEnded`).
    func upstreamSwitchedProtocols(_ response: HTTP1ResponseHead, from up: UpstreamConnection) {
        exchange.upstream = nil
        guard exchange.webSocket, !closed, exchange.routeIndex >= 0 else {
            up.close()
            upstreamFailed(.invalidResponse)
            return
        }
        exchange.status = 101
        exchange.upstreamStatus = 101
        noteUpstreamLatency(up)
        http.responseBegan()
        http.closeAfterResponse()
        clearDeadline()
        guard carrier.switchProtocols(response, upstream: up, route: gen.routes[exchange.routeIndex]) else {
            up.close()
            close()
            return
        }
    }

    /// The tunnel closed: one access-log line for its whole life (status 101, the bytes each way).
    func tunnelEnded(bytesFromClient: Int, bytesToClient: Int) {
        guard !exchange.logged else { return }
        exchange.bytesIn += bytesFromClient
        exchange.extraBytesOut = bytesToClient
        logExchange(status: 101)
    }
}
