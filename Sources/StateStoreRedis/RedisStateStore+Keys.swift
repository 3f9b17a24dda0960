public import StateStore
/// App Attest keys, counters and receipts.
extension RedisStateStore {
    public func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool {
        let keyHash = keys.attestedKey(record.keyID)
        let appList = keys.app(record.appID)
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
        let hash = try RedisHash(client.run(RedisCommand("HGETALL", keys.attestedKey(id))), what: "key")
        return hash.isEmpty ? nil : try AttestedKeyRecord(keyID: id, hash: hash)
    }

    public func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord] {
        let appList = keys.app(appID)
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
        let keyHash = keys.attestedKey(keyID)
        let reply = try client.eval(RedisScript.advanceCounter) { c in
            c.append("1")
            c.append(keyHash)
            c.append(Int64(newValue))
        }
        return try Self.flag(reply, "advanceCounter")
    }

    public func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError) {
        let receiptHash = keys.receipt(keyID)
        let reply = try client.eval(RedisScript.putReceipt) { c in
            c.append("1")
            c.append(receiptHash)
            receipt.appendHashArguments(to: &c)
        }
        _ = try Self.flag(reply, "putReceipt")
    }

    public func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord? {
        let hash = try RedisHash(client.run(RedisCommand("HGETALL", keys.receipt(keyID))), what: "receipt")
        return hash.isEmpty ? nil : try ReceiptRecord(hash: hash)
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
