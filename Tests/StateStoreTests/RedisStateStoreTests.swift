import Foundation
import GatewayCore
import StateStore
@testable import StateStoreRedis
import Testing

/// A key prefix no other test uses, so tests sharing a server never see each other's keys.
private func uniqueRedisPrefix() -> String { "t\(UUID().uuidString.prefix(8)):" }

private func makeRedisStore(_ server: RedisServer, prefix: String = uniqueRedisPrefix(), url: String? = nil,
                    timeoutMillis: Int = 1_000) throws -> RedisStateStore {
    try RedisStateStore(url: url ?? server.url, keyPrefix: prefix, timeoutMillis: timeoutMillis)
}

/// The kind of error `body` throws, or nil when it succeeds (the Redis suites share it).
func errorKind(_ body: () throws -> Void) -> StateStoreError.Kind? {
    do {
        try body()
        return nil
    } catch let error as StateStoreError {
        return error.kind
    } catch {
        Issue.record("not a StateStoreError: \(error)")
        return nil
    }
}

/// The Redis backend against a real redis-server (one per test, killed when the test ends, pass or fail).
@Suite struct RedisStateStoreTests {
    @Test(arguments: StateStoreConformance.Check.allCases)
    func conformance(_ check: StateStoreConformance.Check) throws {
        let server = try RedisServer()
        defer { server.stop() }
        try StateStoreConformance(make: { try makeRedisStore(server) }, sweepCountsExpiredValues: false).run(check)
    }

    /// `wait_replicas` on a server without replicas: every WAIT falls short. A write is then a failure (cause
    /// wait_replicas: `on_unavailable: allow` may pass it), but a refusal — a value already consumed, a counter not
    /// raised — changed nothing and must stay a refusal, one at a time and in a batch, or `allow` would pass a replay.
    @Test func underWaitReplicasARefusalStaysARefusal() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = uniqueRedisPrefix()
        let plain = try makeRedisStore(server, prefix: prefix)
        try plain.ping()   // the layout marker (a write WAIT would refuse)
        let waiting = try RedisStateStore(url: server.url, keyPrefix: prefix, timeoutMillis: 400, waitReplicas: 1)
        func cause<T>(_ r: Result<T, StateStoreError>) -> String? { if case .failure(let e) = r { e.cause } else { nil } }
        let now: Int64 = 1_000, exp: Int64 = 2_000_000_000
        #expect(try plain.consumeOnce(namespace: "n", key: "old", expiresAt: exp, now: now))
        #expect(try !waiting.consumeOnce(namespace: "n", key: "old", expiresAt: exp, now: now), "a replay: no WAIT, no error")
        #expect(cause(Result { () throws(StateStoreError) in try waiting.consumeOnce(namespace: "n", key: "new", expiresAt: exp, now: now) })
                == "wait_replicas")
        // A WAIT that falls short drops the connection and backs off (100 ms, doubling): past it before each call
        // that follows one, so the call reaches the server.
        func pastTheBackoff() { Thread.sleep(forTimeInterval: 0.3) }
        pastTheBackoff()
        let batch = ["old", "fresh", "new", "fresh"].map { ConsumeRequest(namespace: "n", key: $0, expiresAt: exp) }
        let results = waiting.consumeOnce(batch: batch, now: now)
        #expect((try? results[0].get()) == false && (try? results[2].get()) == false && (try? results[3].get()) == false,
                "\(results)")
        #expect(cause(results[1]) == "wait_replicas", "the one value written fails")
        let key = AttestedKeyRecord(keyID: "k", appID: "a", publicKey: [4], counter: 5, environment: "production", createdAt: now)
        #expect(try plain.registerKey(key))
        pastTheBackoff()
        #expect(try !waiting.advanceCounter(keyID: "k", to: 5))
        let counters = waiting.advanceCounters(batch: [CounterAdvance(keyID: "k", counter: 4), CounterAdvance(keyID: "k", counter: 6),
                                                       CounterAdvance(keyID: "k", counter: 6)])
        #expect((try? counters[0].get()) == false && (try? counters[2].get()) == false && cause(counters[1]) == "wait_replicas",
                "\(counters)")
        #expect(try plain.key(id: "k")?.counter == 6, "written although not reported")
    }

    @Test func twoConnectionsRacingConsumeOnceOrRedeemLetExactlyOneWin() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let prefix = uniqueRedisPrefix()
        let stores = [try makeRedisStore(server, prefix: prefix), try makeRedisStore(server, prefix: prefix)]
        for round in 0..<50 {
            let wins = try ThreadRace.run(threads: 8) { index in
                try stores[index % 2].consumeOnce(namespace: "123", key: "jti-\(round)", expiresAt: 2_000_000_000,
                                                  now: 1_000_000_000)
            }
            #expect(wins.filter { $0 }.count == 1, "round \(round): exactly one of two connections wins")
            #expect(try stores[round % 2].issue(namespace: "T.app", key: "c-\(round)", expiresAt: 2_000_000_000,
                                                now: 1_000_000_000))
            let redeemed = try ThreadRace.run(threads: 8) { index in
                try stores[index % 2].redeem(namespace: "T.app", key: "c-\(round)", now: 1_000_000_000)
            }
            #expect(redeemed.filter { $0 }.count == 1, "round \(round): exactly one redeemer wins")
        }
    }

    @Test func keyPrefixIsolatesStoresSharingOneServer() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let a = try makeRedisStore(server, prefix: "gw-a:")
        let b = try makeRedisStore(server, prefix: "gw-b:")
        #expect(try a.consumeOnce(namespace: "1", key: "x", expiresAt: 200, now: 100))
        #expect(try b.consumeOnce(namespace: "1", key: "x", expiresAt: 200, now: 100))
        #expect(try !a.consumeOnce(namespace: "1", key: "x", expiresAt: 200, now: 100))
        let record = AttestedKeyRecord(keyID: "k1", appID: "T.app", publicKey: [4, 1, 2], counter: 0,
                                       environment: "production", createdAt: 100)
        #expect(try a.registerKey(record))
        #expect(try b.key(id: "k1") == nil)
        #expect(try b.keys(appID: "T.app").isEmpty)
        #expect(try a.key(id: "k1") == record)
    }

    @Test func keysFollowTheDocumentedLayoutAndOneTimeValuesExpireInRedis() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server, prefix: "p:")
        let now = Int64(Date().timeIntervalSince1970)
        #expect(try store.consumeOnce(namespace: "123456789012", key: "abc", expiresAt: now + 60, now: now))
        let pttl = Int(try server.command("PTTL p:jti:123456789012:abc").dropFirst()) ?? -1
        #expect(pttl > 55_000 && pttl <= 60_000)
        // Already expired: consumable, and gone from Redis almost at once.
        #expect(try store.consumeOnce(namespace: "1", key: "old", expiresAt: now - 5, now: now))
        usleep(20_000)
        #expect(try server.command("EXISTS p:jti:1:old") == ":0")
        // Colons in a namespace cannot make two different values collide.
        #expect(try store.consumeOnce(namespace: "a:b", key: "c", expiresAt: now + 60, now: now))
        #expect(try store.consumeOnce(namespace: "a", key: "b:c", expiresAt: now + 60, now: now))

        let record = AttestedKeyRecord(keyID: "kid", appID: "T.app", publicKey: [4, 0, 255], counter: 7,
                                       environment: "development", createdAt: 42)
        #expect(try store.registerKey(record))
        #expect(try server.command("HGET p:key:kid counter") == "7")
        #expect(try server.command("LRANGE p:app:T.app 0 -1").hasPrefix("*1"))
        #expect(try store.advanceCounter(keyID: "kid", to: 8))
        #expect(try server.command("HGET p:key:kid counter") == "8")
        #expect(try store.sweepExpired(now: now + 1_000) == 0)
    }

    /// The attestation extensions are optional hash fields: present when set, absent when nil; and a key hash
    /// written before they existed (no such fields) loads with nil extensions, by id and by app.
    @Test func keyAttestationExtensionsAreOptionalHashFields() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server, prefix: "x:")
        // Exactly what the previous build's registerKey script wrote.
        try server.command("HSET x:key:old app_id T.app public_key pk counter 3 environment production created_at 42")
        try server.command("RPUSH x:app:T.app old")
        let old = AttestedKeyRecord(keyID: "old", appID: "T.app", publicKey: Array("pk".utf8), counter: 3,
                                    environment: "production", createdAt: 42)
        let loaded = try #require(try store.key(id: "old"))
        #expect(loaded == old)
        #expect(loaded.validationCategory == nil && loaded.bundleVersion == nil && loaded.keyAccessControl == nil)
        #expect(try store.advanceCounter(keyID: "old", to: 4))

        let new = AttestedKeyRecord(keyID: "new", appID: "T.app", publicKey: [4, 9], counter: 0,
                                    environment: "production", createdAt: 43,
                                    validationCategory: [1, 0, 0, 0], bundleVersion: "27.1", keyAccessControl: nil)
        #expect(try store.registerKey(new))
        #expect(try server.command("HGET x:key:new bundle_version") == "27.1")
        #expect(try server.command("HEXISTS x:key:new validation_category") == ":1")
        #expect(try server.command("HEXISTS x:key:new key_access_control") == ":0", "nil is left out")
        var advanced = old
        advanced.counter = 4
        #expect(try store.keys(appID: "T.app") == [advanced, new])
    }

    @Test func issuedValuesHaveTheirOwnKeysUnderThePrefixAndExpireInRedis() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server, prefix: "p:")
        let other = try makeRedisStore(server, prefix: "q:")
        let now = Int64(Date().timeIntervalSince1970)
        #expect(try store.issue(namespace: "TEAM.app", key: "abc", expiresAt: now + 60, now: now))
        let pttl = Int(try server.command("PTTL p:issued:TEAM.app:abc").dropFirst()) ?? -1
        #expect(pttl > 55_000 && pttl <= 60_000)
        #expect(try server.command("EXISTS p:jti:TEAM.app:abc") == ":0", "not a consumed value")
        #expect(try !other.redeem(namespace: "TEAM.app", key: "abc", now: now), "another prefix sees nothing")
        #expect(try store.redeem(namespace: "TEAM.app", key: "abc", now: now))
        #expect(try server.command("EXISTS p:issued:TEAM.app:abc") == ":0", "redeeming deletes it")
        #expect(try store.issue(namespace: "a:b", key: "c", expiresAt: now + 60, now: now))
        #expect(try server.command("EXISTS p:issued:a%3Ab:c") == ":1", "namespaces are encoded as for jti")
        // Already expired: recorded, never redeemable, and gone from Redis almost at once.
        #expect(try store.issue(namespace: "1", key: "old", expiresAt: now - 5, now: now))
        usleep(20_000)
        #expect(try server.command("EXISTS p:issued:1:old") == ":0")
    }

    @Test func scriptsAreReloadedAfterScriptFlush() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server)
        #expect(try store.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100))
        #expect(try server.command("SCRIPT FLUSH") == "+OK")
        #expect(try !store.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100))
        #expect(try store.consumeOnce(namespace: "1", key: "b", expiresAt: 200, now: 100))
    }

    @Test func corruptOrForeignValuesFailWithoutCrashing() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server, prefix: "c:")
        try server.command("HSET c:key:half app_id x counter notanumber")
        try server.command("SET c:key:string hello")
        try server.command("SET c:receipt:string hello")
        try server.command("SET c:issued:1:text hello")
        try server.command("HSET c:issued:1:hash a b")
        #expect(errorKind { _ = try store.key(id: "half") } == .unavailable)
        #expect(errorKind { _ = try store.key(id: "string") } == .unavailable)
        #expect(errorKind { _ = try store.advanceCounter(keyID: "half", to: 3) } == nil)
        #expect(errorKind { _ = try store.advanceCounter(keyID: "string", to: 3) } == .unavailable)
        #expect(errorKind { _ = try store.receipt(keyID: "string") } == .unavailable)
        #expect(try !store.redeem(namespace: "1", key: "text", now: 100), "not an expiry: fails closed")
        #expect(errorKind { _ = try store.redeem(namespace: "1", key: "hash", now: 100) } == .unavailable)
        // An error reply leaves the connection usable.
        #expect(errorKind { try store.ping() } == nil)
    }

    @Test func passwordProtectedServerNeedsTheRightPassword() throws {
        let server = try RedisServer(password: "s3cr%t")
        defer { server.stop() }
        let base = "127.0.0.1:\(server.port)"
        let right = try makeRedisStore(server, url: "redis://:s3cr%25t@\(base)")
        #expect(errorKind { try right.ping() } == nil)
        #expect(try right.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100))
        let aclUser = try makeRedisStore(server, url: "redis://default:s3cr%25t@\(base)/2")
        #expect(try aclUser.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100))  // another db
        let wrong = try makeRedisStore(server, url: "redis://:nope@\(base)")
        #expect(errorKind { try wrong.ping() } == .unavailable)
        let none = try makeRedisStore(server, url: "redis://\(base)")
        #expect(errorKind { _ = try none.consumeOnce(namespace: "1", key: "b", expiresAt: 200, now: 100) }
                == .unavailable)
    }

    @Test func stoppedServerFailsFastThenReconnectsAfterRestart() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server, timeoutMillis: 250)
        #expect(try store.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100))
        server.stop()
        let failStart = MonotonicClock.nowMillis()
        for _ in 0..<50 {
            #expect(errorKind { _ = try store.consumeOnce(namespace: "1", key: "b", expiresAt: 200, now: 100) }
                    == .unavailable)
        }
        #expect(MonotonicClock.nowMillis() - failStart < 1_000)

        try server.start()
        let restarted = MonotonicClock.nowMillis()
        var recovered = false
        while !recovered && MonotonicClock.nowMillis() - restarted < 10_000 {
            recovered = errorKind { try store.ping() } == nil
            if !recovered { usleep(20_000) }
        }
        #expect(recovered)
        #expect(MonotonicClock.nowMillis() - restarted < 6_000)
        #expect(try store.consumeOnce(namespace: "1", key: "b", expiresAt: 200, now: 100))
    }

    @Test func serverThatNeverAnswersTimesOutWithinTheBudget() throws {
        let listener = try SilentListener()
        let store = try RedisStateStore(url: "redis://127.0.0.1:\(listener.port)", keyPrefix: "t:", timeoutMillis: 200)
        let start = MonotonicClock.nowMillis()
        #expect(errorKind { _ = try store.consumeOnce(namespace: "1", key: "a", expiresAt: 200, now: 100) } == .timeout)
        let elapsed = MonotonicClock.nowMillis() - start
        #expect(elapsed >= 150 && elapsed < 700)
        // Backing off now: the next call fails at once without touching the network.
        let again = MonotonicClock.nowMillis()
        #expect(errorKind { try store.ping() } == .unavailable)
        #expect(MonotonicClock.nowMillis() - again < 50)
    }

    @Test func aHugeReplyIsRefusedNotBuffered() throws {
        // A "server" that answers anything with the start of a 50 MB bulk string and streams it: the client stops
        // at its reply cap (a protocol error) instead of buffering it all.
        let listener = try SilentListener()
        let fd = listener.fd
        let sender = Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            var head = Array("$50000000\r\n".utf8)
            _ = write(client, &head, head.count)
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024)
            for _ in 0..<(50_000_000 / chunk.count) where chunk.withUnsafeBytes({ send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 {}
        }
        sender.start()
        let store = try RedisStateStore(url: "redis://127.0.0.1:\(listener.port)", keyPrefix: "t:", timeoutMillis: 5_000)
        do {
            try store.ping()
            Issue.record("a 50 MB reply was accepted")
        } catch {
            #expect(error.cause == "protocol", "\(error)")
        }
    }

    @Test func consumeOnceRoundTripIsQuick() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let store = try makeRedisStore(server)
        let n = 2_000
        let start = MonotonicClock.nowMicros()
        for i in 0..<n {
            _ = try store.consumeOnce(namespace: "1", key: "k\(i)", expiresAt: 2_000_000_000, now: 1_000_000_000)
        }
        let micros = Double(MonotonicClock.nowMicros() - start) / Double(n)
        print("RedisStateStore.consumeOnce: \(micros) µs per round trip")
        #expect(micros < 5_000)
    }
}

/// URL parsing and the reconnect state machine, without sockets.
@Suite struct RedisConfigurationTests {
    @Test func urlsParse() throws {
        let full = try RedisEndpoint(parsing: "redis://user:p%40ss@redis.internal:6380/3")
        #expect(full == RedisEndpoint(host: "redis.internal", port: 6380, user: "user", password: "p@ss", database: 3))
        #expect(full.description == "redis://redis.internal:6380/3")
        let bare = try RedisEndpoint(parsing: "redis://127.0.0.1")
        #expect(bare == RedisEndpoint(host: "127.0.0.1", port: 6379, user: nil, password: nil, database: 0))
        let v6 = try RedisEndpoint(parsing: "redis://:pw@[::1]:7000/")
        #expect(v6 == RedisEndpoint(host: "::1", port: 7000, user: nil, password: "pw", database: 0))
        let tls = try RedisEndpoint(parsing: "rediss://gateway:pw@redis.internal:6380/1")
        #expect(tls == RedisEndpoint(host: "redis.internal", port: 6380, user: "gateway", password: "pw", database: 1, tls: true))
        #expect(tls.description == "rediss://redis.internal:6380/1")
        #expect(try RedisEndpoint(parsing: "rediss://127.0.0.1").port == 6379)
    }

    @Test(arguments: ["http://127.0.0.1:6379", "redisss://h:6379", "rediss://", "redis://", "redis://h:0", "redis://h:65536",
                      "redis://h:x", "redis://h:6379/-1", "redis://h:6379/db", "redis://pw@h:6379",
                      "redis://:@h:6379", "redis://:%zz@h", "redis://[::1:6379", "redis://h?x=1"])
    func malformedURLsAreInvalid(url: String) {
        #expect(errorKind { _ = try RedisStateStore(url: url, keyPrefix: "p:", timeoutMillis: 250) } == .invalid)
    }

    @Test func backoffDoublesUpToTheCapAndResetsOnSuccess() {
        var m = RedisReconnectStateMachine()
        #expect(m.beginCall(nowMillis: 0) == .connect)
        m.failed(nowMillis: 1_000)
        #expect(m.beginCall(nowMillis: 1_040) == .failFast(retryInMillis: 60))
        #expect(m.beginCall(nowMillis: 1_100) == .connect)
        var now: UInt64 = 1_100
        for expected: UInt64 in [200, 400, 800, 1_600, 3_200, 5_000, 5_000] {
            m.failed(nowMillis: now)
            #expect(m.beginCall(nowMillis: now) == .failFast(retryInMillis: expected))
            now += expected
        }
        m.connectSucceeded()
        #expect(m.beginCall(nowMillis: now) == .useConnection)
        m.failed(nowMillis: now)
        #expect(m.beginCall(nowMillis: now) == .failFast(retryInMillis: 100))
    }
}
