import GatewayCore
public import GatewayPosix
import GatewayTLS
public import Observability
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
    let budget: ConnectionBudget
    let accessLog: AccessLog
    private var listeners: [ListenerHandler] = []
    private var connections: [ObjectIdentifier: DownstreamConnection] = [:]
    /// SIGTERM/SIGINT seen: no new connections, keep-alive ends after the in-flight response.
    private(set) var draining = false

    /// The configuration new requests use. A request keeps the generation it started with (`Exchange.generation`),
    /// so a reload never changes the route, verifiers or pool under a request in flight.
    private(set) var current: LoopGeneration
    var runtime: ProxyRuntime { current.runtime }
    var routes: [CompiledRoute] { current.routes }

    // Hot constants, held here rather than in globals (a global costs a once-check per access).
    private(set) var headerTimeout: UInt64
    private(set) var idleTimeout: UInt64
    let highWater: Int
    let lingerMillis: UInt64 = 2_000
    /// Scratch space for building header lines on this loop.
    let scratch = ByteBuffer(capacity: 1024)
    /// `Date` for the responses this loop makes itself.
    let httpDate = HTTPDate()
    /// This loop's request counters (read by a scrape through `loop.execute`).
    public let metrics = LoopMetrics()
    /// Generated request ids: a random prefix per loop and a counter.
    let requestIDs = RequestIDGenerator()

    public init(index: Int, runtime: ProxyRuntime, budget: ConnectionBudget, accessLog: Bool) throws(PosixError) {
        loop = try EventLoop(index: index)
        self.budget = budget
        self.accessLog = AccessLog(enabled: accessLog)
        headerTimeout = runtime.headerTimeoutMillis
        idleTimeout = runtime.idleTimeoutMillis
        highWater = runtime.highWaterBytes
        current = LoopGeneration(runtime: runtime, previous: nil)
        for pool in current.pools { pool.worker = self }
        let log = self.accessLog
        loop.afterIteration = { [unowned self] in
            log.flush()
            self.current.runtime.state?.kick()
        }
    }

    /// Switches new requests to `runtime` (a reload; runs on this loop). Unchanged upstreams keep their pools (and
    /// idle connections), unchanged App Check verifiers their verified-token caches; the pools of removed or changed
    /// upstreams close their idle connections now and their busy ones when the request in flight ends.
    public func install(_ runtime: ProxyRuntime) {
        let old = current
        current = LoopGeneration(runtime: runtime, previous: old)
        for pool in current.pools { pool.worker = self }
        for pool in old.pools where !current.pools.contains(where: { $0 === pool }) { pool.retire() }
        headerTimeout = runtime.headerTimeoutMillis
        idleTimeout = runtime.idleTimeoutMillis
    }

    /// Binds this worker's listening sockets.
    public func bind() throws(PosixError) {
        for (index, address) in current.runtime.listenAddresses.enumerated() {
            let socket = try Socket.listen(on: address)
            let handler = ListenerHandler(socket: socket, worker: self, index: index)
            try loop.register(fd: socket.fd, events: IOEvents.readable, handler: handler)
            listeners.append(handler)
        }
    }

    /// Runs the loop until drained.
    public func run() {
        loop.run()
        accessLog.flush()
    }

    /// Takes a freshly accepted client connection.
    func adopt(_ socket: Socket, peer: SocketAddress, listener: Int) {
        var tls: TLSSession? = nil
        if listener < current.runtime.listenerTLS.count, let context = current.runtime.listenerTLS[listener] {
            guard let session = try? TLSSession(context: context) else {
                socket.close()
                budget.release()
                return
            }
            tls = session
        }
        let http2 = listener < current.runtime.listenerHTTP2.count && current.runtime.listenerHTTP2[listener]
        var trustedPeer = false
        if listener < current.runtime.listenerTrustedProxies.count, !current.runtime.listenerTrustedProxies[listener].isEmpty {
            let bytes = peer.addressBytes
            trustedPeer = current.runtime.listenerTrustedProxies[listener].contains { $0.contains(bytes) }
        }
        let connection = DownstreamConnection(socket: socket, worker: self, clientAddress: Array(peer.hostString.utf8), tls: tls,
                                              http2: http2, trustedPeer: trustedPeer)
        do {
            try loop.register(fd: socket.fd, events: IOEvents.all, handler: connection)
        } catch {
            socket.close()
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
        for pool in current.pools { pool.closeIdle() }
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
    let socket: Socket
    unowned let worker: ProxyWorker
    /// The listener's position in the configuration (its TLS context).
    let index: Int
    var deadline: UInt64 { 0 }
    private var closed = false

    init(socket: Socket, worker: ProxyWorker, index: Int) {
        self.socket = socket
        self.worker = worker
        self.index = index
    }

    func onEvents(_ events: UInt32) {
        // Bounded so one loop cannot starve its other connections while a burst arrives.
        for _ in 0..<64 {
            guard !closed, let (client, peer) = socket.accept() else { return }
            guard worker.budget.tryAcquire() else {
                client.close()   // at max_connections: refuse at once rather than queue
                continue
            }
            worker.adopt(client, peer: peer, listener: index)
        }
    }

    func onTimeout(now: UInt64) {}

    func close() {
        guard !closed else { return }
        closed = true
        worker.loop.deregister(fd: socket.fd)
        socket.close()
    }
}

/// One configuration as one loop uses it: routes, per-verifier caches and upstream pools. Loop-confined.
final class LoopGeneration {
    let runtime: ProxyRuntime
    let routes: [CompiledRoute]
    /// Per route, each verifier's state for this loop (`makeLoopState`: caches, key-set readers), one per verifier
    /// (shared by the routes that name it, and kept across a reload that keeps the verifier).
    let loopStates: [[AnyObject?]]
    let pools: [UpstreamPool]

    /// Builds the generation for `runtime`, taking over from `previous` what has not changed.
    init(runtime: ProxyRuntime, previous: LoopGeneration?) {
        self.runtime = runtime
        routes = runtime.routes.routes
        var byVerifier: [ObjectIdentifier: AnyObject] = [:]
        if let previous {
            for (route, states) in zip(previous.routes, previous.loopStates) {
                for (v, state) in zip(route.verification?.verifiers ?? [], states) {
                    if let state { byVerifier[ObjectIdentifier(v)] = state }
                }
            }
        }
        loopStates = runtime.routes.routes.map { route in
            (route.verification?.verifiers ?? []).map { v -> AnyObject? in
                if let state = byVerifier[ObjectIdentifier(v)] { return state }
                let state: AnyObject? = v.makeLoopState()
                if let state { byVerifier[ObjectIdentifier(v)] = state }
                return state
            }
        }
        pools = runtime.upstreams.map { target in
            previous?.pools.first { $0.target == target } ?? UpstreamPool(target: target)
        }
    }
}
