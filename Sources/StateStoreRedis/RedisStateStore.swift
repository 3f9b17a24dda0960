public import StateStore
import GatewayCore
import GatewayTLS
/// The Redis backend of `AttestationStateStore`: the distributed engine when several gateway replicas serve one app,
/// so that they share replay protection and App Attest counters (ARCHITECTURE.md "State").
///
/// Keys (all under `keyPrefix`, default `attest-gateway:`):
/// - `<prefix>jti:<namespace>:<key>` — a consumed one-time value; holds its `expiresAt`, expires with it.
/// - `<prefix>issued:<namespace>:<key>` — an issued one-time value (App Attest challenge), the same way; deleted
///   when redeemed.
/// - `<prefix>key:<key id>` — hash `app_id`, `public_key`, `counter`, `environment`, `created_at`,
///   `validation_category`?, `bundle_version`?, `key_access_control`? (the attestation's extensions, when present).
/// - `<prefix>app:<app id>` — list of key ids in registration order.
/// - `<prefix>receipt:<key id>` — hash `receipt`, `risk_metric`?, `created_at`, `not_before`?, `last_used_at`.
/// - `<prefix>ratelimit:<limit>:<key>` — a shared rate limit's bucket (`takeToken`, GCRA): the theoretical arrival
///   time of the next request in µs of Redis' clock; expires when the bucket would be full again. The gateway passes
///   a hex SHA-256 as the key (of a client address, an app id, a key id), so none appears in Redis as it is.
///
/// Everything that must be atomic runs as one Lua script. The store connects lazily (a Redis that is down at
/// start-up makes calls fail with `.unavailable`, and `ping` report it, rather than stopping the gateway), and after
/// a failure reconnects with exponential backoff (100 ms doubling to 5 s), failing fast in between.
public final class RedisStateStore: AttestationStateStore {
    let client: any RedisExecutor
    let keys: RedisKeySpace
    /// Whether the keys under the prefix were found in this store's layout (checked at the first call; see
    /// `checkLayout`).
    let layoutState = AnnotatedMutex(LayoutState())
    /// Told of each change of state, once (the client's, and a layout refusal).
    let onEvent: @Sendable (Event) -> Void
    /// `state.timeout`: also bounds waiting for another caller's layout check.
    let timeoutMillis: Int

    /// - Parameters:
    ///   - url: `redis[s]://[user:password@]host:port[/db]` (`state.url`; `rediss://`: TLS).
    ///   - keyPrefix: prepended to every key (`state.key_prefix`), so several gateways may share one Redis.
    ///   - timeoutMillis: bounds each operation, connecting and lock waits included (`state.timeout`).
    /// - Throws: `.invalid` for a malformed URL or a non-positive timeout; never touches the network.
    ///   - username, password: override the URL's (`state.username`, `state.password_file`).
    ///   - onEvent: told of each change of the connection's state (a failure with its cause, a recovery), once.
    ///   - waitReplicas: `state.wait_replicas` (see `RedisClient.waitReplicas`).
    ///   - tls: for `rediss://`, the TLS context (`ca_file`, client certificate, `tls_verify`) and the name checked
    ///     (`tls_server_name`); nil with `rediss://`: the system's trust store and the URL's host. Unused with
    ///     `redis://`.
    public init(url: String, keyPrefix: String, timeoutMillis: Int, username: String? = nil, password: String? = nil,
                waitReplicas: Int = 0, tls: RedisTLS? = nil,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) throws(StateStoreError) {
        guard timeoutMillis > 0 else { throw StateStoreError(.invalid, "state.timeout must be positive") }
        var endpoint = try RedisEndpoint(parsing: url)
        if let username { endpoint.user = username }
        if let password { endpoint.password = password }
        var tls = tls
        if endpoint.tls, tls == nil {
            do {
                tls = RedisTLS(context: try TLSContext.client(alpn: []))
            } catch {
                throw StateStoreError(.invalid, "state.url: \(error)")
            }
        }
        client = RedisClient(target: .direct(endpoint), tls: endpoint.tls ? tls : nil, timeoutMillis: timeoutMillis,
                             waitReplicas: waitReplicas, onEvent: onEvent)
        keys = RedisKeySpace(prefix: keyPrefix)
        self.onEvent = onEvent
        self.timeoutMillis = timeoutMillis
    }

    /// A store on the master a set of sentinels names (`state.sentinel`), found at the first call and again after
    /// every failure, so a promotion is followed. Writes go to the master only (the connection checks `ROLE`, and a
    /// `READONLY` reply drops it).
    ///   - username, password, database: the master's (`state.username`, `state.password_file`, `state.database`);
    ///     the sentinels' own are in `sentinel`.
    ///   - tls: non-nil (`state.tls: true`): TLS to the sentinels and the master alike.
    public init(sentinel: RedisSentinelSettings, keyPrefix: String, timeoutMillis: Int, username: String? = nil,
                password: String? = nil, database: Int = 0, waitReplicas: Int = 0, tls: RedisTLS? = nil,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) throws(StateStoreError) {
        guard timeoutMillis > 0 else { throw StateStoreError(.invalid, "state.timeout must be positive") }
        guard !sentinel.master.isEmpty, !sentinel.nodes.isEmpty else {
            throw StateStoreError(.invalid, "state.sentinel needs a master name and at least one node")
        }
        let master = RedisEndpoint(host: "", port: 0, user: username, password: password, database: database, tls: tls != nil)
        let client = RedisClient(target: .sentinel(sentinel, master: master), tls: tls, timeoutMillis: timeoutMillis,
                                 waitReplicas: waitReplicas, onEvent: onEvent)
        self.client = client
        RedisSentinelWatcher.start(settings: sentinel, tls: tls, timeoutMillis: timeoutMillis, client: client)
        keys = RedisKeySpace(prefix: keyPrefix)
        self.onEvent = onEvent
        self.timeoutMillis = timeoutMillis
    }

    /// A store on a Redis Cluster (`state.cluster`): the slot map is read from `cluster.nodes` (then from the
    /// masters it names) at the first call and after every redirect or failure; each command goes to its key's
    /// master. Keys are in layout 2 (hash-tagged, `RedisKeySpace`), so a prefix holding `{` or `}` is refused.
    ///   - username, password: every node's (`state.username`, `state.password_file`); `tls` non-nil: TLS to every
    ///     node (`state.tls: true`).
    public init(cluster: RedisClusterSettings, keyPrefix: String, timeoutMillis: Int, username: String? = nil,
                password: String? = nil, waitReplicas: Int = 0, tls: RedisTLS? = nil,
                onEvent: @escaping @Sendable (Event) -> Void = { _ in }) throws(StateStoreError) {
        guard timeoutMillis > 0 else { throw StateStoreError(.invalid, "state.timeout must be positive") }
        guard !cluster.nodes.isEmpty else { throw StateStoreError(.invalid, "state.cluster needs at least one node") }
        guard !keyPrefix.isEmpty, !keyPrefix.contains("{"), !keyPrefix.contains("}") else {
            throw StateStoreError(.invalid, "state.key_prefix: with cluster, the prefix may not be empty or hold { or } (the key "
                                  + "layout's hash tags decide each key's slot)")
        }
        let template = RedisEndpoint(host: "", port: 0, user: username, password: password, database: 0, tls: tls != nil)
        client = RedisClusterClient(settings: cluster, template: template, tls: tls, timeoutMillis: timeoutMillis,
                                    waitReplicas: waitReplicas, onEvent: onEvent)
        keys = RedisKeySpace(prefix: keyPrefix, layout: 2)
        self.onEvent = onEvent
        self.timeoutMillis = timeoutMillis
    }

    /// A change of the connection's state.
    public enum Event: Sendable {
        /// Connecting, authenticating or a call failed, for a cause other than the last one's (`error.cause`).
        case failed(StateStoreError)
        /// Connected again after a failure.
        case connected
        /// Sentinel: the master is (now) at this address — at the first connect and after each failover.
        case master(String)
        /// Sentinel: a sentinel announced this address as the master (`+switch-master`); the connection is dropped
        /// and the next call asks the sentinels.
        case switchAnnounced(String)
        /// Cluster: the slot map read (at the first call, and after each change: a resharding, a failover) — each
        /// master with its slot count.
        case slotMap(String)
    }

    /// One-time values live at most this long in Redis, whatever `expiresAt` says (PX must stay in range).
    static let maxLifetimeSeconds: Int64 = 10 * 365 * 86_400

    public func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64)
        throws(StateStoreError) -> Bool {
        try recordOnce(keys.oneTimeValue(namespace: namespace, key: key), expiresAt: expiresAt, now: now,
                       what: "consumeOnce")
    }

    public func isConsumed(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try checkLayout()
        let reply = try client.run(RedisCommand("GET", keys.oneTimeValue(namespace: namespace, key: key)))
        switch reply {
        case .null: return false
        case .string(let bytes): return (Int64(String(decoding: bytes, as: UTF8.self)) ?? Int64.min) > now
        default: throw reply.unexpected("isConsumed")
        }
    }

    /// The most values one `RedisScript.consumeMany` or `advanceCounterMany` call takes, and the most calls one
    /// Cluster pipeline carries (a larger drain is split): bounds the script's run, during which the server answers
    /// nobody else.
    static let maxConsumesPerScript = 128

    /// One server (url, sentinel): the batch as `RedisScript.consumeMany` calls of up to `maxConsumesPerScript`
    /// values, each one round trip and one `WAIT`. A call that fails fails each of its values (none is reported
    /// consumed before its reply: a lost reply may have consumed them, which a retry then sees as a replay — the
    /// fail-closed side). A Cluster: one `consume` script per value, pipelined per master (the keys are in different
    /// slots, so no one script takes them).
    public func consumeOnce(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>] {
        guard batch.count > 1 else { return consumeEach(batch: batch, now: now) }
        let names = batch.map { keys.oneTimeValue(namespace: $0.namespace, key: $0.key) }
        if let cluster = client as? RedisClusterClient {
            return pipelined(names, RedisScript.consume, "consumeOnce", on: cluster, arguments: { i, c in
                c.append(batch[i].expiresAt)
                c.append(now)
                c.append(Self.lifetimeMillis(expiresAt: batch[i].expiresAt, now: now))
            }, alone: { i throws(StateStoreError) in
                try self.recordOnce(names[i], expiresAt: batch[i].expiresAt, now: now, what: "consumeOnce")
            })
        }
        return inScripts(names, RedisScript.consumeMany, "consumeMany") { range, c in
            c.append(now)
            for r in batch[range] {
                c.append(r.expiresAt)
                c.append(Self.lifetimeMillis(expiresAt: r.expiresAt, now: now))
            }
        }
    }

    /// Compare-and-sets as `consumeOnce(batch:)` does consumes: `RedisScript.advanceCounterMany` calls on one
    /// server, one `advanceCounter` script per key pipelined per master on a Cluster. A call that fails fails each
    /// of its counters (its reply may be lost after it ran: the assertion is refused and the device's next one, with
    /// a higher counter, still passes).
    public func advanceCounters(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>] {
        guard batch.count > 1 else { return advanceEach(batch: batch) }
        let names = batch.map { keys.attestedKey($0.keyID) }
        if let cluster = client as? RedisClusterClient {
            return pipelined(names, RedisScript.advanceCounter, "advanceCounter", on: cluster, arguments: { i, c in
                c.append(Int64(batch[i].counter))
            }, alone: { i throws(StateStoreError) in try self.advanceCounter(keyID: batch[i].keyID, to: batch[i].counter) })
        }
        return inScripts(names, RedisScript.advanceCounterMany, "advanceCounterMany") { range, c in
            for a in batch[range] { c.append(Int64(a.counter)) }
        }
    }

    /// One server: `script` (KEYS = a chunk of `names`, then what `arguments` appends for that chunk's range) per
    /// chunk of up to `maxConsumesPerScript`, each answering 1 or 0 per key, in order. A call that fails fails each of
    /// its keys; when only its `WAIT` fails, the keys it wrote (1) fail and those it left alone (0) stay refusals.
    private func inScripts(_ names: [String], _ script: RedisScript, _ what: String,
                           arguments: (Range<Int>, inout RedisCommand) -> Void) -> [Result<Bool, StateStoreError>] {
        var results: [Result<Bool, StateStoreError>] = []
        results.reserveCapacity(names.count)
        for start in stride(from: 0, to: names.count, by: Self.maxConsumesPerScript) {
            let range = start..<min(start + Self.maxConsumesPerScript, names.count)
            do throws(StateStoreError) {
                try checkLayout()
                guard let server = client as? RedisClient else { throw StateStoreError(.invalid, "\(what): not one server") }
                let (reply, waitFailure) = try server.evalReportingWait(script) { c in
                    c.append(Int64(range.count))
                    for name in names[range] { c.append(name) }
                    arguments(range, &c)
                }
                guard case .array(let replies) = reply, replies.count == range.count else { throw reply.unexpected(what) }
                // Every flag decoded before any result is added: a bad one fails the chunk, never shifts it.
                var flags: [Bool] = []
                flags.reserveCapacity(replies.count)
                for flag in replies { flags.append(try Self.flag(flag, what)) }
                for wrote in flags { results.append(wrote ? waitFailure.map { .failure($0) } ?? .success(true) : .success(false)) }
            } catch {
                results += range.map { _ in .failure(error) }
            }
        }
        return results
    }

    /// A Cluster: `script` once per key (KEYS[1] = `names[i]`, then what `arguments(i, …)` appends), pipelined per
    /// master (`RedisClusterClient.evalPipelined`) in chunks of `maxConsumesPerScript`; a call that did not run
    /// there (a redirect) runs on its own through `alone(i)`, which follows the redirect.
    private func pipelined(_ names: [String], _ script: RedisScript, _ what: String, on cluster: RedisClusterClient,
                           arguments: (Int, inout RedisCommand) -> Void,
                           alone: (Int) throws(StateStoreError) -> Bool) -> [Result<Bool, StateStoreError>] {
        do throws(StateStoreError) { try checkLayout() } catch { return names.map { _ in .failure(error) } }
        var replies: [Result<RedisReply, StateStoreError>?] = []
        replies.reserveCapacity(names.count)
        for start in stride(from: 0, to: names.count, by: Self.maxConsumesPerScript) {
            let end = min(start + Self.maxConsumesPerScript, names.count)
            replies += cluster.evalPipelined(script, write: true, keys: Array(names[start..<end])) { j, c in
                c.append("1")
                c.append(names[start + j])
                arguments(start + j, &c)
            }
        }
        return zip(names.indices, replies).map { i, reply -> Result<Bool, StateStoreError> in
            do throws(StateStoreError) {
                switch reply {
                case .success(let r)?: return .success(try Self.flag(r, what))
                case .failure(let e)?: return .failure(e)
                case nil: return .success(try alone(i))
                }
            } catch {
                return .failure(error)
            }
        }
    }

    /// A value already past its expiry is still recorded (it is not "recorded and unexpired"); it is stored for 1 ms
    /// only, so it never lingers. The lifetime is relative to the caller's `now` rather than an absolute EXAT, so a
    /// Redis clock ahead of the gateway's cannot drop a value the gateway still holds live.
    static func lifetimeMillis(expiresAt: Int64, now: Int64) -> Int64 {
        expiresAt > now ? min(expiresAt - now, maxLifetimeSeconds) * 1000 : 1
    }

    /// Runs `RedisScript.consume` on `redisKey`: true when it stored the value (none was there, or an expired one).
    func recordOnce(_ redisKey: String, expiresAt: Int64, now: Int64, what: String) throws(StateStoreError) -> Bool {
        try checkLayout()
        let lifetimeMillis = Self.lifetimeMillis(expiresAt: expiresAt, now: now)
        let reply = try client.eval(RedisScript.consume) { c in
            c.append("1")
            c.append(redisKey)
            c.append(expiresAt)
            c.append(now)
            c.append(lifetimeMillis)
        }
        return try Self.flag(reply, what)
    }

    /// Rate limits are shared by every process on this Redis.
    public var sharesRateLimits: Bool { true }

    /// One bucket is kept at most this long (the burst window is capped to it, which only matters for a huge burst
    /// at a very low rate).
    static let maxWindowMicros: Int64 = maxLifetimeSeconds * 1_000_000

    /// `RedisScript.takeToken` on `<prefix>ratelimit:<limit>:<key>`. Not a write `state.wait_replicas` waits for:
    /// a rate-limit step lost in a failover only hands back a token, and a lagging replica must not turn shared
    /// limits into local ones.
    public func takeToken(limit: String, key: String, ratePerSecond: Double, burst: Int) throws(StateStoreError) -> Int? {
        guard ratePerSecond.isFinite, ratePerSecond > 0, burst >= 1 else {
            throw StateStoreError(.invalid, "takeToken: the rate must be positive and the burst at least 1")
        }
        try checkLayout()
        let interval = max(1, Int64(min(1e6 / ratePerSecond, Double(Self.maxWindowMicros)).rounded()))
        let window = Int64(burst).multipliedReportingOverflow(by: interval)
        let windowMicros = window.overflow ? Self.maxWindowMicros : min(window.partialValue, Self.maxWindowMicros)
        let reply = try client.eval(RedisScript.takeToken, write: false) { c in
            c.append("1")
            c.append(keys.rateLimit(limit: limit, key: key))
            c.append(interval)
            c.append(max(windowMicros, interval))
        }
        let waitMicros = try reply.integer(for: "takeToken")
        guard waitMicros > 0 else { return nil }
        return Int(max(1, (waitMicros + 999_999) / 1_000_000))
    }

    /// Redis evicts expired one-time values itself.
    public func sweepExpired(now: Int64) throws(StateStoreError) -> Int { 0 }

    public func ping() throws(StateStoreError) {
        try client.ping()
        try checkLayout()
    }
}

/// Builds the Redis key names of one store (`keyPrefix` + kind + id), in one of two layouts:
///
/// - Layout 1 (`state.url`, `state.sentinel`): `<prefix>jti:<namespace>:<key>`, `<prefix>key:<key id>`, … as the
///   store's documentation lists them.
/// - Layout 2 (`state.cluster`): the same kinds, each id in a hash tag — `<prefix>jti:{<namespace>:<key>}`,
///   `<prefix>key:{<key id>}`, `<prefix>receipt:{<key id>}` (a key's record and its receipt share a slot),
///   `<prefix>app:{<app id>}` (with `<prefix>appset:{<app id>}`, the same ids as a set), `<prefix>ratelimit:{<limit>:<key>}` — with `%`, `{` and `}` percent-encoded inside
///   the tag, so the tag is exactly the id and Redis Cluster hashes nothing else.
///
/// `<prefix>layout` holds the layout's number; a store refuses keys of the other layout (`RedisStateStore.checkLayout`).
struct RedisKeySpace: Sendable {
    let prefix: String
    let layout: Int

    init(prefix: String, layout: Int = 1) {
        self.prefix = prefix
        self.layout = layout
    }

    /// `<prefix>layout`: the number of the layout the keys under the prefix are in.
    var layoutMarker: String { prefix + "layout" }

    /// `<prefix>jti:<namespace>:<key>`. `:` and `%` in the namespace are percent-encoded so that namespace "a:b"
    /// with key "c" and namespace "a" with key "b:c" stay different values (namespaces are project numbers and
    /// app ids in practice, which contain neither, so their keys read exactly as documented).
    func oneTimeValue(namespace: String, key: String) -> String {
        oneTime("jti:", namespace, key)
    }

    /// `<prefix>issued:<namespace>:<key>`, encoded like `oneTimeValue`; the distinct kind keeps issued values
    /// apart from consumed ones with the same namespace and key.
    func issuedValue(namespace: String, key: String) -> String {
        oneTime("issued:", namespace, key)
    }

    private func oneTime(_ kind: String, _ namespace: String, _ key: String) -> String {
        layout == 1 ? prefix + kind + Self.encoded(namespace, ":%") + ":" + key
            : prefix + kind + "{" + Self.encoded(namespace, ":%{}") + ":" + Self.encoded(key, "%{}") + "}"
    }

    /// `<prefix>ratelimit:<limit>:<key>`: the key percent-encoded like a namespace, so the last `:` always ends
    /// the limit's name (which may hold `:` itself: `route:api`).
    func rateLimit(limit: String, key: String) -> String {
        layout == 1 ? prefix + "ratelimit:" + limit + ":" + Self.encoded(key, ":%")
            : prefix + "ratelimit:{" + Self.encoded(limit, "%{}") + ":" + Self.encoded(key, ":%{}") + "}"
    }

    func attestedKey(_ keyID: String) -> String { tagged("key:", keyID) }
    var attestedKeyPrefix: String { prefix + "key:" }
    func app(_ appID: String) -> String { tagged("app:", appID) }
    /// Layout 2: the set of the app's key ids beside its list (same hash tag, same slot), so an id is listed once.
    func appSet(_ appID: String) -> String { tagged("appset:", appID) }
    func receipt(_ keyID: String) -> String { tagged("receipt:", keyID) }

    private func tagged(_ kind: String, _ id: String) -> String {
        layout == 1 ? prefix + kind + id : prefix + kind + "{" + Self.encoded(id, "%{}") + "}"
    }

    /// The kinds of key a store writes (after the prefix).
    static let kinds = ["jti:", "issued:", "key:", "app:", "appset:", "receipt:", "ratelimit:"]

    /// Whether `name` (a key under the prefix) is one of layout 2's: its kind followed by a hash tag.
    func isLayout2(_ name: String) -> Bool {
        guard name.hasPrefix(prefix) else { return false }
        let rest = name.dropFirst(prefix.count)
        return Self.kinds.contains { rest.hasPrefix($0 + "{") }
    }

    /// `text` with each of `special` (and `%` when listed) written as `%XX`; unchanged (no copy) when it has none.
    private static func encoded(_ text: String, _ special: String) -> String {
        let bytes = Set(special.utf8)
        guard text.utf8.contains(where: { bytes.contains($0) }) else { return text }
        var out = ""
        for c in text.unicodeScalars {
            if c.isASCII, bytes.contains(UInt8(c.value)) {
                out += "%" + String(c.value, radix: 16, uppercase: true)
            } else {
                out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
