import GatewayCore
import StateStore

/// One Redis connection shared by all callers behind a mutex, with lazy connect, a per-operation deadline and
/// reconnect backoff (`RedisReconnectStateMachine`).
///
/// Calls block; the gateway makes them off its event loops. One connection serialises all state operations of a
/// process, which is fine at the rates one replica sees (a round trip is tens of µs on a LAN); a pool can come later.
final class RedisClient: RedisExecutor {
    private struct Locked {
        var machine = RedisReconnectStateMachine()
        var connection: RedisConnection?
        /// The last failure's error (nil once a connect succeeds): what fail-fast answers repeat, and how a change of
        /// state is told apart from the same failure again.
        var lastFailure: StateStoreError?
        /// SHA-1 of each `RedisScript` as `SCRIPT LOAD` returned it (nil until first use).
        var scriptSHAs = [String?](repeating: nil, count: RedisScript.all.count)
        /// Sentinel: the sentinel that answered last (asked first next time) and the master it named.
        var preferredSentinel = 0
        var masterAddress: RedisNode?
        /// Sentinel: the master a `+switch-master` announced, until `announcedUntilMillis`: connected to directly (if
        /// it passes the master check) rather than through a sentinel that may not have seen the switch yet.
        var announced: RedisNode?
        var announcedUntilMillis: UInt64 = 0
    }

    /// One endpoint, or the master the sentinels name.
    let target: RedisTarget
    /// `rediss://` (or `tls: true` with sentinels): the TLS context and the name checked.
    let tls: RedisTLS?
    let timeoutMillis: Int
    /// `state.wait_replicas`: after a write, `WAIT` for this many replicas within what is left of the operation's
    /// budget; fewer is a failure (the write happened on the master, but a failover could lose it).
    let waitReplicas: Int
    private let locked = AnnotatedMutex(Locked())
    private let onEvent: @Sendable (RedisStateStore.Event) -> Void

    init(target: RedisTarget, tls: RedisTLS? = nil, timeoutMillis: Int, waitReplicas: Int = 0,
         onEvent: @escaping @Sendable (RedisStateStore.Event) -> Void = { _ in }) {
        self.target = target
        self.tls = tls
        self.timeoutMillis = max(timeoutMillis, 1)
        self.waitReplicas = max(waitReplicas, 0)
        self.onEvent = onEvent
    }

    /// Runs one command; error replies come back as `.error`, connection failures are thrown. `write`: the command
    /// changes data, so `wait_replicas` applies to it.
    func run(_ command: RedisCommand, write: Bool) throws(StateStoreError) -> RedisReply {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        return try withConnection(deadline) { (connection) throws(StateStoreError) -> RedisReply in
            let reply = try connection.run(command, deadline: deadline)
            if write { try awaitReplicas(connection, deadline, after: reply) }
            return reply
        }
    }

    func ping() throws(StateStoreError) {
        let reply = try run(RedisCommand("PING"), write: false)
        guard case .status("PONG") = reply else { throw reply.unexpected("PING") }
    }

    /// `WAIT n t` on the connection that wrote, unless the write itself failed (an error reply).
    private func awaitReplicas(_ connection: RedisConnection, _ deadline: RedisDeadline, after reply: RedisReply) throws(StateStoreError) {
        try connection.awaitReplicas(waitReplicas, deadline, after: reply, server: target.description)
    }

    /// Runs `script` with the keys and arguments `appendArguments` adds after the script reference (numkeys first).
    /// Every script the store runs writes, except reads marked `write: false`.
    func eval(_ script: RedisScript, write: Bool, _ appendArguments: (inout RedisCommand) -> Void)
        throws(StateStoreError) -> RedisReply {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        return try withConnection(deadline) { (connection, shas) throws(StateStoreError) -> RedisReply in
            let reply = try connection.runScript(script, sha: &shas[script.id], deadline: deadline, appendArguments)
            if write { try awaitReplicas(connection, deadline, after: reply) }
            return reply
        }
    }

    /// `eval` of a write script that answers one 0/1 flag per key (`consumeMany`, `advanceCounterMany`), keeping
    /// the script's reply when only the `WAIT` after it fails: `waitFailure` is then that failure, which fails the
    /// keys the script wrote (its 1s) but not its 0s — a value it left alone is a refusal, true whatever the
    /// replicas acknowledged. Anything failing before the reply is thrown.
    func evalReportingWait(_ script: RedisScript, _ appendArguments: (inout RedisCommand) -> Void)
        throws(StateStoreError) -> (reply: RedisReply, waitFailure: StateStoreError?) {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        var answered: RedisReply? = nil
        do throws(StateStoreError) {
            let reply = try withConnection(deadline) { (connection, shas) throws(StateStoreError) -> RedisReply in
                let reply = try connection.runScript(script, sha: &shas[script.id], deadline: deadline, appendArguments)
                answered = reply
                try awaitReplicas(connection, deadline, after: reply)
                return reply
            }
            return (reply, nil)
        } catch {
            guard let answered else { throw error }
            return (answered, error)
        }
    }

    private func withConnection(_ deadline: RedisDeadline,
                                _ body: (RedisConnection) throws(StateStoreError) -> RedisReply)
        throws(StateStoreError) -> RedisReply {
        try withConnection(deadline) { (connection, _) throws(StateStoreError) -> RedisReply in try body(connection) }
    }

    /// Takes the lock, gets a usable connection (connecting if the state machine allows it) and runs `body`. Any
    /// error while connecting or thrown by `body` drops the connection and starts the backoff: after a timeout or
    /// an I/O error the connection's reply stream can no longer be trusted.
    private func withConnection(_ deadline: RedisDeadline,
                                _ body: (RedisConnection, inout [String?]) throws(StateStoreError) -> RedisReply)
        throws(StateStoreError) -> RedisReply {
        let target = self.target
        return try locked.withLock { (s) throws(StateStoreError) -> RedisReply in
            // Lock waits count against the operation's budget (state.timeout).
            _ = try deadline.remainingMillis(doing: "lock wait")
            switch s.machine.beginCall(nowMillis: MonotonicClock.nowMillis()) {
            case .failFast(let retryIn):
                let last = s.lastFailure
                throw StateStoreError(.unavailable, "redis \(target): unavailable (\(last?.description ?? "no connection")), "
                                      + "next attempt in \(retryIn) ms", cause: last?.cause)
            case .connect:
                s.connection = nil
                do throws(StateStoreError) {
                    s.connection = try connect(deadline, &s)
                    s.machine.connectSucceeded()
                    if s.lastFailure != nil {
                        s.lastFailure = nil
                        onEvent(.connected)
                    }
                } catch {
                    s.machine.failed(nowMillis: MonotonicClock.nowMillis())
                    note(error, &s)
                    throw error
                }
            case .useConnection:
                break
            }
            guard let connection = s.connection else {
                s.machine.failed(nowMillis: MonotonicClock.nowMillis())
                throw StateStoreError(.unavailable, "redis \(target): no connection")
            }
            do throws(StateStoreError) {
                let reply = try body(connection, &s.scriptSHAs)
                // A replica (a demoted master, a failover in progress) answers writes READONLY, or MASTERDOWN when
                // it lost its master; a server still loading its data, LOADING. The reply is the caller's error
                // either way, but the connection is dropped so the next call connects again — asking the sentinels
                // afresh.
                // (Redis before 7 wraps a script's error: "ERR Error running script … -READONLY …", hence the search.)
                if case .error(let message) = reply,
                   ["readonly", "loading", "masterdown"].contains(RedisReply.errorCode(message)) || message.contains("-READONLY ") {
                    throw reply.unexpected("\(target)")
                }
                return reply
            } catch {
                s.connection = nil
                s.machine.failed(nowMillis: MonotonicClock.nowMillis())
                note(error, &s)
                throw error
            }
        }
    }

    /// A new connection to the target: the endpoint itself, or the master the sentinels name now (its change told
    /// to `onEvent` once).
    private func connect(_ deadline: RedisDeadline, _ s: inout Locked) throws(StateStoreError) -> RedisConnection {
        switch target {
        case .direct(let endpoint):
            return try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
        case .sentinel(let settings, let master):
            let connector = RedisSentinelConnector(settings: settings, master: master, tls: tls)
            var found: (RedisConnection, RedisNode)? = nil
            if let announced = s.announced, MonotonicClock.nowMillis() < s.announcedUntilMillis {
                // A stale sentinel could still name the old master, which says `master` until it is demoted: writes
                // there would be lost at its resync. The announced one is asked first.
                found = try? connector.connect(to: announced, deadline: deadline)
            }
            s.announced = nil
            if found == nil { found = try connector.connect(deadline: deadline, preferred: &s.preferredSentinel) }
            guard let (connection, address) = found else { throw StateStoreError(.unavailable, "redis \(target): no master") }
            if s.masterAddress != address {
                s.masterAddress = address
                // Scripts are loaded per server: a promoted replica may not have them (EVALSHA falls back anyway).
                s.scriptSHAs = [String?](repeating: nil, count: RedisScript.all.count)
                onEvent(.master(address.description))
            }
            return connection
        }
    }

    /// The sentinels announced `address` as the master (`+switch-master`): unless already connected there, the
    /// connection goes (without a backoff), so the next call asks the sentinels again.
    func masterSwitched(to address: RedisNode) {
        locked.withLock { s in
            guard s.masterAddress != address else { return }
            s.connection = nil
            s.machine.reset()
            s.announced = address
            s.announcedUntilMillis = MonotonicClock.nowMillis() &+ Self.announcementWindowMillis
            onEvent(.switchAnnounced(address.description))
        }
    }

    /// How long an announced master is preferred to what the sentinels say.
    static let announcementWindowMillis: UInt64 = 10_000

    /// A sentinel, asked when a subscription starts (an announcement may have been missed between subscriptions),
    /// names `address`: if the client is connected elsewhere, the connection goes and the next call asks the
    /// sentinels — nothing is taken from this answer alone.
    func masterReported(_ address: RedisNode) {
        locked.withLock { s in
            guard let current = s.masterAddress, current != address, s.connection != nil else { return }
            s.connection = nil
            s.machine.reset()
        }
    }

    /// Records a failure; tells `onEvent` once per change of cause (not on every failed retry).
    private func note(_ error: StateStoreError, _ s: inout Locked) {
        let changed = s.lastFailure?.label != error.label
        s.lastFailure = error
        if changed { onEvent(.failed(error)) }
    }
}
