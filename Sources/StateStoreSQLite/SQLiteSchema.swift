import StateStore

/// The schema as ordered migrations: migration `n` (1-based) takes the file from version `n-1` to `n`. Applied
/// versions are rows of `schema_version`. Never edit a shipped migration; append a new one.
enum SQLiteSchema {
    static let migrations: [String] = [
        // 1: consumed one-time values, App Attest keys with counters, receipts.
        """
        CREATE TABLE consumed(
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            PRIMARY KEY(namespace, key)
        ) WITHOUT ROWID;
        CREATE INDEX consumed_expires_at ON consumed(expires_at);
        CREATE TABLE keys(
            key_id TEXT PRIMARY KEY NOT NULL,
            app_id TEXT NOT NULL,
            public_key BLOB NOT NULL,
            counter INTEGER NOT NULL,
            environment TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            seq INTEGER NOT NULL
        );
        CREATE INDEX keys_app_id ON keys(app_id, seq);
        CREATE TABLE receipts(
            key_id TEXT PRIMARY KEY NOT NULL,
            receipt BLOB NOT NULL,
            risk_metric INTEGER,
            created_at INTEGER NOT NULL,
            not_before INTEGER,
            last_used_at INTEGER NOT NULL
        );
        """,
        // 2: issued one-time values (App Attest challenges), a space apart from consumed ones.
        """
        CREATE TABLE issued(
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            expires_at INTEGER NOT NULL,
            PRIMARY KEY(namespace, key)
        ) WITHOUT ROWID;
        CREATE INDEX issued_expires_at ON issued(expires_at);
        """,
        // 3: the attestation's extensions on each key (iOS/macOS 27), nullable: keys registered before stay NULL.
        """
        ALTER TABLE keys ADD COLUMN validation_category BLOB;
        ALTER TABLE keys ADD COLUMN bundle_version TEXT;
        ALTER TABLE keys ADD COLUMN key_access_control BLOB;
        """,
    ]

    /// The newest version this build knows.
    static var latestVersion: Int64 { Int64(migrations.count) }

    /// Brings the file up to `latestVersion` in one IMMEDIATE transaction, so several processes opening a new file
    /// at once migrate it exactly once (the others wait on the lock, then see the new version). A file written by
    /// a newer build is refused rather than misread.
    static func migrate(_ connection: SQLiteConnection) throws(StateStoreError) {
        try connection.execute("BEGIN IMMEDIATE")
        do throws(StateStoreError) {
            try connection.execute("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER PRIMARY KEY NOT NULL)")
            let current = try connection.scalar("SELECT COALESCE(MAX(version), 0) FROM schema_version")
            guard current <= latestVersion else {
                throw StateStoreError(.unavailable,
                    "sqlite: schema version \(current) is newer than this build supports (\(latestVersion))")
            }
            var version = current
            while version < latestVersion {
                version += 1
                try connection.execute(migrations[Int(version) - 1])
                try connection.execute("INSERT INTO schema_version(version) VALUES (\(version))")
            }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }
}
