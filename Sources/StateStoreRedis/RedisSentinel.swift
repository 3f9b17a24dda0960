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
        case .sentinel(let settings, let master): "\(master.tls ? "rediss" : "redis") sentinel master \(settings.master)"
        }
    }
}

/// Asks the sentinels where the master is (`SENTINEL get-master-addr-by-name`), then connects to it and checks it
/// is one (`ROLE`): a sentinel that has not yet seen a failover may still name a demoted master, which would answer
/// every write with `READONLY`. Run at each (re)connect — after a failed call, a `READONLY` reply or the master going
/// away — so the gateway follows a promotion without a restart.
struct RedisSentinelConnector {
    let settings: RedisSentinelSettings
    let master: RedisEndpoint
    let tls: RedisTLS?

    /// The master's connection, and its address. `preferred`: the sentinel to ask first (the last that answered).
    func connect(deadline: RedisDeadline, preferred: inout Int) throws(StateStoreError) -> (RedisConnection, RedisNode) {
        let address = try discover(deadline: deadline, preferred: &preferred)
        var endpoint = master
        endpoint.host = address.host
        endpoint.port = address.port
        let connection = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
        let role = try connection.run(RedisCommand("ROLE"), deadline: deadline)
        switch role {
        case .array(let fields) where fields.first == .string(Array("master".utf8)):
            return (connection, address)
        case .error(let message) where RedisReply.errorCode(message) == "noperm":
            // An ACL user without ROLE: a demoted master is still caught by the READONLY its first write gets.
            return (connection, address)
        default:
            throw StateStoreError(.unavailable, "redis sentinel master \(settings.master): \(address) is not a master (yet); "
                                  + "the sentinels may not have finished a failover", cause: "readonly")
        }
    }

    /// The master's address from the first sentinel that knows it.
    private func discover(deadline: RedisDeadline, preferred: inout Int) throws(StateStoreError) -> RedisNode {
        var last: StateStoreError? = nil
        let count = settings.nodes.count
        for step in 0..<count {
            let index = (preferred + step) % count
            let node = settings.nodes[index]
            let endpoint = RedisEndpoint(host: node.host, port: node.port, user: settings.username,
                                         password: settings.password, database: 0, tls: master.tls)
            do throws(StateStoreError) {
                let sentinel = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
                var ask = RedisCommand("SENTINEL")
                ask.append("get-master-addr-by-name")
                ask.append(settings.master)
                let reply = try sentinel.run(ask, deadline: deadline)
                switch reply {
                case .array(let parts) where parts.count == 2:
                    guard case .string(let host) = parts[0], case .string(let portText) = parts[1],
                          let port = Int32(String(decoding: portText, as: UTF8.self)), (1...65535).contains(port), !host.isEmpty
                    else { throw reply.unexpected("SENTINEL get-master-addr-by-name") }
                    preferred = index
                    return RedisNode(host: String(decoding: host, as: UTF8.self), port: port)
                case .null:
                    throw StateStoreError(.unavailable, "redis sentinel \(node): no master named \(settings.master)",
                                          cause: "unknown_master")
                default:
                    throw reply.unexpected("SENTINEL get-master-addr-by-name")
                }
            } catch {
                last = error
                // Out of time: the next sentinel would fail at once too.
                if error.kind == .timeout { break }
            }
        }
        let why = last ?? StateStoreError(.unavailable, "no sentinels configured")
        throw StateStoreError(why.kind, "redis sentinel master \(settings.master): no sentinel answered (last: \(why.description))",
                              cause: why.cause)
    }
}
