public import StateStore
/// Issued one-time values (App Attest challenges): `<prefix>issued:<namespace>:<key>`.
extension RedisStateStore {
    public func issue(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool {
        try recordOnce(keys.issuedValue(namespace: namespace, key: key), expiresAt: expiresAt, now: now,
                       what: "issue")
    }

    /// GET: the stored expiry against the caller's `now`, as `redeem` compares it.
    public func isIssued(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try checkLayout()
        return try Self.isLive(try client.run(RedisCommand("GET", keys.issuedValue(namespace: namespace, key: key))), now: now, what: "isIssued")
    }

    /// GETDEL (Redis ≥ 6.2) takes the value and deletes it in one command, so of several redeemers (threads,
    /// replicas) exactly one gets it back. The stored `expiresAt` is then compared with the caller's `now`, as in
    /// `consumeOnce`: a value Redis has not evicted yet can still be expired. An expired one is deleted all the
    /// same; SQLite keeps it until the sweep, which differs only when replicas' clocks disagree (there a replica
    /// whose clock is behind could still redeem it once; here none can).
    public func redeem(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool {
        try checkLayout()
        return try Self.isLive(try client.run(RedisCommand("GETDEL", keys.issuedValue(namespace: namespace, key: key)), write: true), now: now,
                        what: "redeem")
    }

    /// An issued value's stored expiry, read from `reply`, against `now`.
    private static func isLive(_ reply: RedisReply, now: Int64, what: String) throws(StateStoreError) -> Bool {
        switch reply {
        case .null:
            return false
        case .string(let bytes):
            // A value that is not a number was not written by `issue`: it is not redeemable (fail closed, rather
            // than `.unavailable`, which `state.on_unavailable` may turn into letting the request through).
            guard let expiresAt = Int64(String(decoding: bytes, as: UTF8.self)) else { return false }
            return expiresAt > now
        default:
            throw reply.unexpected(what)
        }
    }
}
