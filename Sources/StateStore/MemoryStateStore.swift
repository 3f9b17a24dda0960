import Synchronization

/// The in-process backend: dictionaries behind one `Mutex`. Exactly-once holds within this process only, and
/// everything is lost on exit — fit for tests and for a single replica that accepts losing replay protection on
/// restart. Consumed values stay until `sweepExpired` removes them (run a `StateStoreSweeper`).
public final class MemoryStateStore: AttestationStateStore {
    private struct ConsumedKey: Hashable {
        let namespace: String
        let key: String
    }

    private struct State {
        /// Consumed value → its expiry (unix seconds).
        var consumed: [ConsumedKey: Int64] = [:]
        var keys: [String: AttestedKeyRecord] = [:]
        /// App id → key ids in registration order.
        var keyIDsByApp: [String: [String]] = [:]
        var receipts: [String: ReceiptRecord] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        let consumedKey = ConsumedKey(namespace: namespace, key: key)
        return state.withLock { state in
            // Same rule as the SQL backends: a value whose expiry is at or before `now` is gone.
            if let existing = state.consumed[consumedKey], existing > now { return false }
            state.consumed[consumedKey] = expiresAt
            return true
        }
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
            let before = state.consumed.count
            state.consumed = state.consumed.filter { $0.value > now }
            return before - state.consumed.count
        }
    }

    public func ping() throws(StateStoreError) {}
}
