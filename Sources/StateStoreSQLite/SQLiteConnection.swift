internal import CSQLite
import StateStore

/// One SQLite connection with its prepared-statement cache. Not thread-safe by itself: `SQLiteStateStore` keeps
/// it inside an `AnnotatedMutex` (the connection is opened `NOMUTEX`, so SQLite adds no second lock). The handle and
/// every cached statement are freed in `deinit`, and only there.
final class SQLiteConnection {
    private let database: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]

    /// Opens (creating if missing) the file. Configuration and migration follow in separate steps, so a failure
    /// there still closes the handle through `deinit`.
    init(path: String) throws(StateStoreError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let error = SQLiteFailure.error(rc, database: handle, "open \(path)")
            // The one place a handle is closed outside `deinit`: this object never came to own it.
            sqlite3_close_v2(handle)
            throw error
        }
        database = handle
    }

    deinit {
        statements.removeAll()  // finalizes each statement before the connection closes
        sqlite3_close_v2(database)
    }

    /// Lock waits (another process or store instance writing) are bounded by `busyTimeoutMillis`, after which an
    /// operation fails with `.timeout`.
    ///
    /// WAL with `synchronous=NORMAL`: a commit is in the WAL file before the call returns, so a committed consume
    /// survives a crash of the process (even `kill -9`); only an OS crash or power loss may drop the last commits
    /// before a checkpoint. `FULL` would fsync every commit to cover that too, at several times the cost.
    func configure(busyTimeoutMillis: Int) throws(StateStoreError) {
        sqlite3_extended_result_codes(database, 1)
        try check(sqlite3_busy_timeout(database, Int32(clamping: busyTimeoutMillis)), "busy_timeout")
        let mode = try withStatement("PRAGMA journal_mode=WAL") { statement throws(StateStoreError) in
            try statement.step() ? statement.text(0) : ""
        }
        guard mode.lowercased() == "wal" else {
            throw StateStoreError(.unavailable, "sqlite: journal_mode is \(mode), WAL required")
        }
        try execute("PRAGMA synchronous=NORMAL")
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE on this connection.
    var changes: Int {
        Int(sqlite3_changes(database))
    }

    /// Runs one or more statements that return no rows (schema changes, transactions, pragmas).
    func execute(_ sql: String) throws(StateStoreError) {
        var errorText: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(database, sql, nil, nil, &errorText)
        sqlite3_free(errorText)
        try check(rc, "exec")
    }

    /// Runs `body` with the cached prepared statement for `sql`, reset afterwards whatever happens.
    func withStatement<R>(
        _ sql: String, _ body: (SQLiteStatement) throws(StateStoreError) -> R
    ) throws(StateStoreError) -> R {
        let statement = try prepared(sql)
        defer { statement.reset() }
        return try body(statement)
    }

    /// The first column of the first row as an integer (0 when there is no row).
    func scalar(_ sql: String) throws(StateStoreError) -> Int64 {
        try withStatement(sql) { statement throws(StateStoreError) in
            try statement.step() ? statement.int64(0) : 0
        }
    }

    private func prepared(_ sql: String) throws(StateStoreError) -> SQLiteStatement {
        if let cached = statements[sql] { return cached }
        var handle: OpaquePointer?
        let rc = sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &handle, nil)
        guard rc == SQLITE_OK, let handle else {
            sqlite3_finalize(handle)
            throw SQLiteFailure.error(rc, database: database, "prepare")
        }
        let statement = SQLiteStatement(handle: handle)
        statements[sql] = statement
        return statement
    }

    private func check(_ rc: Int32, _ context: String) throws(StateStoreError) {
        guard rc == SQLITE_OK else { throw SQLiteFailure.error(rc, database: database, context) }
    }
}
