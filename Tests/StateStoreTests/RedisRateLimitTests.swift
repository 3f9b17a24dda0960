import Foundation
import GatewayCore
import StateStore
@testable import StateStoreRedis
@testable import StateStoreSQLite
import Testing

private func store(_ server: RedisServer, prefix: String, timeoutMillis: Int = 1_000) throws -> RedisStateStore {
    try RedisStateStore(url: server.url, keyPrefix: prefix, timeoutMillis: timeoutMillis)
}

/// Shared rate limits (`takeToken`, GCRA on Redis' clock) against a real redis-server: one budget for every
/// connection on one prefix, the documented key with a TTL of the time to refill, settings changed by a reload.
@Suite struct RedisRateLimitTests {
    @Test func twoConnectionsShareOneBurstAndRetryAfterSaysWhen() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let a = try store(server, prefix: "g:"), b = try store(server, prefix: "g:")
        // 1/s, burst 4: four tokens between both "gateways", then a refusal from either, for about a second.
        var answers: [Int?] = []
        for i in 0..<6 { answers.append(try (i % 2 == 0 ? a : b).takeToken(limit: "route:api", key: "k", ratePerSecond: 1, burst: 4)) }
        #expect(answers == [nil, nil, nil, nil, 1, 1])
        // Another key, another limit, another prefix: budgets of their own.
        #expect(try a.takeToken(limit: "route:api", key: "other", ratePerSecond: 1, burst: 4) == nil)
        #expect(try a.takeToken(limit: "registration:ios", key: "k", ratePerSecond: 1, burst: 4) == nil)
        #expect(try store(server, prefix: "h:").takeToken(limit: "route:api", key: "k", ratePerSecond: 1, burst: 4) == nil)
        // A slow rate says how long to wait, in whole seconds rounded up.
        #expect(try a.takeToken(limit: "slow", key: "k", ratePerSecond: 1.0 / 60, burst: 1) == nil)
        let retry = try #require(try b.takeToken(limit: "slow", key: "k", ratePerSecond: 1.0 / 60, burst: 1))
        #expect(retry >= 59 && retry <= 60)
    }

    @Test func tokensComeBackAtTheRate() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let s = try store(server, prefix: "r:")
        // 5/s: one token every 200 ms; burst 2 (the sleeps leave 100 ms or more of slack either way).
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == nil)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == nil)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == 1)
        usleep(280_000)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == nil)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == 1)
        usleep(700_000)   // refilled to the burst, never above it
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == nil)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == nil)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 5, burst: 2) == 1)
    }

    @Test func theBucketIsOneKeyUnderThePrefixThatExpiresWhenFull() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let s = try store(server, prefix: "p:")
        // 10/s, burst 5: after one token the bucket is full again in 100 ms, and so the key lives that long.
        #expect(try s.takeToken(limit: "route:api", key: "abc", ratePerSecond: 10, burst: 5) == nil)
        let pttl = Int(try server.command("PTTL p:ratelimit:route:api:abc").dropFirst()) ?? -1
        #expect(pttl > 0 && pttl <= 100, "PTTL \(pttl)")
        #expect(try server.command("DBSIZE") == ":2", "one key per bucket, nothing else but the layout marker")
        #expect(try server.command("GET p:layout") == "1")
        for _ in 0..<4 { _ = try s.takeToken(limit: "route:api", key: "abc", ratePerSecond: 10, burst: 5) }
        let drained = Int(try server.command("PTTL p:ratelimit:route:api:abc").dropFirst()) ?? -1
        #expect(drained > 400 && drained <= 500, "PTTL \(drained): the burst's refill time")
        usleep(600_000)
        #expect(try server.command("EXISTS p:ratelimit:route:api:abc") == ":0", "an idle key vanishes")
        // A `:` in the key is encoded, so the last `:` always ends the limit's name.
        #expect(try s.takeToken(limit: "a", key: "b:c", ratePerSecond: 1, burst: 1) == nil)
        #expect(try server.command("EXISTS p:ratelimit:a:b%3Ac") == ":1")
        #expect(try s.takeToken(limit: "a:b", key: "c", ratePerSecond: 1, burst: 1) == nil, "not the same bucket")
    }

    @Test func manyThreadsOnTwoConnectionsNeverTakeMoreThanTheBurst() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let stores = [try store(server, prefix: "c:"), try store(server, prefix: "c:")]
        let taken = try ThreadRace.run(threads: 8, rounds: 5) { thread, _ in
            try stores[thread % 2].takeToken(limit: "l", key: "k", ratePerSecond: 1.0 / 3600, burst: 17) == nil
        }
        #expect(taken.joined().filter { $0 }.count == 17)
    }

    @Test func changedSettingsApplyToAStoredBucket() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let s = try store(server, prefix: "s:")
        for _ in 0..<5 { #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 1.0 / 3600, burst: 5) == nil) }
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 1.0 / 3600, burst: 5) != nil)
        // A reload raised the rate: the drained bucket refills at the new rate, not after the old hours.
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 100, burst: 5) == 1)
        usleep(30_000)
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 100, burst: 5) == nil)
    }

    @Test func badSettingsAndAStoppedServerFail() throws {
        let server = try RedisServer()
        defer { server.stop() }
        let s = try store(server, prefix: "e:", timeoutMillis: 250)
        #expect(s.sharesRateLimits)
        #expect(errorKind { _ = try s.takeToken(limit: "l", key: "k", ratePerSecond: 0, burst: 1) } == .invalid)
        #expect(errorKind { _ = try s.takeToken(limit: "l", key: "k", ratePerSecond: 1, burst: 0) } == .invalid)
        #expect(errorKind { _ = try s.takeToken(limit: "l", key: "k", ratePerSecond: .infinity, burst: 1) } == .invalid)
        // Huge bursts at tiny rates stay in range (the window is capped).
        #expect(try s.takeToken(limit: "l", key: "k", ratePerSecond: 1e-9, burst: Int.max) == nil)
        server.stop()
        #expect(errorKind { _ = try s.takeToken(limit: "l", key: "k", ratePerSecond: 1, burst: 1) } == .unavailable)
    }

    @Test func backendsThatDoNotShareSaySo() throws {
        let memory = MemoryStateStore()
        #expect(!memory.sharesRateLimits)
        #expect(errorKind { _ = try memory.takeToken(limit: "l", key: "k", ratePerSecond: 1, burst: 1) } == .invalid)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let sqlite = try SQLiteStateStore(path: directory.path + "/state.db", timeoutMillis: 1_000)
        #expect(!sqlite.sharesRateLimits)
        #expect(errorKind { _ = try sqlite.takeToken(limit: "l", key: "k", ratePerSecond: 1, burst: 1) } == .invalid)
    }
}
