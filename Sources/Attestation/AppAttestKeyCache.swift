import GatewayCore
public import GatewayCrypto
public import StateStore
/// App Attest keys already loaded from the state store, shared by every loop, with their public keys already
/// built (building one from its bytes costs more than the signature check) and their latest fraud (risk) metric.
/// A key's public key, app id and environment never change after registration, so a cached copy is always right;
/// its counter is not cached (every assertion advances it in the store).
///
/// The metric lives in the store with the key's receipt; the copy here is refreshed by the fraud-metric refresher.
/// Bounded: when full, one entry is evicted (key and metric together), and its next use reads both from the store
/// again — never a reset that would leave keys cached without their metric (`max_risk_metric` would fail open).
public final class AppAttestKeyCache: Sendable {
    /// Immutable (a new metric replaces the entry), and a class so an exchange holding one stays one pointer.
    public final class Entry: Sendable {
        public let record: AttestedKeyRecord
        public let key: ECPublicKey
        /// The latest receipt's risk metric (nil: none known yet).
        public let riskMetric: Int?

        init(record: AttestedKeyRecord, key: ECPublicKey, riskMetric: Int?) {
            self.record = record
            self.key = key
            self.riskMetric = riskMetric
        }
    }

    private let keys = AnnotatedMutex<[String: Entry]>([:])
    public let capacity: Int

    public init(capacity: Int = 100_000) { self.capacity = max(1, capacity) }

    public func get(_ keyID: String) -> Entry? { keys.withLock { $0[keyID] } }

    public var count: Int { keys.withLock { $0.count } }

    /// A new metric for a key (refresher, registration); a key not cached picks it up from the store when loaded.
    public func setRiskMetric(_ keyID: String, _ metric: Int?) {
        keys.withLock { keys in
            if let old = keys[keyID] { keys[keyID] = Entry(record: old.record, key: old.key, riskMetric: metric) }
        }
    }

    /// Caches `record` with its metric and returns its entry; nil when its public key is not a valid P-256 point.
    @discardableResult
    public func put(_ record: AttestedKeyRecord, riskMetric: Int?) -> Entry? {
        guard let key = ECPublicKey(uncompressedP256: record.publicKey) else { return nil }
        let entry = Entry(record: record, key: key, riskMetric: riskMetric)
        keys.withLock { keys in
            if keys[record.keyID] == nil && keys.count >= capacity {
                // Evict one entry (whichever the table yields first): it is reloaded, metric included, on next use.
                keys.remove(at: keys.startIndex)
            }
            keys[record.keyID] = entry
        }
        return entry
    }
}
