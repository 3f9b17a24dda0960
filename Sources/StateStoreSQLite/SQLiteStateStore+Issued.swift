public import StateStore
/// Issued one-time values (App Attest challenges): the `issued` table (schema migration 2).
extension SQLiteStateStore {
    public func issue(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in
            try Self.recordOnce(Self.issueSQL, connection, namespace: namespace, key: key, expiresAt: expiresAt,
                                now: now)
        }
    }

    public func isIssued(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try isLive("SELECT 1 FROM issued WHERE namespace = ?1 AND key = ?2 AND expires_at > ?3", namespace: namespace, key: key, now: now)
    }

    public func redeem(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try withConnection { connection throws(StateStoreError) in
            // One statement, so SQLite's write lock makes "live, then gone" atomic: of several redeemers (threads,
            // store instances, processes) only the one whose DELETE removed the row sees a change. An expired row
            // is left for the sweep; it can only be issued anew.
            try connection.withStatement("DELETE FROM issued WHERE namespace = ?1 AND key = ?2 AND expires_at > ?3") {
                statement throws(StateStoreError) in
                try statement.bind(1, namespace)
                try statement.bind(2, key)
                try statement.bind(3, now)
                _ = try statement.step()
                return connection.changes == 1
            }
        }
    }
}
