#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
internal import GatewayPosix
import StateStore

/// Redis Sentinel (`state.sentinel`): which sentinels to ask, for which master, with which credentials.
public struct RedisSentinelSettings: Sendable, Equatable {
    /// The master's name in the sentinels' configuration (`sentinel monitor NAME …`).
    public var master: String
    /// The sentinels, asked in turn (the one that answered last is asked first).
    public var nodes: [RedisNode]
    /// The sentinels' own ACL user and password (`sentinel.username`, `sentinel.password_file`), apart from the
    /// master's.
    public var username: String?
    public var password: String?

    public init(master: String, nodes: [RedisNode], username: String? = nil, password: String? = nil) {
        self.master = master
        self.nodes = nodes
        self.username = username
        self.password = password
    }
}

/// A Redis server's address (`host:port`, IPv6 in brackets in configuration text).
public struct RedisNode: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int32

    public init(host: String, port: Int32) {
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Where a `RedisClient` connects: one endpoint (`state.url`), or the master a set of sentinels names.
enum RedisTarget: Sendable, CustomStringConvertible {
    case direct(RedisEndpoint)
    /// `master`: the credentials, database and TLS flag of the master; its host and port come from the sentinels.
    case sentinel(RedisSentinelSettings, master: RedisEndpoint)

    /// How errors name it (never a password).
    var description: String {
        switch self {
        case .direct(let endpoint): endpoint.description
        case .sentinel(let settings, let master): "sentinel master \(settings.master)\(master.tls ? " (TLS)" : "")"
        }
    }
}

/// Asks the sentinels where the master is (`SENTINEL get-master-addr-by-name`), then connects to it and checks it
/// is one (`HELLO`'s `role`, which any ACL user may ask; `ROLE` on a server without `HELLO`): a sentinel that has not
/// yet seen a failover — or a stale or misconfigured one — may name a demoted master or a replica, which would answer
/// every write with `READONLY`. Run at each (re)connect — after a failed call, a `READONLY` reply or the master going
/// away — so the gateway follows a promotion without a restart.
///
/// Each sentinel gets its own share of the operation's budget (`state.timeout`), so one that is frozen or powered off
/// (a connect or a read that never answers) costs its share, not the whole attempt; a sentinel whose master does not
/// pass the check is passed over for the next, in the same attempt.
struct RedisSentinelConnector {
    let settings: RedisSentinelSettings
    let master: RedisEndpoint
    let tls: RedisTLS?

    /// The master's connection, and its address. `preferred`: the sentinel to ask first — the last whose master
    /// passed the check; moved on only by a success.
    func connect(deadline: RedisDeadline, preferred: inout Int) throws(StateStoreError) -> (RedisConnection, RedisNode) {
        var last: StateStoreError? = nil
        let count = settings.nodes.count
        for step in 0..<count {
            let index = (preferred + step) % count
            let node = settings.nodes[index]
            // This sentinel's share: what is left, split among it, the sentinels after it and one share kept for
            // the master it names.
            let left: Int
            do { left = try deadline.remainingMillis(doing: "ask the sentinels") } catch { last = error; break }
            let share = RedisDeadline(timeoutMillis: max(left / (count - step + 1), 1))
            do throws(StateStoreError) {
                let address = try ask(node, deadline: share)
                var endpoint = master
                endpoint.host = address.host
                endpoint.port = address.port
                // The master gets what is left of the whole budget.
                let connection = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
                try checkIsMaster(connection, address, deadline: deadline)
                preferred = index
                return (connection, address)
            } catch {
                last = error
            }
        }
        let why = last ?? StateStoreError(.unavailable, "no sentinels configured")
        throw StateStoreError(why.kind, "redis sentinel master \(settings.master): no sentinel named a usable master "
                              + "(last: \(why.description))", cause: why.cause)
    }

    /// The master at `address` (a `+switch-master` announcement), if it passes the master check.
    func connect(to address: RedisNode, deadline: RedisDeadline) throws(StateStoreError) -> (RedisConnection, RedisNode) {
        var endpoint = master
        endpoint.host = address.host
        endpoint.port = address.port
        let connection = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
        try checkIsMaster(connection, address, deadline: deadline)
        return (connection, address)
    }

    /// What `node` says the master's address is.
    private func ask(_ node: RedisNode, deadline: RedisDeadline) throws(StateStoreError) -> RedisNode {
        let endpoint = RedisEndpoint(host: node.host, port: node.port, user: settings.username,
                                     password: settings.password, database: 0, tls: master.tls)
        let sentinel = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
        return try Self.askMaster(settings.master, on: sentinel, node, deadline: deadline)
    }

    /// `SENTINEL get-master-addr-by-name` on a connection to the sentinel `node`: the address it names for `name`.
    static func askMaster(_ name: String, on sentinel: RedisConnection, _ node: RedisNode, deadline: RedisDeadline)
        throws(StateStoreError) -> RedisNode {
        var ask = RedisCommand("SENTINEL")
        ask.append("get-master-addr-by-name")
        ask.append(name)
        let reply = try sentinel.run(ask, deadline: deadline)
        switch reply {
        case .array(let parts) where parts.count == 2:
            guard case .string(let host) = parts[0], case .string(let portText) = parts[1],
                  let port = Int32(String(decoding: portText, as: UTF8.self)), (1...65535).contains(port), !host.isEmpty
            else { throw reply.unexpected("SENTINEL get-master-addr-by-name on sentinel \(node)") }
            return RedisNode(host: String(decoding: host, as: UTF8.self), port: port)
        case .null:
            throw StateStoreError(.unavailable, "redis sentinel \(node): no master named \(name)", cause: "unknown_master")
        default:
            throw reply.unexpected("SENTINEL get-master-addr-by-name on sentinel \(node)")
        }
    }

    /// `HELLO` (Redis 6+, allowed to every user) reports `role`; a server without it is asked `ROLE`. Anything but
    /// `master` — or no answer to either — fails.
    private func checkIsMaster(_ connection: RedisConnection, _ address: RedisNode, deadline: RedisDeadline) throws(StateStoreError) {
        let hello = try connection.run(RedisCommand("HELLO"), deadline: deadline)
        var role: [UInt8]? = nil
        if case .array(let fields) = hello {
            var i = 0
            while i + 1 < fields.count {
                if fields[i] == .string(Array("role".utf8)), case .string(let value) = fields[i + 1] { role = value }
                i += 2
            }
        } else if case .array(let fields) = try connection.run(RedisCommand("ROLE"), deadline: deadline), case .string(let value)? = fields.first {
            role = value
        }
        guard role == Array("master".utf8) else {
            let said = role.map { String(decoding: $0, as: UTF8.self) } ?? "no role"
            throw StateStoreError(.unavailable, "redis sentinel master \(settings.master): \(address) is not a master (\(said)); "
                                  + "a failover in progress, or a sentinel that is stale or watches another Redis", cause: "readonly")
        }
    }
}

/// Listens to the sentinels' `+switch-master` announcements (`SUBSCRIBE +switch-master` on one sentinel at a time,
/// the next after a failure) on a thread of its own, so a failover is followed when the sentinels announce it rather
/// than at the first write the demoted master refuses or the first call on a connection it killed: the client
/// drops its connection and the next call asks the sentinels again.
///
/// The thread holds the client weakly and ends within a second of the client's end. An idle subscription is checked
/// with `PING` every 10 s (an answer within 5 s, else the next sentinel); reconnects back off from 100 ms to 5 s.
final class RedisSentinelWatcher: @unchecked Sendable {
    private let settings: RedisSentinelSettings
    private let tls: RedisTLS?
    private let timeoutMillis: Int
    private weak var client: RedisClient?

    static let idlePingMillis: UInt64 = 10_000
    static let pongWithinMillis: UInt64 = 5_000

    private init(settings: RedisSentinelSettings, tls: RedisTLS?, timeoutMillis: Int, client: RedisClient) {
        self.settings = settings
        self.tls = tls
        self.timeoutMillis = timeoutMillis
        self.client = client
    }

    /// Starts watching for `client` (detached: it stops by itself).
    static func start(settings: RedisSentinelSettings, tls: RedisTLS?, timeoutMillis: Int, client: RedisClient) {
        let watcher = RedisSentinelWatcher(settings: settings, tls: tls, timeoutMillis: timeoutMillis, client: client)
        pthread_detach(Threads.start { watcher.run() })
    }

    private func run() {
        var next = 0
        var backoff = RedisReconnectStateMachine.initialBackoffMillis
        while client != nil {
            let node = settings.nodes[next % settings.nodes.count]
            next += 1
            var established = false
            try? watch(node, established: &established)
            if established { backoff = RedisReconnectStateMachine.initialBackoffMillis }
            // Sleep the backoff in slices, so the thread ends soon after the client does.
            var slept: UInt64 = 0
            while slept < backoff, client != nil {
                usleep(50_000)
                slept += 50
            }
            backoff = min(backoff * 2, RedisReconnectStateMachine.maxBackoffMillis)
        }
    }

    /// One subscription on `node`, until it fails or the client is gone; `established` is set once it is (and the
    /// master it names is reported, since an announcement may have come between two subscriptions).
    private func watch(_ node: RedisNode, established: inout Bool) throws(StateStoreError) {
        let endpoint = RedisEndpoint(host: node.host, port: node.port, user: settings.username,
                                     password: settings.password, database: 0, tls: tls != nil)
        let setup = RedisDeadline(timeoutMillis: timeoutMillis)
        let connection = try RedisConnection(endpoint: endpoint, tls: tls, deadline: setup)
        if let named = try? RedisSentinelConnector.askMaster(settings.master, on: connection, node, deadline: setup) {
            client?.masterReported(named)
        }
        let subscribed = try connection.run(RedisCommand("SUBSCRIBE", "+switch-master"), deadline: setup)
        guard case .array(let parts) = subscribed, parts.first == .string(Array("subscribe".utf8)) else {
            throw subscribed.unexpected("SUBSCRIBE +switch-master on sentinel \(node)")
        }
        established = true
        var lastHeard = MonotonicClock.nowMillis()
        var pingSentAt: UInt64? = nil
        while client != nil {
            let reply: RedisReply
            do throws(StateStoreError) {
                reply = try connection.readReply(deadline: RedisDeadline(timeoutMillis: 1_000), doing: "+switch-master")
            } catch {
                guard error.kind == .timeout else { throw error }
                let now = MonotonicClock.nowMillis()
                if let sent = pingSentAt {
                    if now - sent > Self.pongWithinMillis { return }
                } else if now - lastHeard > Self.idlePingMillis {
                    try connection.send(RedisCommand("PING"), deadline: RedisDeadline(timeoutMillis: timeoutMillis))
                    pingSentAt = now
                }
                continue
            }
            lastHeard = MonotonicClock.nowMillis()
            pingSentAt = nil
            // ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"]
            guard case .array(let fields) = reply, fields.count == 3, fields[0] == .string(Array("message".utf8)),
                  case .string(let payload) = fields[2] else { continue }
            let words = String(decoding: payload, as: UTF8.self).split(separator: " ")
            guard words.count == 5, words[0] == settings.master, let port = Int32(words[4]), (1...65535).contains(port) else { continue }
            client?.masterSwitched(to: RedisNode(host: String(words[3]), port: port))
        }
    }
}
