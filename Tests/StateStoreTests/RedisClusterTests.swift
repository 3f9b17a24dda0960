import Foundation
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
        #expect(RedisClusterClient.redirect("MOVED 3999 127.0.0.1:6381").map { "\($0.0) \($0.1)" } == "3999 127.0.0.1:6381")
        #expect(RedisClusterClient.redirect("ASK 1 [::1]:7000").map { "\($0.0) \($0.1)" } == "1 [::1]:7000")
        for bad in ["MOVED 16384 127.0.0.1:6381", "MOVED x 127.0.0.1:1", "MOVED 1 127.0.0.1", "MOVED 1 :6379", "MOVED 1 h:0", "MOVED 1"] {
            #expect(RedisClusterClient.redirect(bad) == nil, "\(bad)")
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

    @Test func bracesInThePrefixAreRefused() {
        #expect(throws: StateStoreError.self) {
            try RedisStateStore(cluster: RedisClusterSettings(nodes: [RedisNode(host: "127.0.0.1", port: 1)]), keyPrefix: "{ag}:", timeoutMillis: 100)
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
