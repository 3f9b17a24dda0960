import Testing
import StateStore
import StateStoreSQLite

/// `consumeOnce(batch:)` (group commit) keeps consumeOnce's meaning, in one transaction on SQLite.
@Suite struct BatchConsumeTests {
    static func stores(_ dir: TemporaryDirectory) throws -> [any AttestationStateStore] {
        [MemoryStateStore(), try SQLiteStateStore(path: dir.path + "/batch.db", timeoutMillis: 1000)]
    }

    @Test func aBatchConsumesEachValueOnceInOrder() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        for store in try Self.stores(dir) {
            _ = try store.consumeOnce(namespace: "p", key: "old", expiresAt: 2_000, now: 1_000)
            let batch = [ConsumeRequest(namespace: "p", key: "a", expiresAt: 2_000),
                         ConsumeRequest(namespace: "p", key: "a", expiresAt: 2_000),   // repeated within the batch
                         ConsumeRequest(namespace: "p", key: "old", expiresAt: 2_000),  // consumed before
                         ConsumeRequest(namespace: "q", key: "a", expiresAt: 2_000)]
            let results = store.consumeOnce(batch: batch, now: 1_000).map { try? $0.get() }
            #expect(results == [true, false, false, true], "\(type(of: store))")
            #expect(try store.consumeOnce(namespace: "p", key: "a", expiresAt: 2_000, now: 1_000) == false)
        }
    }

    @Test func racingBatchesOnOneFileConsumeEachValueOnce() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path + "/race.db"
        let a = try SQLiteStateStore(path: path, timeoutMillis: 5_000)
        let b = try SQLiteStateStore(path: path, timeoutMillis: 5_000)
        let keys = (0..<200).map { "k\($0)" }
        let wins = try ThreadRace.run(threads: 8) { thread -> Int in
            let store: SQLiteStateStore = thread % 2 == 0 ? a : b
            let batch = keys.map { ConsumeRequest(namespace: "n", key: $0, expiresAt: 9_999_999_999) }
            return store.consumeOnce(batch: batch, now: 1).filter { (try? $0.get()) == true }.count
        }
        #expect(wins.reduce(0, +) == keys.count)
    }
}

/// The gateway calls `consumeOnce(batch:)` on `any AttestationStateStore`: a backend's own batch must be what that
/// reaches, not the per-value default of the protocol extension (which an extension-only method would be).
@Suite struct BatchConsumeDispatchTests {
    final class CountingStore: AttestationStateStore, @unchecked Sendable {
        let inner = MemoryStateStore()
        var batches = 0, counterBatches = 0
        func advanceCounters(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>] {
            counterBatches += 1
            return advanceEach(batch: batch)
        }
        func consumeOnce(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>] {
            batches += 1
            return batch.map { r in Result { () throws(StateStoreError) in
                try inner.consumeOnce(namespace: r.namespace, key: r.key, expiresAt: r.expiresAt, now: now) } }
        }
        func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
            try inner.consumeOnce(namespace: namespace, key: key, expiresAt: expiresAt, now: now)
        }
        func issue(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
            try inner.issue(namespace: namespace, key: key, expiresAt: expiresAt, now: now)
        }
        func redeem(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
            try inner.redeem(namespace: namespace, key: key, now: now)
        }
        func isIssued(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
            try inner.isIssued(namespace: namespace, key: key, now: now)
        }
        func isConsumed(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
            try inner.isConsumed(namespace: namespace, key: key, now: now)
        }
        func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool { try inner.registerKey(record) }
        func key(id: String) throws(StateStoreError) -> AttestedKeyRecord? { try inner.key(id: id) }
        func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord] { try inner.keys(appID: appID) }
        func advanceCounter(keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool {
            try inner.advanceCounter(keyID: keyID, to: newValue)
        }
        func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError) { try inner.putReceipt(keyID: keyID, receipt) }
        func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord? { try inner.receipt(keyID: keyID) }
        func sweepExpired(now: Int64) throws(StateStoreError) -> Int { try inner.sweepExpired(now: now) }
        func ping() throws(StateStoreError) { try inner.ping() }
    }

    @Test func theBackendsBatchIsWhatAnExistentialReaches() {
        let counting = CountingStore()
        let store: any AttestationStateStore = counting
        let results = store.consumeOnce(batch: [ConsumeRequest(namespace: "n", key: "a", expiresAt: 10),
                                                ConsumeRequest(namespace: "n", key: "b", expiresAt: 10)], now: 1)
        #expect(results.map { try? $0.get() } == [true, true])
        #expect(counting.batches == 1)
    }

    @Test func theBackendsCounterBatchIsWhatAnExistentialReaches() throws {
        let counting = CountingStore()
        let store: any AttestationStateStore = counting
        #expect(try store.registerKey(AttestedKeyRecord(keyID: "k", appID: "a", publicKey: [4], counter: 0, environment: "production",
                                                        createdAt: 1)))
        let results = store.advanceCounters(batch: [CounterAdvance(keyID: "k", counter: 1), CounterAdvance(keyID: "k", counter: 1)])
        #expect(results.map { try? $0.get() } == [true, false])
        #expect(counting.counterBatches == 1)
    }
}
