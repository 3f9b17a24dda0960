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
        if proxy.http.drain() == .now { close() }
    }

    /// Closes the exchange (logged as 499 if it had not answered), the HTTP/2 streams, then the socket.
    func close() {
        guard !closed else { return }
        closed = true
        proxy.close()
        mux?.closeAll()
        worker.loop.deregister(fd: transport.socket.fd)
        transport.close()
        worker.connectionClosed(self)
    }
}
