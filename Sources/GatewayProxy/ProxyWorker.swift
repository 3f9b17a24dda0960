#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import Observability
import Synchronization
import Attestation

/// The process-wide cap on open client connections (`limits.max_connections`), shared by all loops.
public final class ConnectionBudget: Sendable {
    public let limit: Int
    private let active = Atomic<Int>(0)

    public init(limit: Int) { self.limit = limit }

    /// Takes one slot; false when the gateway is at its limit.
    @inline(__always) public func tryAcquire() -> Bool {
        let now = active.add(1, ordering: .relaxed).newValue
        if now > limit { active.subtract(1, ordering: .relaxed); return false }
        return true
    }

    @inline(__always) public func release() { active.subtract(1, ordering: .relaxed) }

    public var current: Int { active.load(ordering: .relaxed) }
}

/// One event loop's share of the gateway: its own listening sockets (SO_REUSEPORT), client connections,
/// upstream pools and access-log buffer. Loop-confined; other threads reach it only through `loop.execute`.
public final class ProxyWorker: @unchecked Sendable {
    public let loop: EventLoop
    let runtime: ProxyRuntime
    let budget: ConnectionBudget
    let accessLog: AccessLog
    var pools: [UpstreamPool] = []
    private var listeners: [ListenerHandler] = []
    private var connections: [ObjectIdentifier: DownstreamConnection] = [:]
    /// SIGTERM/SIGINT seen: no new connections, keep-alive ends after the in-flight response.
    private(set) var draining = false

    // Hot constants, held here rather than in globals (a global costs a once-check per access).
    let headerTimeout: UInt64
    let idleTimeout: UInt64
    let highWater: Int
    let lingerMillis: UInt64 = 2_000
    let routes: [CompiledRoute]
    /// Per route, one verified-token cache per verifier (loop-confined, so no locks).
    let tokenCaches: [[VerifiedTokenCache?]]
    /// Scratch space for building header lines on this loop.
    let scratch = ByteBuffer(capacity: 1024)

    public init(index: Int, runtime: ProxyRuntime, budget: ConnectionBudget, accessLog: Bool) throws(PosixError) {
        loop = try EventLoop(index: index)
        self.runtime = runtime
        self.budget = budget
        self.accessLog = AccessLog(enabled: accessLog)
        headerTimeout = runtime.headerTimeoutMillis
        idleTimeout = runtime.idleTimeoutMillis
        highWater = runtime.highWaterBytes
        routes = runtime.routes.routes
        // One cache per (loop, verifier), shared by the routes that name the verifier.
        var byVerifier: [ObjectIdentifier: VerifiedTokenCache] = [:]
        tokenCaches = runtime.routes.routes.map { route in
            (route.verification?.verifiers ?? []).map { routeVerifier -> VerifiedTokenCache? in
                guard case .appCheck(let v) = routeVerifier, v.verifiedTokenCacheSize > 0 else { return nil }
                if let c = byVerifier[ObjectIdentifier(v)] { return c }
                let c = VerifiedTokenCache(capacity: v.verifiedTokenCacheSize)
                byVerifier[ObjectIdentifier(v)] = c
                return c
            }
        }
        pools = runtime.upstreams.map { UpstreamPool(target: $0) }
        for pool in pools { pool.worker = self }
        let log = self.accessLog
        let state = runtime.state
        loop.afterIteration = {
            log.flush()
            state?.kick()
        }
    }

    /// Binds this worker's listening sockets.
    public func bind() throws(PosixError) {
        for address in runtime.listenAddresses {
            let fd = try Socket.listen(on: address)
            let handler = ListenerHandler(fd: fd, worker: self)
            try loop.register(fd: fd, events: IOEvents.readable, handler: handler)
            listeners.append(handler)
        }
    }

    /// Runs the loop until drained.
    public func run() {
        loop.run()
        accessLog.flush()
    }

    /// Takes a freshly accepted client connection.
    func adopt(fd: Int32, peer: SocketAddress) {
        let connection = DownstreamConnection(fd: fd, worker: self, clientAddress: Array(peer.hostString.utf8))
        do {
            try loop.register(fd: fd, events: IOEvents.all, handler: connection)
        } catch {
            close(fd)
            budget.release()
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    func connectionClosed(_ connection: DownstreamConnection) {
        connections.removeValue(forKey: ObjectIdentifier(connection))
        budget.release()
        if draining && connections.isEmpty { loop.stop() }
    }

    /// Stops accepting and lets in-flight requests finish; the loop stops when the last connection closes.
    public func beginDrain() {
        guard !draining else { return }
        draining = true
        for l in listeners { l.close() }
        listeners.removeAll()
        for pool in pools { pool.closeIdle() }
        for c in Array(connections.values) { c.drain() }
        if connections.isEmpty { loop.stop() }
    }

    /// Closes every connection at once (the drain timeout passed).
    public func forceStop() {
        for c in Array(connections.values) { c.close() }
        loop.stop()
    }

    public var openConnections: Int { connections.count }

    /// Unix seconds for token checks (wall clock: tokens carry wall-clock times).
    @inline(__always) func unixNow() -> Int64 { WallClock.unixSeconds() }
}

/// A listening socket: accepts until the queue is empty, within the connection budget.
final class ListenerHandler: LoopHandler {
    let fd: Int32
    unowned let worker: ProxyWorker
    var deadline: UInt64 { 0 }
    private var closed = false

    init(fd: Int32, worker: ProxyWorker) {
        self.fd = fd
        self.worker = worker
    }

    func onEvents(_ events: UInt32) {
        // Bounded so one loop cannot starve its other connections while a burst arrives.
        for _ in 0..<64 {
            guard !closed, let (client, peer) = Socket.accept(fd) else { return }
            guard worker.budget.tryAcquire() else {
                Glibc.close(client)   // at max_connections: refuse at once rather than queue
                continue
            }
            worker.adopt(fd: client, peer: peer)
        }
    }

    func onTimeout(now: UInt64) {}

    func close() {
        guard !closed else { return }
        closed = true
        worker.loop.deregister(fd: fd)
        Glibc.close(fd)
    }
}
