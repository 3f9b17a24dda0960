import GatewayConfig
import GatewayCore

/// Token buckets shared by every loop of the process (`rate_limit`, `registration_rate_limit`): one per limit and
/// key (a client address, an app id, a key id), refilled at the limit's rate up to its burst. Sharded locks; each
/// shard holds at most `maxBucketsPerShard` buckets — when full, buckets that have refilled to their burst (idle
/// keys: forgetting them changes nothing) go first, then the least recently used half.
///
/// Local to the process: with several replicas each has its own budget. With a Redis store the limits are shared
/// there instead (`SharedRateLimits`), and these buckets are the fallback while Redis fails.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updatedMillis: UInt64
        var burst: Double
        var rate: Double

        /// Refilled to its burst by `nowMillis`: an idle key.
        func isFull(at nowMillis: UInt64) -> Bool {
            tokens + Double(nowMillis &- min(nowMillis, updatedMillis)) / 1000 * rate >= burst
        }
    }

    private final class Shard: Sendable {
        let buckets = AnnotatedMutex<[String: Bucket]>([:])
    }

    private static let shardCount = 16
    static let maxBucketsPerShard = 8192
    private let shards: [Shard]

    init() {
        shards = (0..<Self.shardCount).map { _ in Shard() }
    }

    /// Takes one token for `key` under the limit named `limit`; nil when there was one, else the seconds until there
    /// is (for `Retry-After`, at least 1).
    func take(_ limit: RateLimitConfig, name: String, key: some Collection<UInt8>, nowMillis: UInt64 = MonotonicClock.nowMillis()) -> Int? {
        var id = name
        id.append("\u{0}")
        id.append(String(decoding: key, as: UTF8.self))
        let shard = shards[Int(UInt(bitPattern: id.hashValue) % UInt(Self.shardCount))]
        let burst = Double(limit.burst), rate = limit.ratePerSecond
        return shard.buckets.withLock { buckets -> Int? in
            var bucket = buckets[id] ?? Bucket(tokens: burst, updatedMillis: nowMillis, burst: burst, rate: rate)
            let elapsed = Double(nowMillis &- min(nowMillis, bucket.updatedMillis)) / 1000
            bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
            bucket.updatedMillis = nowMillis
            bucket.burst = burst
            bucket.rate = rate
            let refused = bucket.tokens < 1
            if !refused { bucket.tokens -= 1 }
            if buckets[id] == nil && buckets.count >= Self.maxBucketsPerShard { Self.prune(&buckets, nowMillis: nowMillis) }
            buckets[id] = bucket
            guard refused else { return nil }
            return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
        }
    }

    private static func prune(_ buckets: inout [String: Bucket], nowMillis: UInt64) {
        buckets = buckets.filter { !$0.value.isFull(at: nowMillis) }
        if buckets.count > maxBucketsPerShard / 2 {
            let recent = buckets.sorted { $0.value.updatedMillis > $1.value.updatedMillis }.prefix(maxBucketsPerShard / 2)
            buckets = Dictionary(uniqueKeysWithValues: recent.map { ($0.key, $0.value) })
        }
    }
}
