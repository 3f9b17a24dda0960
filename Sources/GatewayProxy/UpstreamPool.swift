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
        guard let session = session(excluding: nil) else { return nil }
        let stream = session.open(for: client, silenceMillis: silenceMillis, isHEAD: isHEAD, teTrailers: head.teTrailers || head.grpc)
        stream.outcomePending = target.cluster != nil
        return stream
    }

    /// An HTTP/2 connection that takes a new stream: a shared one to the picked endpoint, else a new one; never
    /// `excluding` (and another endpoint than its own where the cluster has one). Nil when connecting failed at once.
    private func session(excluding: UpstreamH2Connection?) -> UpstreamH2Connection? {
        let endpoint = pickEndpoint(excluding: excluding?.endpoint ?? -1)
        guard endpoint.index >= -1 else { return nil }
        if let s = sessions.last(where: { $0 !== excluding && $0.endpoint == endpoint.index && $0.takesStreams }) {
            return s
        }
        guard let s = connectSession(endpoint) else {
            target.cluster?.done(endpoint.index, failed: true, now: worker.loop.now)
            return nil
        }
        return s
    }

    /// Where a stream the server refused (or did not take before its GOAWAY) goes again: another connection.
    func sessionForMove(from old: UpstreamH2Connection) -> UpstreamH2Connection? { session(excluding: old) }

    /// An exchange left `endpoint` without an outcome (its request moved elsewhere): only the count goes down.
    func abandon(endpoint: Int) {
        target.cluster?.abandon(endpoint)
    }

    /// The endpoint a new exchange goes to: (-1, the one address) without a cluster; index -2 when there is none.
    private func pickEndpoint(excluding: Int) -> (index: Int, address: SocketAddress) {
        guard let cluster = target.cluster else { return (-1, target.address) }
        return cluster.pick(now: worker.loop.now, excluding: excluding) ?? (-2, target.address)
    }

    /// An exchange's outcome on `endpoint`, for the cluster's ejection and least-request counts.
    func report(endpoint: Int, failed: Bool) {
        target.cluster?.done(endpoint, failed: failed, now: worker.loop.now)
    }

    private func connectSession(_ endpoint: (index: Int, address: SocketAddress)) -> UpstreamH2Connection? {
        // A retired pool still connects for its generation's exchanges in flight; the connection closes once idle.
        guard let result = openSocket(endpoint.address) else { return nil }
        guard let c = try? UpstreamH2Connection(socket: result.socket, pool: self, connecting: !result.connected,
                                                tls: result.tls, endpoint: endpoint.index) else {
            result.socket.close()
            return nil
        }
        c.peerLabel = endpoint.address.description
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
    private func openSocket(_ address: SocketAddress) -> (socket: Socket, connected: Bool, tls: TLSSession?)? {
        let result: (socket: Socket, connected: Bool)
        do { result = try Socket.connect(to: address) } catch { return nil }
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
        let endpoint = pickEndpoint(excluding: -1)
        guard endpoint.index >= -1 else { return nil }
        var i = idle.count - 1
        while i >= 0 {
            let c = idle[i]
            if c.isClosed || c.endpoint == endpoint.index {
                idle.remove(at: i)
                if !c.isClosed {
                    if worker.loop.now &- c.idleSince >= staleCheckMillis && c.peerClosedWhileIdle() {
                        c.close()
                    } else {
                        c.attach(client: client, isHEAD: isHEAD, reused: true)
                        c.outcomePending = target.cluster != nil
                        return c
                    }
                }
            }
            i -= 1
        }
        return connectAny(for: client, isHEAD: isHEAD, from: endpoint)
    }

    /// A new connection to `endpoint`, or (a refused connect, nothing sent) to the cluster's other endpoints in turn.
    private func connectAny(for client: any UpstreamClient, isHEAD: Bool,
                            from first: (index: Int, address: SocketAddress)) -> UpstreamConnection? {
        var endpoint = first
        var tried = 1
        while true {
            if let c = connect(for: client, isHEAD: isHEAD, to: endpoint) { return c }
            guard let cluster = target.cluster, tried < cluster.count,
                  let next = cluster.pick(now: worker.loop.now, excluding: endpoint.index) else { return nil }
            endpoint = next
            tried += 1
        }
    }

    /// Always a new connection (the retry path): to another endpoint than `excluding` when the cluster has one.
    func connect(for client: any UpstreamClient, isHEAD: Bool, excluding: Int) -> UpstreamConnection? {
        let endpoint = pickEndpoint(excluding: excluding)
        guard endpoint.index >= -1 else { return nil }
        return connectAny(for: client, isHEAD: isHEAD, from: endpoint)
    }

    private func connect(for client: any UpstreamClient, isHEAD: Bool,
                         to endpoint: (index: Int, address: SocketAddress)) -> UpstreamConnection? {
        guard let result = openSocket(endpoint.address) else {
            report(endpoint: endpoint.index, failed: true)
            return nil
        }
        let c = UpstreamConnection(socket: result.socket, pool: self, connecting: !result.connected, tls: result.tls)
        c.endpoint = endpoint.index
        c.peerLabel = endpoint.address.description
        do {
            try worker.loop.register(fd: result.socket.fd, events: IOEvents.all, handler: c)
        } catch {
            c.transport.close()
            report(endpoint: endpoint.index, failed: false)
            return nil
        }
        c.attach(client: client, isHEAD: isHEAD, reused: false)
        c.outcomePending = target.cluster != nil
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
