public import StateStore
/// App Attest keys, counters and receipts.
extension RedisStateStore {
    public func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool {
        try checkLayout()
        let keyHash = keys.attestedKey(record.keyID)
        let appList = keys.app(record.appID)
        if keys.layout == 2 { return try registerKeyInCluster(record, keyHash: keyHash, appList: appList) }
        let reply = try client.eval(RedisScript.registerKey) { c in
            c.append("2")
            c.append(keyHash)
            c.append(appList)
            c.append(record.keyID)
            record.appendHashArguments(to: &c)
        }
        return try Self.flag(reply, "registerKey")
    }

    public func key(id: String) throws(StateStoreError) -> AttestedKeyRecord? {
        try checkLayout()
        let hash = try RedisHash(client.run(RedisCommand("HGETALL", keys.attestedKey(id))), what: "key")
        return hash.isEmpty ? nil : try AttestedKeyRecord(keyID: id, hash: hash)
    }

    public func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord] {
        try checkLayout()
        let appList = keys.app(appID)
        if keys.layout == 2 { return try keysInCluster(appID: appID, appList: appList) }
        let prefix = keys.attestedKeyPrefix
        let reply = try client.eval(RedisScript.keysForApp, write: false) { c in
            c.append("1")
            c.append(appList)
            c.append(prefix)
        }
        guard case .array(let entries) = reply else { throw reply.unexpected("keys") }
        var records: [AttestedKeyRecord] = []
        records.reserveCapacity(entries.count)
        for entry in entries {
            guard case .array(let pair) = entry, pair.count == 2, case .string(let id) = pair[0] else {
                throw reply.unexpected("keys")
            }
            let keyID = String(decoding: id, as: UTF8.self)
            records.append(try AttestedKeyRecord(keyID: keyID, hash: RedisHash(pair[1], what: "key")))
        }
        return records
    }

    public func advanceCounter(keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool {
        try checkLayout()
        let keyHash = keys.attestedKey(keyID)
        let reply = try client.eval(RedisScript.advanceCounter) { c in
            c.append("1")
            c.append(keyHash)
            c.append(Int64(newValue))
        }
        return try Self.flag(reply, "advanceCounter")
    }

    public func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError) {
        try checkLayout()
        let receiptHash = keys.receipt(keyID)
        let reply = try client.eval(RedisScript.putReceipt) { c in
            c.append("1")
            c.append(receiptHash)
            receipt.appendHashArguments(to: &c)
        }
        _ = try Self.flag(reply, "putReceipt")
    }

    public func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord? {
        try checkLayout()
        let hash = try RedisHash(client.run(RedisCommand("HGETALL", keys.receipt(keyID))), what: "receipt")
        return hash.isEmpty ? nil : try ReceiptRecord(hash: hash)
    }

    /// Layout 2 (Cluster): a key's record and its app's list live in different slots, so no one script can write
    /// both. The list comes first (`RedisScript.listKeyID`: appended once, however often a registration is retried),
    /// then the record (`RedisScript.registerKeyRecord`, which alone decides whether the key id is new): a failure
    /// between the two leaves an id in the list with no record, which `keysInCluster` passes over — never a
    /// registered key missing from its app's list.
    private func registerKeyInCluster(_ record: AttestedKeyRecord, keyHash: String, appList: String) throws(StateStoreError) -> Bool {
        let appSet = keys.appSet(record.appID)
        _ = try client.eval(RedisScript.listKeyID) { c in
            c.append("2")
            c.append(appList)
            c.append(appSet)
            c.append(record.keyID)
        }.integer(for: "registerKey list")
        let reply = try client.eval(RedisScript.registerKeyRecord) { c in
            c.append("1")
            c.append(keyHash)
            record.appendHashArguments(to: &c)
        }
        return try Self.flag(reply, "registerKey")
    }

    /// Layout 2: the app's list, then each key's record (one call per key, each on its own slot's master) —
    /// registration order, each id once, only records that exist and name this app.
    private func keysInCluster(appID: String, appList: String) throws(StateStoreError) -> [AttestedKeyRecord] {
        let reply = try client.run(RedisCommand("LRANGE", appList, "0", "-1"))
        guard case .array(let entries) = reply else { throw reply.unexpected("keys") }
        var seen = Set<String>()
        var records: [AttestedKeyRecord] = []
        for case .string(let id) in entries {
            let keyID = String(decoding: id, as: UTF8.self)
            guard seen.insert(keyID).inserted else { continue }
            let hash = try RedisHash(client.run(RedisCommand("HGETALL", keys.attestedKey(keyID))), what: "key")
            guard !hash.isEmpty else { continue }
            let record = try AttestedKeyRecord(keyID: keyID, hash: hash)
            if record.appID == appID { records.append(record) }
        }
        return records
    }

    /// A script's 0/1 answer.
    static func flag(_ reply: RedisReply, _ what: String) throws(StateStoreError) -> Bool {
        switch reply {
        case .integer(1): true
        case .integer(0): false
        default: throw reply.unexpected(what)
        }
    }
}
