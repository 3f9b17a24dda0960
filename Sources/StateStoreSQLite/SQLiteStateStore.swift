import GatewayCore
public import StateStore
/// The embedded default backend: one SQLite file in WAL mode.
///
/// Exactly-once holds across threads, store instances and processes sharing the file, because each decision is
/// one SQL statement whose effect (`changes() == 1`) SQLite's write lock makes atomic: `consumeOnce` and `issue`
/// are UPSERTs that only overwrite an expired row, `redeem` a DELETE guarded by `expires_at > now`,
/// `advanceCounter` an UPDATE guarded by `counter < new`.
///
/// One connection behind an `AnnotatedMutex`, with cached prepared statements. Every operation may block up to the busy
/// timeout on another writer, then fails with `.timeout`; I/O or corruption fails with `.unavailable`.
public final class SQLiteStateStore: AttestationStateStore {
    /// The schema version this build writes; a file with a newer one is refused.
    public static var supportedSchemaVersion: Int { Int(SQLiteSchema.latestVersion) }

    /// Rows deleted per statement by `sweepExpired`; the lock is released between batches so requests interleave.
    static let sweepBatchSize = 1000

    /// The database file.
    public let path: String
    private let connection: AnnotatedMutex<SQLiteConnection>

    /// Opens `path`, creating missing folders and the file, and migrates the schema.
    /// - Parameter timeoutMillis: the state timeout; bounds waits for another writer's lock.
    public init(path: String, timeoutMillis: Int) throws(StateStoreError) {
        guard !path.isEmpty else { throw StateStoreError(.invalid, "sqlite: empty path") }
        guard timeoutMillis >= 0 else { throw StateStoreError(.invalid, "sqlite: negative timeout") }
        try Directories.createParents(of: path)
        let opened = try SQLiteConnection(path: path)
        try opened.configure(busyTimeoutMillis: timeoutMillis)
        try SQLiteSchema.migrate(opened)
        self.path = path
        connection = AnnotatedMutex(opened)
    }

    /// Runs `body` holding the connection's lock.
    func withConnection<R: Sendable>(
        _ body: (SQLiteConnection) throws(StateStoreError) -> R
    ) throws(StateStoreError) -> R {
        try connection.withLock { (connection: inout sending SQLiteConnection) throws(StateStoreError) -> R in
            try body(connection)
        }
    }

    public func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in
            try Self.recordOnce(Self.consumeSQL, connection, namespace: namespace, key: key, expiresAt: expiresAt,
                                now: now)
        }
    }

    public func isConsumed(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try isLive("SELECT 1 FROM consumed WHERE namespace = ?1 AND key = ?2 AND expires_at > ?3", namespace: namespace, key: key, now: now)
    }

    /// Whether `sql` (a `SELECT 1` over namespace ?1, key ?2 and now ?3) finds a row: a read, nothing recorded.
    func isLive(_ sql: String, namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in
            try connection.withStatement(sql) { statement throws(StateStoreError) in
                try statement.bind(1, namespace)
                try statement.bind(2, key)
                try statement.bind(3, now)
                return try statement.step()
            }
        }
    }

    /// The whole batch in one transaction, so one commit serves every request waiting for it. If the
    /// transaction fails, every request in it fails (nothing was consumed): no result is reported before the commit.
    public func consumeOnce(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>] {
        inOneTransaction(batch) { connection, r throws(StateStoreError) in
            try Self.recordOnce(Self.consumeSQL, connection, namespace: r.namespace, key: r.key, expiresAt: r.expiresAt, now: now)
        }
    }

    /// `each` for every element on the locked connection, in one IMMEDIATE transaction (a single element: on its
    /// own, which is one statement's transaction anyway). No result is reported before the commit. A failure
    /// anywhere rolls the whole batch back: each element that would have stored fails, and each that had answered
    /// false (a value already consumed, a counter not raised: it changed nothing) stays false — a refusal is true
    /// without the commit, and failing it would let `on_unavailable: allow` pass a replay.
    func inOneTransaction<Element>(_ batch: [Element], _ each: (SQLiteConnection, Element) throws(StateStoreError) -> Bool)
        -> [Result<Bool, StateStoreError>] {
        var done: [Bool] = []
        done.reserveCapacity(batch.count)
        do throws(StateStoreError) {
            try withConnection { connection throws(StateStoreError) in
                if batch.count == 1 { return done.append(try each(connection, batch[0])) }
                try connection.execute("BEGIN IMMEDIATE")
                do throws(StateStoreError) {
                    for element in batch { done.append(try each(connection, element)) }
                    try connection.execute("COMMIT")
                } catch {
                    try? connection.execute("ROLLBACK")
                    throw error
                }
            }
            return done.map { .success($0) }
        } catch {
            return batch.indices.map { i in i < done.count && !done[i] ? .success(false) : .failure(error) }
        }
    }

    /// Inserts a new row into a one-time value table (`consumed`, `issued`: the same columns), or takes over an
    /// expired one; a live row is left alone and nothing changes. Binds ?1 namespace, ?2 key, ?3 expiresAt, ?4 now.
    private static func recordOnceSQL(_ table: String) -> String {
        """
        INSERT INTO \(table)(namespace, key, expires_at) VALUES (?1, ?2, ?3)
        ON CONFLICT(namespace, key) DO UPDATE SET expires_at = excluded.expires_at
        WHERE \(table).expires_at <= ?4
        """
    }

    static let consumeSQL = recordOnceSQL("consumed")
    static let issueSQL = recordOnceSQL("issued")

    /// Runs `sql` (a `recordOnceSQL`) on the caller's locked connection: true when it stored the value.
    static func recordOnce(_ sql: String, _ connection: SQLiteConnection, namespace: String, key: String,
                           expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        try connection.withStatement(sql) { statement throws(StateStoreError) in
            try statement.bind(1, namespace)
            try statement.bind(2, key)
            try statement.bind(3, expiresAt)
            try statement.bind(4, now)
            _ = try statement.step()
            return connection.changes == 1
        }
    }

    /// Sweeps both one-time value tables.
    public func sweepExpired(now: Int64) throws(StateStoreError) -> Int {
        try sweepExpired(table: "consumed", now: now) + sweepExpired(table: "issued", now: now)
    }

    private func sweepExpired(table: String, now: Int64) throws(StateStoreError) -> Int {
        var total = 0
        while true {
            let deleted = try withConnection { connection throws(StateStoreError) in
                try connection.withStatement("""
                    DELETE FROM \(table) WHERE (namespace, key) IN
                    (SELECT namespace, key FROM \(table) WHERE expires_at <= ?1 LIMIT \(Self.sweepBatchSize))
                    """) { statement throws(StateStoreError) in
                    try statement.bind(1, now)
                    _ = try statement.step()
                    return connection.changes
                }
            }
            total += deleted
            if deleted < Self.sweepBatchSize { return total }
        }
    }

    /// Reads the schema table, so the answer proves the file is readable, not just that the handle exists.
    public func ping() throws(StateStoreError) {
        _ = try schemaVersion()
    }

    /// The schema version recorded in the file.
    public func schemaVersion() throws(StateStoreError) -> Int {
        try withConnection { connection throws(StateStoreError) in
            Int(try connection.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version"))
        }
    }

    /// Runs raw SQL on the store's connection: for tests only (e.g. writing a future schema version).
    func executeForTesting(_ sql: String) throws(StateStoreError) {
        try withConnection { connection throws(StateStoreError) in try connection.execute(sql) }
    }
}
