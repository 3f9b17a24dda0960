import GatewayCore
import StateStore

/// Redis Cluster (`state.cluster`): the seed nodes the slot map is first asked of. The data nodes' credentials and
/// TLS are the store's own (`state.username`, `state.password_file`, `state.tls`): every node is a data node.
public struct RedisClusterSettings: Sendable, Equatable {
    public var nodes: [RedisNode]

    public init(nodes: [RedisNode]) {
        self.nodes = nodes
    }
}

/// Which master serves each of the 16,384 slots, as `CLUSTER SLOTS` tells it.
struct RedisSlotMap: Sendable, Equatable {
    /// The masters, in the order the reply first names them.
    private(set) var masters: [RedisNode] = []
    /// For each slot, its master's index in `masters`; -1: no master serves it (a failed or unassigned range).
    private var owner = [Int16](repeating: -1, count: RedisClusterSlot.count)

    /// Parses `CLUSTER SLOTS`' reply: `[[start, end, [host, port, id, …], replica…], …]`. `asked`: the node that
    /// answered — an empty host means its own; `?` (an endpoint the node does not know) leaves the range unserved.
    init(slotsReply reply: RedisReply, asked: RedisNode) throws(StateStoreError) {
        guard case .array(let ranges) = reply else { throw reply.unexpected("CLUSTER SLOTS on \(asked)") }
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3,
                  case .integer(let start) = fields[0], case .integer(let end) = fields[1],
                  0 <= start, start <= end, end < RedisClusterSlot.count,
                  case .array(let master) = fields[2], master.count >= 2,
                  case .string(let hostBytes) = master[0], case .integer(let port) = master[1], (1...65535).contains(port)
            else { throw reply.unexpected("CLUSTER SLOTS on \(asked)") }
            var host = String(decoding: hostBytes, as: UTF8.self)
            if host == "?" { continue }
            if host.isEmpty { host = asked.host }
            assign(Int(start)...Int(end), to: RedisNode(host: host, port: Int32(port)))
        }
    }

    func master(ofSlot slot: Int) -> RedisNode? {
        let index = owner[slot]
        return index < 0 ? nil : masters[Int(index)]
    }

    /// A `MOVED` answer: `slot` is served by `node` now (the rest of the map is asked again soon).
    mutating func assign(_ slots: ClosedRange<Int>, to node: RedisNode) {
        let index: Int
        if let known = masters.firstIndex(of: node) {
            index = known
        } else {
            guard masters.count < Int(Int16.max) else { return }
            index = masters.count
            masters.append(node)
        }
        for slot in slots { owner[slot] = Int16(index) }
    }

    /// Slots no master serves.
    var unservedSlots: Int { owner.reduce(0) { $0 + ($1 < 0 ? 1 : 0) } }

    /// How the log tells it: each master with its slot count (`127.0.0.1:7000 5461 slots, …`), in address order.
    var summary: String {
        var counts = [Int](repeating: 0, count: masters.count)
        for index in owner where index >= 0 { counts[Int(index)] += 1 }
        let parts = zip(masters, counts).filter { $0.1 > 0 }.map { "\($0.0) \($0.1) slots" }.sorted()
        let unserved = unservedSlots
        return parts.joined(separator: ", ") + (unserved > 0 ? ", \(unserved) slots unserved" : "")
    }
}

/// A Redis Cluster behind one lock: a connection per master, made when first needed, each with its own reconnect
/// pacing (`RedisReconnectStateMachine`: at most one attempt per node per 100 ms, backing off to 5 s); the slot map
/// asked of the seeds (then of the known masters) at the first call and again — at most every 100 ms — after a
/// redirect or a failure, so a resharding or a failover is followed without a restart.
///
/// Every command the store sends names one key (a script's `KEYS[1]`; the key layout's hash tags put every key an
/// operation touches in that key's slot), so it goes straight to the slot's master. `MOVED` updates the map and
/// retries; `ASK` (a slot being migrated) sends `ASKING` and the command to the node named, once; at most five
/// redirects per call. `READONLY`, `MASTERDOWN`, `LOADING`, `CLUSTERDOWN` and `TRYAGAIN` fail the call (the client
/// retries at its next call, on a fresh map); a failed connection is dropped and the map asked again.
final class RedisClusterClient: RedisExecutor {
    /// Touched only under `locked` (hence unchecked).
    private final class Node: @unchecked Sendable {
        let address: RedisNode
        var connection: RedisConnection?
        var machine = RedisReconnectStateMachine()
        var lastFailure: StateStoreError?
        init(_ address: RedisNode) { self.address = address }
    }

    private struct Locked: Sendable {
        var nodes: [String: Node] = [:]
        var map: RedisSlotMap?
        /// A redirect or a failure since the map was read: ask again (paced).
        var refreshWanted = false
        var lastRefreshMillis: UInt64 = 0
        var lastSummary: String?
        var lastFailure: StateStoreError?
        /// One SHA-1 per script: the same on every node (a node without the script answers `NOSCRIPT`: `EVAL`).
        var scriptSHAs = [String?](repeating: nil, count: RedisScript.all.count)
    }

    let settings: RedisClusterSettings
    /// The nodes' credentials and TLS flag (host and port come from the slot map).
    let template: RedisEndpoint
    let tls: RedisTLS?
    let timeoutMillis: Int
    let waitReplicas: Int
    private let locked = AnnotatedMutex(Locked())
    private let onEvent: @Sendable (RedisStateStore.Event) -> Void

    static let maxRedirects = 5
    static let refreshIntervalMillis: UInt64 = 100

    init(settings: RedisClusterSettings, template: RedisEndpoint, tls: RedisTLS?, timeoutMillis: Int, waitReplicas: Int,
         onEvent: @escaping @Sendable (RedisStateStore.Event) -> Void) {
        self.settings = settings
        self.template = template
        self.tls = tls
        self.timeoutMillis = max(timeoutMillis, 1)
        self.waitReplicas = max(waitReplicas, 0)
        self.onEvent = onEvent
    }

    func run(_ command: RedisCommand, write: Bool) throws(StateStoreError) -> RedisReply {
        let waitReplicas = self.waitReplicas
        return try routed(key: command.argument(at: 1), what: command.name) { (connection, asking, _, deadline, node) throws(StateStoreError) -> RedisReply in
            if asking { try Self.asking(connection, deadline, node) }
            let reply = try connection.run(command, deadline: deadline)
            if write { try connection.awaitReplicas(waitReplicas, deadline, after: reply, server: "cluster node \(node)") }
            return reply
        }
    }

    func eval(_ script: RedisScript, write: Bool, _ appendArguments: (inout RedisCommand) -> Void)
        throws(StateStoreError) -> RedisReply {
        // The key is KEYS[1]: after EVALSHA, the SHA and numkeys.
        var probe = RedisCommand("EVALSHA")
        probe.append("")
        appendArguments(&probe)
        let waitReplicas = self.waitReplicas
        return try routed(key: probe.argument(at: 3), what: script.name) { (connection, asking, shas, deadline, node) throws(StateStoreError) -> RedisReply in
            if asking {
                // ASKING lasts one command: load the script first, so the next one is the script itself.
                _ = try connection.run(RedisCommand("SCRIPT", "LOAD", script.source), deadline: deadline)
                try Self.asking(connection, deadline, node)
            }
            let reply = try connection.runScript(script, sha: &shas[script.id], deadline: deadline, appendArguments)
            if write { try connection.awaitReplicas(waitReplicas, deadline, after: reply, server: "cluster node \(node)") }
            return reply
        }
    }

    /// Runs `script` once per call — `keys[i]` is call i's KEYS[1], `appendArguments(i, &command)` adds its numkeys,
    /// keys and arguments — pipelined: every call for one master in one write, the replies read in order, the masters'
    /// pipelines in flight together; with `wait_replicas`, one `WAIT` per master after its replies. Results in order:
    /// `.success` with the call's reply; `.failure` when its master failed (the connection is dropped: a call whose
    /// reply was lost may have run, so it is not retried — the fail-closed side for a consume); nil when the call did
    /// not run and must be sent on its own through `eval`, which follows redirects: `MOVED` (the map is read again),
    /// `ASK`, `TRYAGAIN`, `NOSCRIPT`, or a slot no master serves in the map at hand. The caller bounds `keys` (a
    /// master's pipeline is all of its calls).
    func evalPipelined(_ script: RedisScript, write: Bool, keys: [String],
                       _ appendArguments: (Int, inout RedisCommand) -> Void) -> [Result<RedisReply, StateStoreError>?] {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        var results = [Result<RedisReply, StateStoreError>?](repeating: nil, count: keys.count)
        let waitReplicas = self.waitReplicas
        locked.withLock { s in
            var sha: String
            var groups: [(node: RedisNode, calls: [Int])] = []
            var failed: StateStoreError? = nil
            do throws(StateStoreError) {
                _ = try deadline.remainingMillis(doing: "lock wait")
                try ensureMap(&s, deadline)
                guard let map = s.map else { return }
                for (i, key) in keys.enumerated() {
                    guard let owner = map.master(ofSlot: RedisClusterSlot.of(key)) else { continue }   // nil: eval alone
                    if let g = groups.firstIndex(where: { $0.node == owner }) {   // one pipeline per master: its WAIT follows it
                        groups[g].calls.append(i)
                    } else {
                        groups.append((owner, [i]))
                    }
                }
                guard !groups.isEmpty else { return }
                if let known = s.scriptSHAs[script.id] {
                    sha = known
                } else {
                    // The first use in this process: loaded on each master the calls go to (the SHA-1 is the same on
                    // every node), so they do not all answer NOSCRIPT. Later a NOSCRIPT (a restarted or promoted
                    // node) sends that call alone, through EVAL.
                    var learnt: String? = nil
                    for group in groups {   // one per master
                        do throws(StateStoreError) {
                            let connection = try connection(to: group.node, &s, deadline)
                            do throws(StateStoreError) { learnt = try connection.loadScript(script, deadline: deadline) } catch {
                                drop(group.node, &s)
                                throw error
                            }
                        } catch {
                            // That master's calls fail, as they would one by one; the others go on.
                            failed = error
                            for i in group.calls { results[i] = .failure(error) }
                            groups.removeAll { $0.node == group.node }
                        }
                    }
                    guard let learnt else { return }
                    sha = learnt
                    s.scriptSHAs[script.id] = learnt
                }
            } catch {
                note(error, &s)
                for i in keys.indices { results[i] = .failure(error) }
                return
            }
            // Every master's pipeline first, then the replies: the masters work at once. Each master has its own
            // deadline (state.timeout from its send), so one slow master does not use up another's; with
            // wait_replicas its WAIT ends its pipeline, so the masters wait for their replicas at once too.
            let waits = write && waitReplicas > 0
            var sent: [(node: RedisNode, calls: [Int], connection: RedisConnection, deadline: RedisDeadline, waitMillis: Int)] = []
            for group in groups {
                let own = RedisDeadline(timeoutMillis: timeoutMillis)
                do throws(StateStoreError) {
                    let connection = try connection(to: group.node, &s, own)
                    var commands = group.calls.map { i -> RedisCommand in
                        var c = RedisCommand("EVALSHA")
                        c.append(sha)
                        appendArguments(i, &c)
                        return c
                    }
                    var waitMillis = 0
                    if waits {
                        let (wait, millis) = try RedisConnection.waitCommand(waitReplicas, own)
                        commands.append(wait)
                        waitMillis = millis
                    }
                    do throws(StateStoreError) { try connection.send(pipeline: commands, deadline: own) } catch {
                        drop(group.node, &s)
                        throw error
                    }
                    sent.append((group.node, group.calls, connection, own, waitMillis))
                } catch {
                    failed = error
                    for i in group.calls { results[i] = .failure(error) }
                }
            }
            for (node, calls, connection, own, waitMillis) in sent {
                var read = 0   // calls whose reply came (a failure fails the rest: they may have run)
                do throws(StateStoreError) {
                    var refusal: StateStoreError? = nil
                    for i in calls {
                        let reply = try connection.readReply(deadline: own, doing: script.name)
                        read += 1
                        guard case .error(let message) = reply else {
                            results[i] = .success(reply)
                            continue
                        }
                        switch RedisReply.errorCode(message) {
                        case "moved", "tryagain":
                            s.refreshWanted = true   // not run: nil, sent again alone
                        case "ask", "noscript":
                            break                    // not run: nil, sent again alone
                        case "readonly", "loading", "masterdown", "clusterdown":
                            let error = reply.unexpected("\(script.name) on cluster node \(node)")
                            results[i] = .failure(error)
                            refusal = error
                        default:
                            if message.contains("-READONLY ") {
                                let error = reply.unexpected("\(script.name) on cluster node \(node)")
                                results[i] = .failure(error)
                                refusal = error
                            } else {
                                results[i] = .success(reply)   // the script's own error: the caller's to judge
                            }
                        }
                    }
                    if waits {
                        let acknowledged = try connection.readReply(deadline: own, doing: "WAIT")
                        try RedisConnection.checkWait(acknowledged, waitReplicas, waitMillis, server: "cluster node \(node)")
                    }
                    if let refusal {
                        // A demoted master, a node loading, a cluster that lost a master: read the map again and
                        // connect afresh, as a single call does.
                        drop(node, &s)
                        failed = refusal
                    }
                } catch {
                    failed = error
                    drop(node, &s)
                    for i in calls[read...] { results[i] = .failure(error) }
                    // With wait_replicas, a write whose WAIT was not read as enough acknowledgements is not reported
                    // done (a failover could lose it); calls that did not run (nil) may still go alone; a call that
                    // changed nothing (0: a refusal) stands.
                    if waits {
                        for i in calls { if case .success(let r) = results[i], !r.changedNothing { results[i] = .failure(error) } }
                    }
                }
            }
            if let failed { note(failed, &s) } else { succeeded(&s) }
        }
        return results
    }

    /// Every slot has a master and every master answers `PING`.
    func ping() throws(StateStoreError) {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        try locked.withLock { (s) throws(StateStoreError) -> Void in
            do throws(StateStoreError) {
                try ensureMap(&s, deadline)
                guard let map = s.map else { throw StateStoreError(.unavailable, "redis cluster: no slot map") }
                let unserved = map.unservedSlots
                guard unserved == 0 else {
                    throw StateStoreError(.unavailable, "redis cluster: \(unserved) slots have no master", cause: "clusterdown")
                }
                for master in map.masters {
                    let connection = try connection(to: master, &s, deadline)
                    let reply: RedisReply
                    do throws(StateStoreError) { reply = try connection.run(RedisCommand("PING"), deadline: deadline) } catch { drop(master, &s); throw error }
                    guard case .status("PONG") = reply else { throw reply.unexpected("PING on cluster node \(master)") }
                }
                succeeded(&s)
            } catch {
                note(error, &s)
                throw error
            }
        }
    }

    /// Walks every master's keys matching `pattern` (`SCAN … MATCH … COUNT 1000`, each step within `state.timeout`,
    /// under the lock for that step only, so other calls go on between steps; the whole walk within `budgetMillis`,
    /// else a `.timeout` with cause `scan_budget`) and returns the first for which `match` holds.
    func firstKey(matching pattern: String, budgetMillis: Int, where match: (String) -> Bool) throws(StateStoreError) -> String? {
        let budget = RedisDeadline(timeoutMillis: budgetMillis)
        let masters = try locked.withLock { (s) throws(StateStoreError) -> [RedisNode] in
            try ensureMap(&s, RedisDeadline(timeoutMillis: timeoutMillis))
            return s.map?.masters ?? []
        }
        for master in masters {
            var cursor = "0"
            repeat {
                guard (try? budget.remainingMillis(doing: "SCAN")) != nil else {
                    throw StateStoreError(.timeout, "redis cluster: SCAN of \(master) beyond \(budgetMillis) ms", cause: "scan_budget")
                }
                let step = RedisDeadline(timeoutMillis: timeoutMillis)
                var scan = RedisCommand("SCAN", cursor, "MATCH", pattern)
                scan.append("COUNT")
                scan.append("1000")
                let reply = try locked.withLock { (s) throws(StateStoreError) -> RedisReply in
                    let connection = try connection(to: master, &s, step)
                    do throws(StateStoreError) { return try connection.run(scan, deadline: step) } catch { drop(master, &s); throw error }
                }
                guard case .array(let parts) = reply, parts.count == 2, case .string(let next) = parts[0],
                      case .array(let keys) = parts[1] else { throw reply.unexpected("SCAN on cluster node \(master)") }
                for case .string(let key) in keys {
                    let name = String(decoding: key, as: UTF8.self)
                    if match(name) { return name }
                }
                cursor = String(decoding: next, as: UTF8.self)
            } while cursor != "0"
        }
        return nil
    }

    // MARK: - Routing

    /// The body of one call on one node: (connection, whether `ASKING` must come first, the script SHAs, the
    /// deadline, the node).
    private typealias Body = (RedisConnection, Bool, inout [String?], RedisDeadline, RedisNode) throws(StateStoreError) -> RedisReply

    /// Runs `body` on the master of `key`'s slot, following redirects; tells `onEvent` of changes of state once.
    private func routed(key: ArraySlice<UInt8>?, what: String, _ body: Body) throws(StateStoreError) -> RedisReply {
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        let slot = key.map { RedisClusterSlot.of($0) } ?? 0
        return try locked.withLock { (s) throws(StateStoreError) -> RedisReply in
            do throws(StateStoreError) {
                _ = try deadline.remainingMillis(doing: "lock wait")
                let reply = try route(slot: slot, what: what, &s, deadline, body)
                succeeded(&s)
                return reply
            } catch {
                note(error, &s)
                throw error
            }
        }
    }

    private func route(slot: Int, what: String, _ s: inout Locked, _ deadline: RedisDeadline, _ body: Body)
        throws(StateStoreError) -> RedisReply {
        var askNode: RedisNode? = nil
        for _ in 0...Self.maxRedirects {
            let node: RedisNode
            if let askNode {
                node = askNode
            } else {
                try ensureMap(&s, deadline)
                guard let owner = s.map?.master(ofSlot: slot) else {
                    s.refreshWanted = true
                    throw StateStoreError(.unavailable, "redis cluster: no master serves slot \(slot)", cause: "clusterdown")
                }
                node = owner
            }
            let connection = try connection(to: node, &s, deadline)
            let reply: RedisReply
            do {
                reply = try body(connection, askNode != nil, &s.scriptSHAs, deadline, node)
            } catch {
                drop(node, &s)
                throw error
            }
            guard case .error(let message) = reply else { return reply }
            switch RedisReply.errorCode(message) {
            case "moved":
                guard let (movedSlot, target) = Self.redirect(message, from: node) else { throw reply.unexpected("\(what) on cluster node \(node)") }
                s.map?.assign(movedSlot...movedSlot, to: target)
                s.refreshWanted = true
                askNode = nil
            case "ask":
                guard let (_, target) = Self.redirect(message, from: node) else { throw reply.unexpected("\(what) on cluster node \(node)") }
                askNode = target
            case "readonly", "loading", "masterdown", "clusterdown":
                // A demoted master, a node still loading, a cluster that lost a master: read the map again and
                // connect afresh at the next call.
                drop(node, &s)
                throw reply.unexpected("\(what) on cluster node \(node)")
            case "tryagain":
                s.refreshWanted = true
                throw reply.unexpected("\(what) on cluster node \(node)")
            default:
                if message.contains("-READONLY ") {
                    drop(node, &s)
                    throw reply.unexpected("\(what) on cluster node \(node)")
                }
                return reply
            }
        }
        throw StateStoreError(.unavailable, "redis cluster: \(what) for slot \(slot) redirected more than \(Self.maxRedirects) times",
                              cause: "redirects")
    }

    /// `MOVED 3999 127.0.0.1:6381` / `ASK …`: the slot and the node; nil when malformed. An empty host
    /// (`MOVED 3999 :6381`, a cluster announcing `unknown-endpoint`) is the host of `from`, the node that answered.
    static func redirect(_ message: String, from: RedisNode) -> (Int, RedisNode)? {
        let words = message.split(separator: " ")
        guard words.count == 3, let slot = Int(words[1]), (0..<RedisClusterSlot.count).contains(slot),
              let colon = words[2].lastIndex(of: ":"), let port = Int32(words[2][words[2].index(after: colon)...]),
              (1...65535).contains(port) else { return nil }
        var host = words[2][..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return (slot, RedisNode(host: host.isEmpty ? from.host : String(host), port: port))
    }

    private static func asking(_ connection: RedisConnection, _ deadline: RedisDeadline, _ node: RedisNode) throws(StateStoreError) {
        let reply = try connection.run(RedisCommand("ASKING"), deadline: deadline)
        guard case .status("OK") = reply else { throw reply.unexpected("ASKING on cluster node \(node)") }
    }

    // MARK: - Slot map and connections

    /// Reads the slot map when there is none, or when one is wanted and the last read is 100 ms old: the known
    /// masters first, then the seeds, each with its share of what is left of the budget (one share kept for the
    /// call itself). A failed read keeps the map there was.
    private func ensureMap(_ s: inout Locked, _ deadline: RedisDeadline) throws(StateStoreError) {
        let now = MonotonicClock.nowMillis()
        if s.map != nil, !s.refreshWanted || now < s.lastRefreshMillis &+ Self.refreshIntervalMillis { return }
        s.lastRefreshMillis = now
        var candidates: [RedisNode] = []
        for node in (s.map?.masters ?? []) + settings.nodes where !candidates.contains(node) { candidates.append(node) }
        var last: StateStoreError? = nil
        for (step, node) in candidates.enumerated() {
            let left: Int
            do { left = try deadline.remainingMillis(doing: "read the cluster's slot map") } catch { last = error; break }
            let share = RedisDeadline(timeoutMillis: max(left / (candidates.count - step + 1), 1))
            do throws(StateStoreError) {
                let connection = try connection(to: node, &s, share)
                let reply: RedisReply
                do throws(StateStoreError) { reply = try connection.run(RedisCommand("CLUSTER", "SLOTS"), deadline: share) } catch { drop(node, &s); throw error }
                if case .error(let message) = reply, message.contains("cluster support disabled") {
                    throw StateStoreError(.unavailable, "redis \(node) is not a cluster node (cluster support disabled): "
                                          + "name a single server with state.url", cause: "not_cluster")
                }
                let map = try RedisSlotMap(slotsReply: reply, asked: node)
                guard !map.masters.isEmpty else {
                    throw StateStoreError(.unavailable, "redis cluster node \(node) serves no slots (is the cluster created?)",
                                          cause: "clusterdown")
                }
                install(map, &s)
                return
            } catch {
                last = error
            }
        }
        if s.map != nil { return }
        let why = last ?? StateStoreError(.unavailable, "no cluster nodes configured")
        throw StateStoreError(why.kind, "redis cluster: no node gave the slot map (last: \(why.description))", cause: why.cause)
    }

    /// A new map: connections to nodes that are no longer masters are closed; a change is told once.
    private func install(_ map: RedisSlotMap, _ s: inout Locked) {
        s.map = map
        s.refreshWanted = false
        for (_, node) in s.nodes where !map.masters.contains(node.address) { node.connection = nil }
        let summary = map.summary
        if summary != s.lastSummary {
            s.lastSummary = summary
            onEvent(.slotMap(summary))
        }
    }

    /// The connection to `node`, made now if there is none and its pacing allows.
    private func connection(to address: RedisNode, _ s: inout Locked, _ deadline: RedisDeadline) throws(StateStoreError) -> RedisConnection {
        let node: Node
        if let known = s.nodes[address.description] {
            node = known
        } else {
            node = Node(address)
            s.nodes[address.description] = node
        }
        let now = MonotonicClock.nowMillis()
        switch node.machine.beginCall(nowMillis: now) {
        case .useConnection:
            if let connection = node.connection { return connection }
        case .failFast(let retryIn):
            throw StateStoreError(.unavailable, "redis cluster node \(address): unavailable (\(node.lastFailure?.description ?? "no connection")), "
                                  + "next attempt in \(retryIn) ms", cause: node.lastFailure?.cause)
        case .connect:
            break
        }
        var endpoint = template
        endpoint.host = address.host
        endpoint.port = address.port
        do throws(StateStoreError) {
            let connection = try RedisConnection(endpoint: endpoint, tls: tls, deadline: deadline)
            node.connection = connection
            node.machine.connectSucceeded()
            node.lastFailure = nil
            return connection
        } catch {
            node.connection = nil
            node.machine.failed(nowMillis: MonotonicClock.nowMillis())
            node.lastFailure = error
            s.refreshWanted = true
            throw error
        }
    }

    /// After an I/O error, a timeout or a reply that says the node is no master: the connection goes, the node
    /// backs off, and the map is read again.
    private func drop(_ address: RedisNode, _ s: inout Locked) {
        guard let node = s.nodes[address.description] else { return }
        node.connection = nil
        node.machine.failed(nowMillis: MonotonicClock.nowMillis())
        s.refreshWanted = true
    }

    private func succeeded(_ s: inout Locked) {
        if s.lastFailure != nil {
            s.lastFailure = nil
            onEvent(.connected)
        }
    }

    /// Tells `onEvent` once per change of cause.
    private func note(_ error: StateStoreError, _ s: inout Locked) {
        let changed = s.lastFailure?.label != error.label
        s.lastFailure = error
        if changed { onEvent(.failed(error)) }
    }
}
