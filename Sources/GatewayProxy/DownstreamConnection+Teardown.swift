import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// Going away: SIGTERM's drain, and the one way a client connection (or a stream's exchange) closes.
extension DownstreamConnection {
    /// SIGTERM: an idle connection closes now; a busy one after its response.
    func drain() {
        if let mux { mux.drain(); return }
        if http.drain() == .now { close() }
    }

    func close() {
        guard !closed else { return }
        closed = true
        if http.phase == .exchanging && !exchange.logged && mux == nil {
            logExchange(status: exchange.status == 0 ? 499 : exchange.status)
        }
        abortUpstream()
        if let stream {
            stream.connectionClosed()
            return
        }
        mux?.closeAll()
        if let transport {
            worker.loop.deregister(fd: transport.socket.fd)
            transport.close()
        }
        worker.connectionClosed(self)
    }

    func abortUpstream() {
        if let up = exchange.upstream {
            exchange.upstream = nil
            up.pool.remove(up)
            up.close()
        }
    }
}
