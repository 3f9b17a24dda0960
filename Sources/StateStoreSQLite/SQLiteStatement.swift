internal import CSQLite
import StateStore

/// One prepared statement, owned by a `SQLiteConnection`'s cache and used only under that connection's lock.
/// Parameters are 1-based (`?1`, `?2`, …); columns 0-based, as in SQLite.
final class SQLiteStatement {
    private let handle: OpaquePointer

    init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        sqlite3_finalize(handle)
    }

    func bind(_ index: Int32, _ value: Int64) throws(StateStoreError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    func bind(_ index: Int32, _ value: Int64?) throws(StateStoreError) {
        guard let value else { return try check(sqlite3_bind_null(handle, index)) }
        try bind(index, value)
    }

    /// Binds the exact UTF-8 bytes (with length, so an embedded NUL cannot truncate a key).
    func bind(_ index: Int32, _ value: String) throws(StateStoreError) {
        var value = value
        let rc = value.withUTF8 { bytes -> Int32 in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_text(handle, index, "", 0, CSQLite_transient())
            }
            let text = UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self)
            return sqlite3_bind_text(handle, index, text, Int32(bytes.count), CSQLite_transient())
        }
        try check(rc)
    }

    /// Binds a blob; an empty array becomes an empty blob (not NULL).
    func bind(_ index: Int32, _ value: [UInt8]) throws(StateStoreError) {
        let rc = value.withUnsafeBytes { bytes -> Int32 in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(handle, index, 0) }
            return sqlite3_bind_blob(handle, index, base, Int32(bytes.count), CSQLite_transient())
        }
        try check(rc)
    }

    /// Binds text, or NULL for nil (an empty string stays an empty string).
    func bind(_ index: Int32, _ value: String?) throws(StateStoreError) {
        guard let value else { return try check(sqlite3_bind_null(handle, index)) }
        try bind(index, value)
    }

    /// Binds a blob, or NULL for nil (an empty array stays an empty blob).
    func bind(_ index: Int32, _ value: [UInt8]?) throws(StateStoreError) {
        guard let value else { return try check(sqlite3_bind_null(handle, index)) }
        try bind(index, value)
    }

    /// Runs one step: true when a row is ready, false when the statement is done.
    func step() throws(StateStoreError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteFailure.error(rc, database: sqlite3_db_handle(handle), "step")
        }
    }

    /// Makes the statement reusable and drops its bindings; errors were already reported by `step`.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    func optionalInt64(_ column: Int32) -> Int64? {
        isNull(column) ? nil : int64(column)
    }

    func text(_ column: Int32) -> String {
        guard let text = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> [UInt8] {
        guard let bytes = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Nil for NULL; an empty blob is `[]`.
    func optionalBlob(_ column: Int32) -> [UInt8]? {
        isNull(column) ? nil : blob(column)
    }

    /// Nil for NULL; an empty text is `""`.
    func optionalText(_ column: Int32) -> String? {
        isNull(column) ? nil : text(column)
    }

    private func check(_ rc: Int32) throws(StateStoreError) {
        guard rc == SQLITE_OK else { throw SQLiteFailure.error(rc, database: sqlite3_db_handle(handle), "bind") }
    }
}
