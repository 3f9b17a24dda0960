import GatewayPosix
import GatewayTLS
import HTTP1

/// Keep-alive connections to one upstream, owned by one loop.
final class UpstreamPool {
    let target: UpstreamTarget
    unowned(unsafe) var worker: ProxyWorker! = nil
    private var idle: [UpstreamConnection] = []
    /// Connections idle at least this long are peeked at before reuse (upstream keep-alive timeouts are seconds).
    private let staleCheckMillis: UInt64 = 1_000

    /// HTTP/2 upstreams: the connections streams are opened on (the last one takes new streams while it can).
    private var sessions: [UpstreamH2Connection] = []

    init(target: UpstreamTarget) { self.target = target }

    /// What carries `head` upstream: an HTTP/1.1 connection (pooled or new), or a stream on an HTTP/2 connection
    /// (shared; a new one when none takes streams). Nil when connecting failed at once.
    func acquireLeg(for client: any UpstreamClient, head: HTTP1RequestHead, silenceMillis: UInt64) -> (any UpstreamLeg)? {
        let isHEAD = head.methodIs("HEAD")
        guard target.http2 else {
            guard let c = acquire(for: client, isHEAD: isHEAD) else { return nil }
            c.silenceMillis = silenceMillis
            return c
        }
        var session = sessions.last
        if session == nil || !session!.takesStreams {
            session = connectSession()
        }
        guard let session else { return nil }
        return session.open(for: client, silenceMillis: silenceMillis, isHEAD: isHEAD, teTrailers: head.teTrailers || head.grpc)
    }

    private func connectSession() -> UpstreamH2Connection? {
        guard !retired, let result = openSocket() else { return nil }
        guard let c = try? UpstreamH2Connection(socket: result.socket, pool: self, connecting: !result.connected,
                                                tls: result.tls) else {
            result.socket.close()
            return nil
        }
        do {
            try worker.loop.register(fd: result.socket.fd, events: IOEvents.all, handler: c)
        } catch {
            c.transport.close()
            return nil
        }
        sessions.append(c)
        return c
    }

    /// A socket connecting (or connected) to the upstream and, for `https://`, its TLS session.
    private func openSocket() -> (socket: Socket, connected: Bool, tls: TLSSession?)? {
        let result: (socket: Socket, connected: Bool)
        do { result = try Socket.connect(to: target.address) } catch { return nil }
        guard let context = target.tls else { return (result.socket, result.connected, nil) }
        guard let session = try? TLSSession(context: context, serverName: target.serverName) else {
            result.socket.close()
            return nil
        }
        return (result.socket, result.connected, session)
    }

    /// An HTTP/2 connection takes no new streams (GOAWAY, failed, closed).
    func removeSession(_ c: UpstreamH2Connection) {
        if let i = sessions.firstIndex(where: { $0 === c }) { sessions.remove(at: i) }
    }

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
        guard let result = openSocket() else { return nil }
        let c = UpstreamConnection(socket: result.socket, pool: self, connecting: !result.connected, tls: result.tls)
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
        for c in sessions { c.goAway() }
        sessions.removeAll()
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
        for c in sessions where !c.hasStreams { c.close() }
        sessions.removeAll { $0.isClosed }
    }
}
