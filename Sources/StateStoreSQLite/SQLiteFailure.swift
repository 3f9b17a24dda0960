internal import CSQLite
import StateStore

/// Maps SQLite result codes onto `StateStoreError` kinds, in one place.
enum SQLiteFailure {
    /// BUSY/LOCKED reach us only after the busy timeout (the configured state timeout) ran out: `.timeout`.
    /// Everything else — I/O errors, a corrupt or foreign file, a full disk, a read-only file — means the backend
    /// cannot answer: `.unavailable`.
    static func error(_ code: Int32, database: OpaquePointer?, _ context: String) -> StateStoreError {
        let message: String
        if let database, let text = sqlite3_errmsg(database) {
            message = String(cString: text)
        } else if let text = sqlite3_errstr(code) {
            message = String(cString: text)
        } else {
            message = "unknown error"
        }
        let description = "sqlite \(context): \(message) (code \(code))"
        switch code & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: return StateStoreError(.timeout, description)
        default: return StateStoreError(.unavailable, description)
        }
    }
}
