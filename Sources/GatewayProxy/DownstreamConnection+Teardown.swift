import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// Going away: SIGTERM's drain, and the one way a client connection closes.
extension DownstreamConnection {
    /// SIGTERM: an idle connection closes now; a busy one after its response.
    func drain() {
        if let mux { mux.drain(); return }
        if tunnel != nil { return }   // a tunnel has no request boundary to stop at: it ends, or the drain timeout ends it
        if proxy.http.drain() == .now { close() }
    }

    /// Closes the exchange (logged as 499 if it had not answered), the HTTP/2 streams, then the socket.
    func close() {
        guard !closed else { return }
        if let tunnel, !tunnel.closed {
            tunnel.close()   // closes the upstream, logs, and comes back here
            return
        }
        closed = true
        proxy.close()
        mux?.closeAll()
        worker.loop.deregister(fd: transport.socket.fd)
        transport.close()
        worker.connectionClosed(self)
    }
}
