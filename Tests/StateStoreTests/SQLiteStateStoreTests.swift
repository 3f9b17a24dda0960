import Foundation
import StateStore
@testable import StateStoreSQLite
import Testing

/// The SQLite backend: the shared conformance suite on a fresh file each, then what only a file can show —
/// durability across reopen, exactly-once across store instances, schema versioning, sweeping, folder handling.
@Suite struct SQLiteStateStoreTests {
    @Test(arguments: StateStoreConformance.Check.allCases)
    func conformance(_ check: StateStoreConformance.Check) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try StateStoreConformance(make: {
            try SQLiteStateStore(path: directory.path + "/state.db", timeoutMillis: 5_000)
        }).run(check)
    }

    /// A batch whose transaction fails is rolled back: an element that would have stored fails (nothing of it was
    /// stored), but one that had answered false — a value already consumed, a counter not raised — stays false,
    /// so `on_unavailable: allow` can never pass a replay that shared a batch with a failure.
    @Test func aFailedBatchFailsItsWritesButKeepsItsRefusals() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteStateStore(path: directory.path + "/state.db", timeoutMillis: 1_000)
        #expect(try store.consumeOnce(namespace: "n", key: "old", expiresAt: 2_000, now: 1_000))
        let results = store.inOneTransaction(["fresh", "old", "boom", "later"]) { connection, key throws(StateStoreError) in
            if key == "boom" { throw StateStoreError(.unavailable, "disk I/O error") }
            return try SQLiteStateStore.recordOnce(SQLiteStateStore.consumeSQL, connection, namespace: "n", key: key,
                                                   expiresAt: 2_000, now: 1_000)
        }
        func failed(_ r: Result<Bool, StateStoreError>) -> Bool { if case .failure = r { true } else { false } }
        #expect(failed(results[0]) && (try? results[1].get()) == false && failed(results[2]) && failed(results[3]), "\(results)")
        #expect(try store.consumeOnce(namespace: "n", key: "fresh", expiresAt: 2_000, now: 1_000), "rolled back: not consumed")
    }

    @Test func dataSurvivesReopening() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        let key = AttestedKeyRecord(keyID: "k1", appID: "TEAM.app", publicKey: [4, 1, 2], counter: 1,
                                    environment: "development", createdAt: 1_700_000_000,
                                    validationCategory: [1, 0, 0, 0], bundleVersion: "7", keyAccessControl: [0x30, 0])
        let receipt = ReceiptRecord(receipt: [1, 2, 3], riskMetric: 2, createdAt: 10, notBefore: 20, lastUsedAt: 30)
        do {
            let store = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
            #expect(try store.consumeOnce(namespace: "jti", key: "t1", expiresAt: 2_000, now: 1_000))
            #expect(try store.registerKey(key))
            #expect(try store.advanceCounter(keyID: "k1", to: 9))
            try store.putReceipt(keyID: "k1", receipt)
        }  // the store is released here: statements finalized, connection closed
        let reopened = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
        #expect(try !reopened.consumeOnce(namespace: "jti", key: "t1", expiresAt: 2_000, now: 1_500))
        var advanced = key
        advanced.counter = 9
        #expect(try reopened.key(id: "k1") == advanced)
        #expect(try reopened.receipt(keyID: "k1") == receipt)
    }

    @Test func twoStoresOnOneFileHaveOneWinner() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        let stores = [try SQLiteStateStore(path: path, timeoutMillis: 5_000),
                      try SQLiteStateStore(path: path, timeoutMillis: 5_000)]
        let keys = 30
        // Threads alternate between the two stores, one barrier-synchronised round per key.
        func winnersPerKey(_ attempt: @escaping @Sendable (SQLiteStateStore, Int) throws -> Bool) throws -> [Int] {
            let wins = try ThreadRace.run(threads: StateStoreConformance.threads, rounds: keys) { thread, key in
                try attempt(stores[thread % 2], key)
            }
            return (0..<keys).map { key in wins.filter { $0[key] }.count }
        }
        let consumers = try winnersPerKey { store, key in
            try store.consumeOnce(namespace: "jti", key: "race-\(key)", expiresAt: 2_000, now: 1_000)
        }
        #expect(consumers.allSatisfy { $0 == 1 }, "consumers per key: \(consumers)")
        for key in 0..<keys {
            #expect(try stores[key % 2].issue(namespace: "challenge", key: "race-\(key)", expiresAt: 2_000, now: 1_000))
        }
        let redeemers = try winnersPerKey { store, key in
            try store.redeem(namespace: "challenge", key: "race-\(key)", now: 1_000)
        }
        #expect(redeemers.allSatisfy { $0 == 1 }, "redeemers per key: \(redeemers)")
        #expect(try stores[0].registerKey(AttestedKeyRecord(keyID: "k", appID: "a", publicKey: [4], counter: 0,
                                                             environment: "production", createdAt: 0)))
        let advanced = try ThreadRace.run(threads: StateStoreConformance.threads) { thread in
            try stores[thread % 2].advanceCounter(keyID: "k", to: 5)
        }
        #expect(advanced.filter { $0 }.count == 1, "one of many equal advances wins")
    }

    @Test func schemaVersionIsRecordedAndFutureVersionsAreRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        do {
            let store = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
            #expect(try store.schemaVersion() == SQLiteStateStore.supportedSchemaVersion)
            #expect(SQLiteStateStore.supportedSchemaVersion == 3)
        }
        #expect(try SQLiteStateStore(path: path, timeoutMillis: 1_000).schemaVersion() == 3, "reopen keeps it")
        do {
            let store = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
            try store.executeForTesting("INSERT INTO schema_version(version) VALUES (99)")
        }
        let error = #expect(throws: StateStoreError.self) {
            try SQLiteStateStore(path: path, timeoutMillis: 1_000)
        }
        #expect(error?.kind == .unavailable)
        #expect(error?.description.contains("99") == true)
    }

    /// A file written by a build that knew only migration 1 gains the `issued` table on open, keeping its data.
    @Test func versionOneFileMigratesToIssuedValues() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        try writeOldFile(path, version: 1) { v1 in
            try v1.execute("INSERT INTO consumed(namespace, key, expires_at) VALUES ('jti', 't1', 2000)")
            #expect(try v1.scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'issued'") == 0)
        }
        let store = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
        #expect(try store.schemaVersion() == 3)
        #expect(try !store.consumeOnce(namespace: "jti", key: "t1", expiresAt: 2_000, now: 1_000), "data kept")
        #expect(try store.issue(namespace: "jti", key: "t1", expiresAt: 2_000, now: 1_000))
        #expect(try store.redeem(namespace: "jti", key: "t1", now: 1_500))
        #expect(try !store.redeem(namespace: "jti", key: "t1", now: 1_500))
        #expect(try SQLiteStateStore(path: path, timeoutMillis: 1_000).schemaVersion() == 3, "migrated once")
    }

    /// A file written by a build that knew migrations 1 and 2 gains the attestation-extension columns on open; its
    /// keys load with nil extensions, keep their counters and order, and new keys store the extensions.
    @Test func versionTwoFileMigratesToKeyAttestationExtensions() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        try writeOldFile(path, version: 2) { v2 in
            // The row exactly as the version-2 build's registerKey wrote it.
            try v2.execute("""
                INSERT INTO keys(key_id, app_id, public_key, counter, environment, created_at, seq)
                VALUES ('old', 'TEAM.app', X'040102', 5, 'production', 1700000000,
                        (SELECT COALESCE(MAX(rowid), 0) + 1 FROM keys))
                """)
            #expect(try v2.scalar("SELECT COUNT(*) FROM pragma_table_info('keys') WHERE name = 'bundle_version'") == 0)
        }
        let store = try SQLiteStateStore(path: path, timeoutMillis: 1_000)
        #expect(try store.schemaVersion() == 3)
        let old = AttestedKeyRecord(keyID: "old", appID: "TEAM.app", publicKey: [4, 1, 2], counter: 5,
                                    environment: "production", createdAt: 1_700_000_000)
        let loaded = try #require(try store.key(id: "old"))
        #expect(loaded == old)
        #expect(loaded.validationCategory == nil && loaded.bundleVersion == nil && loaded.keyAccessControl == nil)
        #expect(try store.advanceCounter(keyID: "old", to: 6))
        let new = AttestedKeyRecord(keyID: "new", appID: "TEAM.app", publicKey: [4, 3], counter: 0,
                                    environment: "production", createdAt: 1_700_000_100,
                                    validationCategory: [1, 0, 0, 0], bundleVersion: "42", keyAccessControl: [0x30, 0])
        #expect(try store.registerKey(new))
        var advanced = old
        advanced.counter = 6
        #expect(try store.keys(appID: "TEAM.app") == [advanced, new])
        #expect(try SQLiteStateStore(path: path, timeoutMillis: 1_000).schemaVersion() == 3, "migrated once")
    }

    /// Writes `path` as a build that knew only the first `version` migrations left it (each migration's SQL run by
    /// hand, as that build's `migrate` did), then lets `body` add rows the old way; the connection closes on return.
    private func writeOldFile(_ path: String, version: Int, _ body: (SQLiteConnection) throws -> Void) throws {
        let connection = try SQLiteConnection(path: path)
        try connection.execute("CREATE TABLE schema_version(version INTEGER PRIMARY KEY NOT NULL)")
        for applied in 1...version {
            try connection.execute(SQLiteSchema.migrations[applied - 1])
            try connection.execute("INSERT INTO schema_version(version) VALUES (\(applied))")
        }
        try body(connection)
    }

    @Test func sweepRemovesExpiredIssuedRowsInBatches() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteStateStore(path: directory.path + "/state.db", timeoutMillis: 1_000)
        let expired = SQLiteStateStore.sweepBatchSize + 3
        try store.executeForTesting("BEGIN")
        for i in 0..<expired {
            #expect(try store.issue(namespace: "challenge", key: "old-\(i)", expiresAt: 100 + Int64(i % 50), now: 0))
        }
        try store.executeForTesting("COMMIT")
        #expect(try store.issue(namespace: "challenge", key: "live", expiresAt: 1_000, now: 0))
        #expect(try store.consumeOnce(namespace: "jti", key: "old", expiresAt: 100, now: 0))
        #expect(try !store.redeem(namespace: "challenge", key: "old-0", now: 149), "expired, left for the sweep")
        #expect(try store.sweepExpired(now: 149) == expired + 1)
        #expect(try store.sweepExpired(now: 149) == 0)
        let rows = try store.withConnection { connection throws(StateStoreError) in
            try connection.scalar("SELECT COUNT(*) FROM issued")
        }
        #expect(rows == 1)
        #expect(try store.redeem(namespace: "challenge", key: "live", now: 149))
    }

    @Test func sweepRemovesOnlyExpiredRowsInBatches() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteStateStore(path: directory.path + "/state.db", timeoutMillis: 1_000)
        let expired = SQLiteStateStore.sweepBatchSize * 2 + 17
        try store.executeForTesting("BEGIN")
        for i in 0..<expired {
            #expect(try store.consumeOnce(namespace: "jti", key: "old-\(i)", expiresAt: 100 + Int64(i % 50), now: 0))
        }
        try store.executeForTesting("COMMIT")
        for i in 0..<5 {
            #expect(try store.consumeOnce(namespace: "jti", key: "live-\(i)", expiresAt: 1_000, now: 0))
        }
        #expect(try store.sweepExpired(now: 149) == expired)
        #expect(try store.sweepExpired(now: 149) == 0)
        for i in 0..<5 {
            #expect(try !store.consumeOnce(namespace: "jti", key: "live-\(i)", expiresAt: 1_000, now: 149))
        }
    }

    @Test func missingFoldersAreCreated() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try SQLiteStateStore(path: directory.path + "/a/b/c/state.db", timeoutMillis: 1_000)
        try store.ping()
        #expect(directory.contains("a/b/c", isDirectory: true))
        #expect(directory.contains("a/b/c/state.db", isDirectory: false))
    }

    @Test(arguments: ["file-as-folder/state.db", "file-as-folder/deeper/state.db"])
    func unwritablePathIsUnavailable(_ relative: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // A regular file where a folder should be: fails even for root, unlike permission bits.
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory.path + "/file-as-folder"))
        let error = #expect(throws: StateStoreError.self) {
            try SQLiteStateStore(path: directory.path + "/" + relative, timeoutMillis: 1_000)
        }
        #expect(error?.kind == .unavailable)
    }

    @Test func aFileThatIsNotADatabaseIsUnavailable() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/state.db"
        try Data(repeating: 0x5A, count: 8_192).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: StateStoreError.self) {
            try SQLiteStateStore(path: path, timeoutMillis: 1_000)
        }
        #expect(error?.kind == .unavailable)
    }

    @Test func invalidArgumentsAreRejected() {
        #expect(throws: StateStoreError(.invalid, "sqlite: empty path")) {
            try SQLiteStateStore(path: "", timeoutMillis: 1_000)
        }
    }
}
