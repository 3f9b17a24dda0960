import GatewayCore

/// The in-process backend: dictionaries behind one `AnnotatedMutex`. Exactly-once holds within this process only, and
/// everything is lost on exit — fit for tests and for a single replica that accepts losing replay protection on
/// restart. Consumed and issued values stay until `sweepExpired` removes them (run a `StateStoreSweeper`).
public final class MemoryStateStore: AttestationStateStore {
    private struct OneTimeKey: Hashable {
        let namespace: String
        let key: String
    }

    private struct State {
        /// Consumed value → its expiry (unix seconds).
        var consumed: [OneTimeKey: Int64] = [:]
        /// Issued value → its expiry (unix seconds); removed when redeemed.
        var issued: [OneTimeKey: Int64] = [:]
        var keys: [String: AttestedKeyRecord] = [:]
        /// App id → key ids in registration order.
        var keyIDsByApp: [String: [String]] = [:]
        var receipts: [String: ReceiptRecord] = [:]
    }

    private let state = AnnotatedMutex(State())

    public init() {}

    public func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        let consumedKey = OneTimeKey(namespace: namespace, key: key)
        return state.withLock { Self.record(consumedKey, expiresAt: expiresAt, now: now, in: &$0.consumed) }
    }

    public func isConsumed(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        let consumedKey = OneTimeKey(namespace: namespace, key: key)
        return state.withLock { ($0.consumed[consumedKey] ?? Int64.min) > now }
    }

    public func issue(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        let issuedKey = OneTimeKey(namespace: namespace, key: key)
        return state.withLock { Self.record(issuedKey, expiresAt: expiresAt, now: now, in: &$0.issued) }
    }

    public func isIssued(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        let issuedKey = OneTimeKey(namespace: namespace, key: key)
        return state.withLock { ($0.issued[issuedKey] ?? Int64.min) > now }
    }

    public func redeem(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        let issuedKey = OneTimeKey(namespace: namespace, key: key)
        return state.withLock { state in
            // An expired value is left for the sweep, as in SQLite; it can only be issued anew.
            guard let expiresAt = state.issued[issuedKey], expiresAt > now else { return false }
            state.issued[issuedKey] = nil
            return true
        }
    }

    /// Stores `key` until `expiresAt` unless a live entry holds it (false). Same rule as the SQL backend: a value
    /// whose expiry is at or before `now` is gone.
    private static func record(_ key: OneTimeKey, expiresAt: Int64, now: Int64,
                               in values: inout [OneTimeKey: Int64]) -> Bool {
        if let existing = values[key], existing > now { return false }
        values[key] = expiresAt
        return true
    }

    public func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool {
        state.withLock { state in
            guard state.keys[record.keyID] == nil else { return false }
            state.keys[record.keyID] = record
            state.keyIDsByApp[record.appID, default: []].append(record.keyID)
            return true
        }
    }

    public func key(id: String) throws(StateStoreError) -> AttestedKeyRecord? {
        state.withLock { $0.keys[id] }
    }

    public func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord] {
        state.withLock { state in
            (state.keyIDsByApp[appID] ?? []).compactMap { state.keys[$0] }
        }
    }

    public func advanceCounter(keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool {
        state.withLock { state in
            guard let stored = state.keys[keyID]?.counter, stored < newValue else { return false }
            state.keys[keyID]?.counter = newValue
            return true
        }
    }

    public func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError) {
        state.withLock { $0.receipts[keyID] = receipt }
    }

    public func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord? {
        state.withLock { $0.receipts[keyID] }
    }

    public func sweepExpired(now: Int64) throws(StateStoreError) -> Int {
        state.withLock { state in
            let before = state.consumed.count + state.issued.count
            state.consumed = state.consumed.filter { $0.value > now }
            state.issued = state.issued.filter { $0.value > now }
            return before - state.consumed.count - state.issued.count
        }
    }

    public func ping() throws(StateStoreError) {}
}
