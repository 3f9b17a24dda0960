import GatewayCore
import HTTP1

/// A WebSocket handshake that the upstream switched: the connection becomes a `Tunnel`'s client side.
extension DownstreamConnection {
    func switchProtocols(_ response: HTTP1ResponseHead, upstream: UpstreamConnection, route: CompiledRoute) -> Bool {
        let before = outBuf.readableBytes
        HeaderFilter.appendSwitchingProtocolsHead(response, to: outBuf)
        let t = Tunnel(client: self, upstream: upstream, routeMetric: route.metricID, idleMillis: route.streamIdleMillis,
                       headBytes: outBuf.readableBytes - before)
        tunnel = t
        upstream.tunnel = t
        t.start()
        return true
    }

    /// The tunnel closed both sockets' relaying: log it, then close this connection.
    func tunnelClosed(_ t: Tunnel) {
        proxy.tunnelEnded(bytesFromClient: t.bytesUp, bytesToClient: t.headBytes + t.bytesDown)
        close()
    }
}
