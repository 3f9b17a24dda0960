public import StateStore
/// App Attest keys, counters and receipts.
extension SQLiteStateStore {
    public func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in
            // `seq` keeps registration order; MAX(rowid) is a b-tree edge lookup, not a scan. OR IGNORE leaves an
            // existing key (and its counter) exactly as it was.
            try connection.withStatement("""
                INSERT OR IGNORE INTO keys(key_id, app_id, public_key, counter, environment, created_at, seq,
                                           validation_category, bundle_version, key_access_control)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT COALESCE(MAX(rowid), 0) + 1 FROM keys), ?7, ?8, ?9)
                """) { statement throws(StateStoreError) in
                try statement.bind(1, record.keyID)
                try statement.bind(2, record.appID)
                try statement.bind(3, record.publicKey)
                try statement.bind(4, Int64(record.counter))
                try statement.bind(5, record.environment)
                try statement.bind(6, record.createdAt)
                try statement.bind(7, record.validationCategory)
                try statement.bind(8, record.bundleVersion)
                try statement.bind(9, record.keyAccessControl)
                _ = try statement.step()
                return connection.changes == 1
            }
        }
    }

    public func key(id: String) throws(StateStoreError) -> AttestedKeyRecord? {
        try withConnection { connection throws(StateStoreError) in
            try connection.withStatement(Self.keyByIDSQL) { statement throws(StateStoreError) in
                try statement.bind(1, id)
                return try statement.step() ? try Self.keyRecord(statement) : nil
            }
        }
    }

    public func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord] {
        try withConnection { connection throws(StateStoreError) in
            try connection.withStatement(Self.keysByAppSQL) { statement throws(StateStoreError) in
                try statement.bind(1, appID)
                var records: [AttestedKeyRecord] = []
                while try statement.step() {
                    records.append(try Self.keyRecord(statement))
                }
                return records
            }
        }
    }

    public func advanceCounter(keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in try Self.advanceCounter(connection, keyID: keyID, to: newValue) }
    }

    /// A drain's compare-and-sets in one transaction (one commit for all), as `consumeOnce(batch:)`.
    public func advanceCounters(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>] {
        inOneTransaction(batch) { connection, a throws(StateStoreError) in try Self.advanceCounter(connection, keyID: a.keyID, to: a.counter) }
    }

    /// Compare-and-set in one statement on the caller's locked connection: the write lock makes the comparison and
    /// the store atomic.
    private static func advanceCounter(_ connection: SQLiteConnection, keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool {
        try connection.withStatement("UPDATE keys SET counter = ?1 WHERE key_id = ?2 AND counter < ?1") {
            statement throws(StateStoreError) in
            try statement.bind(1, Int64(newValue))
            try statement.bind(2, keyID)
            _ = try statement.step()
            return connection.changes == 1
        }
    }

    public func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError) {
        try withConnection { connection throws(StateStoreError) in
            try connection.withStatement("""
                INSERT INTO receipts(key_id, receipt, risk_metric, created_at, not_before, last_used_at)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                ON CONFLICT(key_id) DO UPDATE SET receipt = excluded.receipt, risk_metric = excluded.risk_metric,
                created_at = excluded.created_at, not_before = excluded.not_before, last_used_at = excluded.last_used_at
                """) { statement throws(StateStoreError) in
                try statement.bind(1, keyID)
                try statement.bind(2, receipt.receipt)
                try statement.bind(3, receipt.riskMetric.map(Int64.init))
                try statement.bind(4, receipt.createdAt)
                try statement.bind(5, receipt.notBefore)
                try statement.bind(6, receipt.lastUsedAt)
                _ = try statement.step()
            }
        }
    }

    public func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord? {
        try withConnection { connection throws(StateStoreError) in
            try connection.withStatement("""
                SELECT receipt, risk_metric, created_at, not_before, last_used_at FROM receipts WHERE key_id = ?1
                """) { statement throws(StateStoreError) -> ReceiptRecord? in
                try statement.bind(1, keyID)
                guard try statement.step() else { return nil }
                return ReceiptRecord(
                    receipt: statement.blob(0),
                    riskMetric: statement.optionalInt64(1).map { Int(truncatingIfNeeded: $0) },
                    createdAt: statement.int64(2),
                    notBefore: statement.optionalInt64(3),
                    lastUsedAt: statement.int64(4))
            }
        }
    }

    /// The columns `keyRecord` reads, in its order.
    private static let keyColumns = """
        key_id, app_id, public_key, counter, environment, created_at, validation_category, bundle_version, \
        key_access_control
        """
    private static let keyByIDSQL = "SELECT \(keyColumns) FROM keys WHERE key_id = ?1"
    private static let keysByAppSQL = "SELECT \(keyColumns) FROM keys WHERE app_id = ?1 ORDER BY seq"

    private static func keyRecord(_ statement: SQLiteStatement) throws(StateStoreError) -> AttestedKeyRecord {
        guard let counter = UInt32(exactly: statement.int64(3)) else {
            throw StateStoreError(.unavailable, "sqlite: stored counter \(statement.int64(3)) is out of range")
        }
        return AttestedKeyRecord(
            keyID: statement.text(0), appID: statement.text(1), publicKey: statement.blob(2), counter: counter,
            environment: statement.text(4), createdAt: statement.int64(5),
            validationCategory: statement.optionalBlob(6), bundleVersion: statement.optionalText(7),
            keyAccessControl: statement.optionalBlob(8))
    }
}
