internal import CHiredis
import GatewayCore
import StateStore

/// The point on the monotonic clock by which a state operation must be done (`state.timeout`): connecting,
/// authenticating and each command get only what is left of it.
struct RedisDeadline {
    let atMillis: UInt64

    init(timeoutMillis: Int, now: UInt64 = MonotonicClock.nowMillis()) {
        atMillis = now &+ UInt64(max(timeoutMillis, 1))
    }

    /// Milliseconds left, or a `.timeout` error when none are.
    func remainingMillis(doing what: String) throws(StateStoreError) -> Int {
        let now = MonotonicClock.nowMillis()
        guard now < atMillis else { throw StateStoreError(.timeout, "redis \(what): state.timeout exceeded") }
        return Int(atMillis - now)
    }
}

/// One blocking connection to Redis, owned by exactly one `RedisClient` under its lock: the bytes travel over
/// `RedisTransport` (plain or TLS), hiredis formats each command (`redisFormatCommandArgv`) and parses the replies
/// (its `redisReader`) — no RESP written by hand.
///
/// Any thrown error means the connection is unusable (I/O error, EOF, timeout — after a timeout a late reply could
/// otherwise be read as the answer to the next command) and must be dropped. Error *replies* are not thrown: they
/// come back as `.error` and leave the connection in sync.
final class RedisConnection {
    private let transport: RedisTransport
    private let reader: UnsafeMutablePointer<redisReader>
    /// Reply bytes read from the transport, handed to the reader.
    private let inbound = ByteBuffer(capacity: 16 * 1024)

    /// Connects (TLS when `endpoint` says so), then authenticates and selects the database as `endpoint` says, all
    /// within `deadline`.
    init(endpoint: RedisEndpoint, tls: RedisTLS?, deadline: RedisDeadline) throws(StateStoreError) {
        // The transport first: a connect that throws leaves nothing to free (`deinit` does not run for an object
        // whose init failed before every property was set).
        transport = try RedisTransport(host: endpoint.host, port: endpoint.port, tls: endpoint.tls ? tls : nil,
                                       peer: endpoint.description, deadline: deadline)
        guard let reader = redisReaderCreate() else {
            throw StateStoreError(.unavailable, "redis connect \(endpoint): out of memory")
        }
        self.reader = reader
        if let password = endpoint.password {
            var auth = RedisCommand("AUTH")
            if let user = endpoint.user { auth.append(user) }
            auth.append(password)
            try expectOK(run(auth, deadline: deadline), "AUTH on \(endpoint)")
        }
        if endpoint.database != 0 {
            try expectOK(run(RedisCommand("SELECT", String(endpoint.database)), deadline: deadline), "SELECT on \(endpoint)")
        }
    }

    deinit { redisReaderFree(reader) }

    /// The most reply bytes one command may bring (the connection is dropped past it).
    static let maxReplyBytes = 16 << 20

    /// Sends `command` and waits for its reply, giving up when `deadline` passes.
    func run(_ command: RedisCommand, deadline: RedisDeadline) throws(StateStoreError) -> RedisReply {
        try send(command, deadline: deadline)
        return try readReply(deadline: deadline, doing: command.name)
    }

    /// Sends `command` without waiting for a reply (a subscribed connection's `PING`: its answer comes in turn).
    func send(_ command: RedisCommand, deadline: RedisDeadline) throws(StateStoreError) {
        try Self.withFormatted(command) { (bytes) throws(StateStoreError) in
            try transport.send(bytes, deadline: deadline, doing: command.name)
        }
    }

    /// Sends `commands` in one write, without waiting for replies (a pipeline: the caller reads one reply per command,
    /// in order, with `readReply`).
    func send(pipeline commands: [RedisCommand], deadline: RedisDeadline) throws(StateStoreError) {
        var wire: [UInt8] = []
        for command in commands {
            try Self.withFormatted(command) { bytes in wire.append(contentsOf: bytes) }
        }
        let failure: StateStoreError? = wire.withUnsafeBytes { bytes in
            do throws(StateStoreError) {
                try transport.send(bytes, deadline: deadline, doing: commands.first?.name ?? "pipeline")
                return nil
            } catch { return error }
        }
        if let failure { throw failure }
    }

    /// `command` in RESP as hiredis formats it, valid only during `body`.
    private static func withFormatted(_ command: RedisCommand,
                                      _ body: (UnsafeRawBufferPointer) throws(StateStoreError) -> Void) throws(StateStoreError) {
        var formatted: UnsafeMutablePointer<CChar>? = nil
        let length = command.withArgv { argc, argv, argvlen in redisFormatCommandArgv(&formatted, argc, argv, argvlen) }
        guard length > 0, let formatted else { throw StateStoreError(.unavailable, "redis \(command.name): out of memory") }
        defer { redisFreeCommand(formatted) }
        try body(UnsafeRawBufferPointer(start: formatted, count: Int(length)))
    }

    /// The next reply, waiting until `deadline`. A `.timeout` thrown with nothing sent since leaves the connection
    /// usable (a subscriber's idle wait: a partial reply stays in the reader); any other error does not.
    func readReply(deadline: RedisDeadline, doing what: String) throws(StateStoreError) -> RedisReply {
        var received = 0
        while true {
            var raw: UnsafeMutableRawPointer? = nil
            guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
                throw StateStoreError(.unavailable, "redis \(what): protocol error (\(String(cString: chiredis_reader_errstr(reader))))",
                                      cause: "protocol")
            }
            if let raw {
                defer { freeReplyObject(raw) }
                return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self)) ?? .error("unsupported reply type")
            }
            inbound.clear()
            do {
                try transport.receive(into: inbound, deadline: deadline, doing: what)
            } catch {
                // A TLS read can bring plaintext and then time out flushing the session's answer: keep what came, so
                // a subscriber that reads on after the timeout stays in step.
                if inbound.readableBytes > 0 {
                    _ = inbound.readable.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
                }
                throw error
            }
            // hiredis buffers a reply of any size: a hostile or broken server must not make the gateway allocate
            // without bound. The gateway's replies are small (the largest, an app's key ids, is kilobytes).
            received += inbound.readableBytes
            guard received <= Self.maxReplyBytes else {
                throw StateStoreError(.unavailable, "redis \(what): reply larger than \(Self.maxReplyBytes) bytes", cause: "protocol")
            }
            let fed = inbound.readable.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
            guard fed == REDIS_OK else { throw StateStoreError(.unavailable, "redis \(what): out of memory") }
        }
    }

    /// `script` as `EVALSHA` (its SHA-1 learnt with `SCRIPT LOAD` the first time, kept in `sha`), or as `EVAL` when the
    /// server answers `NOSCRIPT` (restarted, failed over, `SCRIPT FLUSH`, another Cluster node), which also caches it
    /// there. `appendArguments` adds numkeys, the keys and the arguments after the script reference.
    func runScript(_ script: RedisScript, sha: inout String?, deadline: RedisDeadline,
                   _ appendArguments: (inout RedisCommand) -> Void) throws(StateStoreError) -> RedisReply {
        let known: String
        if let sha {
            known = sha
        } else {
            known = try loadScript(script, deadline: deadline)
            sha = known
        }
        var evalsha = RedisCommand("EVALSHA")
        evalsha.append(known)
        appendArguments(&evalsha)
        let reply = try run(evalsha, deadline: deadline)
        guard case .error(let message) = reply, message.hasPrefix("NOSCRIPT") else { return reply }
        var evalCommand = RedisCommand("EVAL", capacity: script.source.utf8.count + 128)
        evalCommand.append(script.source)
        appendArguments(&evalCommand)
        return try run(evalCommand, deadline: deadline)
    }

    /// `SCRIPT LOAD`: caches `script` on this server and returns its SHA-1 (the same on every server).
    func loadScript(_ script: RedisScript, deadline: RedisDeadline) throws(StateStoreError) -> String {
        let loaded = try run(RedisCommand("SCRIPT", "LOAD", script.source), deadline: deadline)
        guard case .string(let bytes) = loaded else { throw loaded.unexpected("SCRIPT LOAD \(script.name)") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `WAIT n t` (`state.wait_replicas` = `count` > 0) after a write on this connection, unless the write itself failed
    /// (an error reply); fewer replicas than `count` within what is left of the budget is a failure (the write happened
    /// on the master, but a failover could lose it).
    func awaitReplicas(_ count: Int, _ deadline: RedisDeadline, after reply: RedisReply, server: String) throws(StateStoreError) {
        guard count > 0 else { return }
        // A failed write, or one that changed nothing (a refusal: no data for a failover to lose).
        if case .error = reply { return }
        if reply.changedNothing { return }
        let (wait, waitMillis) = try Self.waitCommand(count, deadline)
        try Self.checkWait(try run(wait, deadline: deadline), count, waitMillis, server: server)
    }

    /// `WAIT count t`, t three quarters of what is left of `deadline`: less than the read's own timeout, so WAIT
    /// answers before the read gives up. Also what a pipeline sends after its writes.
    static func waitCommand(_ count: Int, _ deadline: RedisDeadline) throws(StateStoreError) -> (RedisCommand, Int) {
        let budget = try deadline.remainingMillis(doing: "WAIT")
        let waitMillis = max(budget * 3 / 4, 1)
        return (RedisCommand("WAIT", String(count), String(waitMillis)), waitMillis)
    }

    /// WAIT's answer: fewer than `count` replicas is a failure (the write happened on the master, but a failover
    /// could lose it).
    static func checkWait(_ acknowledged: RedisReply, _ count: Int, _ waitMillis: Int, server: String) throws(StateStoreError) {
        guard case .integer(let n) = acknowledged else { throw acknowledged.unexpected("WAIT") }
        guard n >= count else {
            throw StateStoreError(.unavailable, "redis \(server): \(n) of \(count) replicas acknowledged the write within "
                                  + "\(waitMillis) ms (state.wait_replicas)", cause: "wait_replicas")
        }
    }

    private func expectOK(_ reply: RedisReply, _ what: String) throws(StateStoreError) {
        guard case .status("OK") = reply else { throw reply.unexpected(what) }
    }
}
