import Foundation
import GatewayCore
import StateStore
@testable import StateStoreRedis
import Testing

/// Redis Cluster: the slot function against the specification's vectors and a real cluster's `CLUSTER KEYSLOT`,
/// layout 2's key names, redirects, and the shared conformance suite on a three-master cluster.
@Suite struct RedisClusterTests {
    @Test func crc16MatchesTheSpecification() {
        // The cluster specification's check value: CRC16-XMODEM("123456789") = 0x31C3.
        #expect(RedisClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisClusterSlot.of("foo") == 12182)
        #expect(RedisClusterSlot.of("bar") == 5061)
        #expect(RedisClusterSlot.of("") == 0)
    }

    @Test func hashTagsFollowTheSpecification() {
        func tag(_ key: String) -> String { String(decoding: RedisClusterSlot.hashTag(Array(key.utf8)), as: UTF8.self) }
        #expect(tag("{user1000}.following") == "user1000")
        #expect(tag("foo{}{bar}") == "foo{}{bar}")        // an empty tag: the whole key
        #expect(tag("foo{{bar}}zap") == "{bar")           // from the first { to the first } after it
        #expect(tag("foo{bar}{zap}") == "bar")
        #expect(tag("no-tag") == "no-tag")
        #expect(tag("open{only") == "open{only")
        #expect(RedisClusterSlot.of("{user1000}.following") == RedisClusterSlot.of("{user1000}.followers"))
    }

    @Test func layoutTwoTagsEveryIdAndEncodesBraces() {
        let v2 = RedisKeySpace(prefix: "ag:", layout: 2)
        #expect(v2.oneTimeValue(namespace: "123", key: "jti-1") == "ag:jti:{123:jti-1}")
        #expect(v2.issuedValue(namespace: "TEAM.app", key: "c") == "ag:issued:{TEAM.app:c}")
        #expect(v2.attestedKey("k+/=") == "ag:key:{k+/=}")
        #expect(v2.receipt("k+/=") == "ag:receipt:{k+/=}")
        #expect(v2.app("TEAM.app") == "ag:app:{TEAM.app}")
        #expect(v2.rateLimit(limit: "route:api", key: "ab") == "ag:ratelimit:{route:api:ab}")
        // A hostile id cannot end the tag early or move the key to another slot: braces and % are encoded.
        #expect(v2.oneTimeValue(namespace: "a:b", key: "x}{y%") == "ag:jti:{a%3Ab:x%7D%7By%25}")
        #expect(RedisClusterSlot.hashTag(Array(v2.oneTimeValue(namespace: "n", key: "}evil").utf8)).elementsEqual(Array("n:%7Devil".utf8)))
        // A key's record and its receipt share a slot.
        #expect(RedisClusterSlot.of(v2.attestedKey("id")) == RedisClusterSlot.of(v2.receipt("id")))
        #expect(v2.isLayout2("ag:jti:{123:x}") && v2.isLayout2("ag:ratelimit:{r:k}"))
        #expect(!v2.isLayout2("ag:jti:123:x") && !v2.isLayout2("ag:key:abc") && !v2.isLayout2("other:jti:{x}"))
        // Layout 1 stays as it was.
        let v1 = RedisKeySpace(prefix: "ag:")
        #expect(v1.oneTimeValue(namespace: "a:b", key: "x}") == "ag:jti:a%3Ab:x}")
        #expect(v1.attestedKey("id") == "ag:key:id" && v1.rateLimit(limit: "route:api", key: "a:b") == "ag:ratelimit:route:api:a%3Ab")
    }

    @Test func redirectsAreParsedOrRefused() {
        let from = RedisNode(host: "10.0.0.7", port: 7000)
        #expect(RedisClusterClient.redirect("MOVED 3999 127.0.0.1:6381", from: from).map { "\($0.0) \($0.1)" } == "3999 127.0.0.1:6381")
        #expect(RedisClusterClient.redirect("ASK 1 [::1]:7000", from: from).map { "\($0.0) \($0.1)" } == "1 [::1]:7000")
        // An empty host (a cluster announcing unknown-endpoint): the node that answered.
        #expect(RedisClusterClient.redirect("MOVED 1 :6379", from: from).map { "\($0.0) \($0.1)" } == "1 10.0.0.7:6379")
        for bad in ["MOVED 16384 127.0.0.1:6381", "MOVED x 127.0.0.1:1", "MOVED 1 127.0.0.1", "MOVED 1 h:0", "MOVED 1"] {
            #expect(RedisClusterClient.redirect(bad, from: from) == nil, "\(bad)")
        }
    }

    @Test func slotMapParsesRangesAndRefusesNonsense() throws {
        func node(_ host: String, _ port: Int64) -> RedisReply { .array([.string(Array(host.utf8)), .integer(port), .string(Array("id".utf8))]) }
        let reply = RedisReply.array([
            .array([.integer(0), .integer(99), node("10.0.0.1", 7000), node("10.0.0.9", 7009)]),
            .array([.integer(100), .integer(16383), node("", 7001)]),
        ])
        let map = try RedisSlotMap(slotsReply: reply, asked: RedisNode(host: "10.0.0.2", port: 7001))
        #expect(map.master(ofSlot: 0)?.description == "10.0.0.1:7000")
        #expect(map.master(ofSlot: 100)?.description == "10.0.0.2:7001")   // an empty host is the node asked
        #expect(map.unservedSlots == 0 && map.masters.count == 2)
        let unknown = try RedisSlotMap(slotsReply: .array([.array([.integer(0), .integer(9), node("?", 7000)])]),
                                       asked: RedisNode(host: "h", port: 1))
        #expect(unknown.unservedSlots == RedisClusterSlot.count)
        for bad: RedisReply in [.integer(1), .array([.array([.integer(5), .integer(4), node("h", 1)])]),
                                .array([.array([.integer(0), .integer(16384), node("h", 1)])]),
                                .array([.array([.integer(0), .integer(1), node("h", 0)])])] {
            #expect(throws: StateStoreError.self) { try RedisSlotMap(slotsReply: bad, asked: RedisNode(host: "h", port: 1)) }
        }
    }

    /// The gateway's slot for every kind of key is the one a real cluster computes.
    @Test func slotsAgreeWithARealCluster() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let v2 = RedisKeySpace(prefix: "attest-gateway:", layout: 2)
        for name in [v2.oneTimeValue(namespace: "123", key: "a"), v2.attestedKey("Zm9v+/="), v2.app("TEAM.x"),
                     v2.rateLimit(limit: "route:api", key: "x"), "plain", "{tag}rest", "foo{}{bar}"] {
            let real = try cluster.servers[0].command("CLUSTER KEYSLOT \(name)")
            #expect(real == ":\(RedisClusterSlot.of(name))", "\(name)")
        }
    }

    @Test func conformanceOnAThreeMasterCluster() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let settings = RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(cluster.servers[1].port))])
        try StateStoreConformance(make: {
            try RedisStateStore(cluster: settings, keyPrefix: "c\(UUID().uuidString.prefix(8)):", timeoutMillis: 2_000)
        }, sweepCountsExpiredValues: false).runAll()
    }

    /// Keys of layout 1 under the prefix (a Redis moved into the cluster) are refused, not misread; another prefix
    /// is fine, and the marker is written once.
    @Test func layoutOneKeysAreRefused() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let settings = RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(cluster.servers[0].port))])
        // A layout-1 key: SET on the node that owns its slot (redis-cli -c follows MOVED).
        try RedisClusterFixture.redisCLI(["-c", "-p", "\(cluster.servers[0].port)", "SET", "old:key:abc", "x"])
        let refused = try RedisStateStore(cluster: settings, keyPrefix: "old:", timeoutMillis: 2_000)
        #expect { try refused.ping() } throws: { ($0 as? StateStoreError)?.cause == "layout" }
        #expect { _ = try refused.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1) } throws: {
            ($0 as? StateStoreError)?.cause == "layout"
        }
        let fresh = try RedisStateStore(cluster: settings, keyPrefix: "new:", timeoutMillis: 2_000)
        try fresh.ping()
        #expect(try fresh.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1))
        #expect(try RedisClusterFixture.redisCLI(["-c", "-p", "\(cluster.servers[0].port)", "GET", "new:layout"]).hasPrefix("2"))
        // A marker of another layout is refused as well.
        try RedisClusterFixture.redisCLI(["-c", "-p", "\(cluster.servers[0].port)", "SET", "one:layout", "1"])
        let marked = try RedisStateStore(cluster: settings, keyPrefix: "one:", timeoutMillis: 2_000)
        #expect { try marked.ping() } throws: { ($0 as? StateStoreError)?.cause == "layout" }
    }

    @Test func bracesInThePrefixOrNoPrefixAreRefused() {
        for prefix in ["{ag}:", "a}", ""] {
            #expect(throws: StateStoreError.self) {
                try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: 1)]), keyPrefix: prefix, timeoutMillis: 100)
            }
        }
    }

    /// A single server named as a cluster says so.
    @Test func aNonClusterNodeIsNamed() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(server.port))]),
                                        keyPrefix: "p:", timeoutMillis: 1_000)
        #expect { try store.ping() } throws: { ($0 as? StateStoreError)?.cause == "not_cluster" }
    }
}

/// Layout 1 (a single server) writes its marker and refuses layout 2's.
@Suite struct RedisLayoutMarkerTests {
    @Test func singleServerWritesOneAndRefusesTwo() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try RedisStateStore(url: server.url, keyPrefix: "a:", timeoutMillis: 1_000)
        try store.ping()
        #expect(try server.command("GET a:layout") == "1")
        try server.command("SET b:layout 2")
        let other = try RedisStateStore(url: server.url, keyPrefix: "b:", timeoutMillis: 1_000)
        #expect { try other.ping() } throws: { ($0 as? StateStoreError)?.cause == "layout" }
        #expect { _ = try other.key(id: "x") } throws: { ($0 as? StateStoreError)?.cause == "layout" }
    }
}

/// The layout check's cost and locking, ASK with scripts, retried registrations — on real clusters.
@Suite struct RedisClusterBehaviourTests {
    static func stat(_ cluster: RedisClusterFixture, _ section: String, _ field: String, server: Int? = nil) throws -> Int {
        var total = 0
        for (i, s) in cluster.servers.enumerated() where server == nil || server == i {
            let info = try RedisClusterFixture.redisCLI(["-p", "\(s.port)", "INFO", section])
            for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix(field + ":") {
                // cmdstat_scan:calls=3,...  /  errorstat_MOVED:count=1
                let value = line.split(separator: ":", maxSplits: 1)[1].split(separator: ",")[0].split(separator: "=")[1]
                total += Int(value) ?? 0
            }
        }
        return total
    }

    /// A refused store walks the keyspace once, not at every call (later calls read the marker at most every 5 s).
    @Test func aRefusedLayoutIsNotScannedAgainAtEveryCall() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let port = cluster.servers[0].port
        try RedisClusterFixture.redisCLI(["-c", "-p", "\(port)", "SET", "old:key:abc", "x"])
        for s in cluster.servers { _ = try s.command("CONFIG RESETSTAT") }
        let store = try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(port))]),
                                        keyPrefix: "old:", timeoutMillis: 2_000)
        for _ in 0..<10 { _ = try? store.ping() }
        let scans = try Self.stat(cluster, "commandstats", "cmdstat_scan")
        #expect(scans <= 3, "\(scans) SCAN calls after 10 pings of a refused store")
    }

    /// Marks the slot of `key` as migrating from the master holding it (src) to the next one (dst): the source then
    /// answers ASK for a key it does not hold.
    static func startMigrating(_ key: String, _ cluster: RedisClusterFixture) throws -> (src: Int, dst: Int) {
        let slot = RedisClusterSlot.of(key)
        var src = -1
        for (i, s) in cluster.servers.enumerated() {
            let r = try RedisClusterFixture.redisCLI(["-p", "\(s.port)", "GET", key])
            if !r.contains("MOVED") { src = i }
        }
        try #require(src >= 0)
        let dst = (src + 1) % cluster.servers.count
        let srcID = try cluster.servers[src].command("CLUSTER MYID")
        let dstID = try cluster.servers[dst].command("CLUSTER MYID")
        _ = try cluster.servers[dst].command("CLUSTER SETSLOT \(slot) IMPORTING \(srcID)")
        _ = try cluster.servers[src].command("CLUSTER SETSLOT \(slot) MIGRATING \(dstID)")
        return (src, dst)
    }

    /// A script sent through ASK (the slot migrating, the key not on the source) runs on the importing node with
    /// ASKING, not MOVED back, and stays once-only.
    @Test func aScriptThroughAskRunsOnTheImportingNode() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let keys = RedisKeySpace(prefix: "ask:", layout: 2)
        let name = keys.oneTimeValue(namespace: "1", key: "j")
        let (src, dst) = try Self.startMigrating(name, cluster)
        // The marker first, through another store, so that only the script goes through the ASK.
        let settings = RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(cluster.servers[0].port))])
        try RedisStateStore(cluster: settings, keyPrefix: "ask:", timeoutMillis: 2_000).ping()
        for s in cluster.servers { _ = try s.command("CONFIG RESETSTAT") }
        let store = try RedisStateStore(cluster: settings, keyPrefix: "ask:", timeoutMillis: 2_000)
        try store.ping()
        #expect(try store.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1))
        #expect(try !store.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1))
        let movedOnDst = try Self.stat(cluster, "errorstats", "errorstat_MOVED", server: dst)
        let askOnSrc = try Self.stat(cluster, "errorstats", "errorstat_ASK", server: src)
        #expect(movedOnDst == 0 && askOnSrc >= 1, "importing node MOVED \(movedOnDst), source ASK \(askOnSrc)")
    }

    /// A batch on a cluster goes out pipelined per master; a value whose slot is migrating (ASK) is sent again alone
    /// and runs on the importing node. A value repeated within the batch, and a second batch, find it consumed.
    @Test func aClusterBatchConsumesEachValueOnceAndSendsAnAskedValueAlone() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let keys = RedisKeySpace(prefix: "bask:", layout: 2)
        let name = keys.oneTimeValue(namespace: "1", key: "j")
        let (src, dst) = try Self.startMigrating(name, cluster)
        let settings = RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(cluster.servers[0].port))])
        let store = try RedisStateStore(cluster: settings, keyPrefix: "bask:", timeoutMillis: 2_000)
        try store.ping()
        for s in cluster.servers { _ = try s.command("CONFIG RESETSTAT") }
        var batch = (0..<40).map { ConsumeRequest(namespace: "1", key: "b\($0)", expiresAt: 2_000_000_000) }
        batch.insert(ConsumeRequest(namespace: "1", key: "j", expiresAt: 2_000_000_000), at: 20)
        batch.append(batch[3])
        let first = store.consumeOnce(batch: batch, now: 1).map { try? $0.get() }
        #expect(first == [Bool?](repeating: true, count: 41) + [false])
        let second = store.consumeOnce(batch: batch, now: 1).map { try? $0.get() }
        #expect(second == [Bool?](repeating: false, count: 42))
        let askOnSrc = try Self.stat(cluster, "errorstats", "errorstat_ASK", server: src)
        let movedOnDst = try Self.stat(cluster, "errorstats", "errorstat_MOVED", server: dst)
        #expect(askOnSrc >= 2 && movedOnDst == 0, "source ASK \(askOnSrc), importing node MOVED \(movedOnDst)")
        let onDst = try RedisClusterFixture.redisCLI(["-p", "\(cluster.servers[dst].port)", "EXISTS", name])
        #expect(onDst.contains("1"), "the asked value is on the importing node: \(onDst)")
        // Each value's script ran once per batch — the asked one on the importing node (a redirected call is not
        // counted) — and none went through NOSCRIPT: the script was loaded on every master before the first pipeline.
        let evalshas = try Self.stat(cluster, "commandstats", "cmdstat_evalsha")
        let evals = try Self.stat(cluster, "commandstats", "cmdstat_eval")
        let noscript = try Self.stat(cluster, "errorstats", "errorstat_NOSCRIPT")
        #expect(evalshas == 2 * 42 && evals == 0 && noscript == 0, "EVALSHA \(evalshas), EVAL \(evals), NOSCRIPT \(noscript)")
    }

    /// `wait_replicas` on a cluster without replicas: each master's pipeline ends with its WAIT, the masters wait at
    /// once (not one after the other), and no value of the batch is reported consumed although each was written —
    /// a write no replica acknowledged is a failure (cause wait_replicas), and stays consumed.
    @Test func aClusterBatchUnderWaitReplicasFailsClosedAndWaitsOnEveryMasterAtOnce() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let settings = RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(cluster.servers[0].port))])
        let plain = try RedisStateStore(cluster: settings, keyPrefix: "bw:", timeoutMillis: 2_000)
        try plain.ping()   // writes the layout marker (a write WAIT would refuse here)
        let waiting = try RedisStateStore(cluster: settings, keyPrefix: "bw:", timeoutMillis: 600, waitReplicas: 1)
        try waiting.ping()
        let batch = (0..<30).map { ConsumeRequest(namespace: "1", key: "w\($0)", expiresAt: 2_000_000_000) }
        let started = Date()
        let results = waiting.consumeOnce(batch: batch, now: 1)
        let elapsed = Date().timeIntervalSince(started)
        #expect(results.allSatisfy { if case .failure(let e) = $0 { e.cause == "wait_replicas" } else { false } },
                "\(results.prefix(3))")
        // Each WAIT waits 450 ms (3/4 of state.timeout): at once on the three masters, about 0.45 s; one after the
        // other it would be 1.35 s.
        #expect(elapsed < 1.0, "the batch took \(elapsed) s")
        // Again under wait_replicas: the values are refusals now (0: nothing written), which no WAIT can undo;
        // only the value new to this batch fails. (Past the backoff the WAITs above started on each master first.)
        Thread.sleep(forTimeInterval: 0.3)
        let again = waiting.consumeOnce(batch: batch + [ConsumeRequest(namespace: "1", key: "w-new", expiresAt: 2_000_000_000)], now: 1)
        #expect(again.prefix(30).allSatisfy { (try? $0.get()) == false }, "\(again.prefix(3))")
        #expect({ if case .failure(let e) = again[30] { e.cause == "wait_replicas" } else { false } }(), "\(again[30])")
        #expect(plain.consumeOnce(batch: batch, now: 1).allSatisfy { (try? $0.get()) == false },
                "every value was written although none was reported consumed")
    }

    /// While the first layout check walks a large keyspace, a concurrent call waits for it at most state.timeout
    /// (250 ms here), then fails with cause layout — it does not wait out the walk.
    @Test func callsDuringTheLayoutWalkDoNotWaitPastTheTimeout() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let port = cluster.servers[0].port
        // ~1.2M keys under another prefix, spread over the masters (each batch in one tag's slot).
        for t in 0..<12 {
            try RedisClusterFixture.redisCLI(["-c", "-p", "\(port)", "EVAL",
                "for i=1,tonumber(ARGV[1]) do redis.call('SET', KEYS[1]..i, '') end return 1", "1", "other:{t\(t)}:", "100000"])
        }
        let store = try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(port))]),
                                        keyPrefix: "big:", timeoutMillis: 250)
        let group = DispatchGroup()
        let started = Date()
        DispatchQueue.global().async(group: group) { _ = try? store.ping() }
        // The ping's check has started (it walks the keys now).
        let until = Date().addingTimeInterval(5)
        while Date() < until, store.layoutState.withLock({ $0.phase != .checking }) { usleep(1_000) }
        let t0 = Date()
        var cause: String? = nil
        do { _ = try store.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1) } catch { cause = error.cause }
        let waited = Date().timeIntervalSince(t0)
        group.wait()
        let walk = Date().timeIntervalSince(started)
        #expect(waited < 0.35, "a call during the walk (\(walk) s) waited \(waited) s")
        #expect(walk > 0.3, "the walk (\(walk) s) was too short to tell")
        #expect(cause == "layout")
        // After the walk the store serves.
        #expect(try store.consumeOnce(namespace: "1", key: "j", expiresAt: 2_000_000_000, now: 1))
    }

    /// Retried registrations list the key id once; a registration naming another app is refused and not listed there.
    @Test func retriedRegistrationsListTheKeyOnce() throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let port = cluster.servers[0].port
        let store = try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: Int32(port))]),
                                        keyPrefix: "dup:", timeoutMillis: 2_000)
        let record = AttestedKeyRecord(keyID: "k1", appID: "T.app", publicKey: [4, 1, 2], counter: 0,
                                       environment: "production", createdAt: 100)
        #expect(try store.registerKey(record))
        for _ in 0..<5 { #expect(try !store.registerKey(record)) }
        let other = AttestedKeyRecord(keyID: "k1", appID: "Other.app", publicKey: [4, 1, 2], counter: 0,
                                      environment: "production", createdAt: 100)
        #expect(try !store.registerKey(other))
        let len = try RedisClusterFixture.redisCLI(["-c", "-p", "\(port)", "LLEN", RedisKeySpace(prefix: "dup:", layout: 2).app("T.app")])
        #expect(try store.keys(appID: "T.app").count == 1)
        #expect(try store.keys(appID: "Other.app").isEmpty)
        #expect(len.trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }
}
