import GatewayPosix
import GatewayTLS

/// Keep-alive connections to one upstream, owned by one loop.
final class UpstreamPool {
    let target: UpstreamTarget
    unowned(unsafe) var worker: ProxyWorker! = nil
    private var idle: [UpstreamConnection] = []
    /// Connections idle at least this long are peeked at before reuse (upstream keep-alive timeouts are seconds).
    private let staleCheckMillis: UInt64 = 1_000

    init(target: UpstreamTarget) { self.target = target }

    /// A pooled connection if one is idle, else a new one (connecting). Nil when connecting failed at once.
    func acquire(for client: any UpstreamClient, isHEAD: Bool) -> UpstreamConnection? {
        while let c = idle.popLast() {
            if c.isClosed { continue }
            if worker.loop.now &- c.idleSince >= staleCheckMillis && c.peerClosedWhileIdle() {
                c.close()
                continue
            }
            c.attach(client: client, isHEAD: isHEAD, reused: true)
            return c
        }
        return connect(for: client, isHEAD: isHEAD)
    }

    /// Always a new connection (the retry path).
    func connect(for client: any UpstreamClient, isHEAD: Bool) -> UpstreamConnection? {
        let result: (socket: Socket, connected: Bool)
        do { result = try Socket.connect(to: target.address) } catch { return nil }
        var tls: TLSSession? = nil
        if let context = target.tls {
            guard let session = try? TLSSession(context: context, serverName: target.serverName) else {
                result.socket.close()
                return nil
            }
            tls = session
        }
        let c = UpstreamConnection(socket: result.socket, pool: self, connecting: !result.connected, tls: tls)
        do {
            try worker.loop.register(fd: result.socket.fd, events: IOEvents.all, handler: c)
        } catch {
            c.transport.close()
            return nil
        }
        c.attach(client: client, isHEAD: isHEAD, reused: false)
        return c
    }

    /// A reload removed or changed this upstream: no more pooling; idle connections close now.
    private(set) var retired = false

    func retire() {
        retired = true
        closeIdle()
    }

    /// Returns a connection after its exchange: pooled when reusable and there is room, closed otherwise.
    func release(_ c: UpstreamConnection, reusable: Bool) {
        c.detach()
        if reusable && !retired && !worker.draining && idle.count < target.maxIdleConnections {
            c.markIdle(until: worker.loop.now + worker.runtime.upstreamIdleMillis)
            idle.append(c)
        } else {
            c.close()
        }
    }

    func remove(_ c: UpstreamConnection) {
        if let i = idle.firstIndex(where: { $0 === c }) { idle.remove(at: i) }
    }

    func closeIdle() {
        for c in idle { c.close() }
        idle.removeAll()
    }
}
