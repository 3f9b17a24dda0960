import Testing
import GatewayConfig
@testable import GatewayProxy

/// The token buckets: burst, refill at the rate, keys and limits apart, Retry-After.
@Suite struct RateLimiterTests {
    let limit = RateLimitConfig(ratePerSecond: 2, burst: 3)

    @Test func aBurstThenTheRate() {
        let l = RateLimiter()
        let key = Array("10.0.0.1".utf8)
        for _ in 0..<3 { #expect(l.take(limit, name: "r", key: key, nowMillis: 1_000) == nil) }
        #expect(l.take(limit, name: "r", key: key, nowMillis: 1_000) == 1)          // empty: a token in 0.5 s → 1 s
        #expect(l.take(limit, name: "r", key: key, nowMillis: 1_499) == 1)
        #expect(l.take(limit, name: "r", key: key, nowMillis: 1_500) == nil)        // 2/s: one token after 500 ms
        #expect(l.take(limit, name: "r", key: key, nowMillis: 1_500) == 1)
        #expect(l.take(limit, name: "r", key: key, nowMillis: 9_000) == nil)        // refilled, never above the burst
        #expect(l.take(limit, name: "r", key: key, nowMillis: 9_000) == nil)
        #expect(l.take(limit, name: "r", key: key, nowMillis: 9_000) == nil)
        #expect(l.take(limit, name: "r", key: key, nowMillis: 9_000) != nil)
    }

    @Test func keysAndLimitsHaveTheirOwnBuckets() {
        let l = RateLimiter()
        let one = RateLimitConfig(ratePerSecond: 1, burst: 1)
        #expect(l.take(one, name: "r", key: Array("a".utf8), nowMillis: 0) == nil)
        #expect(l.take(one, name: "r", key: Array("a".utf8), nowMillis: 0) != nil)
        #expect(l.take(one, name: "r", key: Array("b".utf8), nowMillis: 0) == nil)
        #expect(l.take(one, name: "other", key: Array("a".utf8), nowMillis: 0) == nil)
        // A slow rate says how long to wait.
        let slow = RateLimitConfig(ratePerSecond: 1.0 / 60, burst: 1)
        #expect(l.take(slow, name: "s", key: Array("a".utf8), nowMillis: 0) == nil)
        #expect(l.take(slow, name: "s", key: Array("a".utf8), nowMillis: 0) == 60)
    }

    @Test func manyKeysStayBounded() {
        let l = RateLimiter()
        let one = RateLimitConfig(ratePerSecond: 1, burst: 1)
        for i in 0..<(RateLimiter.maxBucketsPerShard * 20) {
            _ = l.take(one, name: "r", key: Array("k\(i)".utf8), nowMillis: UInt64(i / 1000))
        }
        // A key used just now is still remembered (its bucket is empty).
        #expect(l.take(one, name: "r", key: Array("k\(RateLimiter.maxBucketsPerShard * 20 - 1)".utf8),
                       nowMillis: UInt64((RateLimiter.maxBucketsPerShard * 20 - 1) / 1000)) != nil)
    }
}
