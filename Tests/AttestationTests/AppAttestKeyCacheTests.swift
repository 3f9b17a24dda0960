import Testing
@testable import Attestation
import GatewayCore
import GatewayCrypto
import StateStore

/// The key cache holds each key with its fraud metric; when full it evicts entries, never resets the metrics alone
/// (a reset left cached keys without their metric, so `max_risk_metric` failed open).
@Suite struct AppAttestKeyCacheTests {
    static let point: [UInt8] = (try? ECPrivateKey.generate(.p256).uncompressedPublicPoint()) ?? []

    func record(_ id: String) -> AttestedKeyRecord {
        AttestedKeyRecord(keyID: id, appID: "T.app", publicKey: Self.point, counter: 0, environment: "production", createdAt: 0)
    }

    @Test func aCachedKeyKeepsItsMetricWhenTheCacheIsFull() {
        let cache = AppAttestKeyCache(capacity: 4)
        cache.put(record("risky"), riskMetric: 90)
        for i in 0..<50 {
            cache.put(record("k\(i)"), riskMetric: nil)
            // Whatever was evicted, a key still cached has its metric: never "cached, metric unknown".
            if let entry = cache.get("risky") { #expect(entry.riskMetric == 90) }
            #expect(cache.count <= 4)
        }
    }

    @Test func anEvictedKeyIsGoneWithItsMetricAndComesBackWithTheStoredOne() {
        let cache = AppAttestKeyCache(capacity: 2)
        cache.put(record("a"), riskMetric: 7)
        cache.put(record("b"), riskMetric: nil)
        cache.put(record("c"), riskMetric: nil)
        #expect(cache.count == 2)
        // One of a/b was evicted whole; a reload (what the request path does on a miss) brings key and metric back.
        if cache.get("a") == nil {
            cache.put(record("a"), riskMetric: 7)
        }
        #expect(cache.get("a")?.riskMetric == 7)
    }

    @Test func aRefreshedMetricReachesACachedKeyAndNothingElse() {
        let cache = AppAttestKeyCache(capacity: 8)
        cache.put(record("a"), riskMetric: 1)
        cache.setRiskMetric("a", 55)
        cache.setRiskMetric("not-cached", 99)   // picked up from the store when the key is loaded
        #expect(cache.get("a")?.riskMetric == 55)
        #expect(cache.get("not-cached") == nil)
    }

    @Test func anInvalidPublicKeyIsNotCached() {
        let cache = AppAttestKeyCache(capacity: 8)
        let bad = AttestedKeyRecord(keyID: "bad", appID: "T.app", publicKey: [4, 1, 2], counter: 0, environment: "production", createdAt: 0)
        #expect(cache.put(bad, riskMetric: 3) == nil)
        #expect(cache.get("bad") == nil)
    }
}
