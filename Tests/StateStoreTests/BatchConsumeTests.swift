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
