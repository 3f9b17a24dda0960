import StateStore

/// A Redis hash as `HGETALL` returns it (field, value, field, value, …), with typed field readers that turn a
/// missing or malformed field into an `.unavailable` error naming the record, never a crash.
struct RedisHash {
    private var fields: [String: [UInt8]] = [:]
    /// What the hash holds, for error messages ("key", "receipt").
    let what: String

    var isEmpty: Bool { fields.isEmpty }

    init(_ reply: RedisReply, what: String) throws(StateStoreError) {
        self.what = what
        guard case .array(let items) = reply, items.count % 2 == 0 else { throw reply.unexpected("HGETALL \(what)") }
        var i = 0
        while i < items.count {
            guard case .string(let name) = items[i], case .string(let value) = items[i + 1] else {
                throw reply.unexpected("HGETALL \(what)")
            }
            fields[String(decoding: name, as: UTF8.self)] = value
            i += 2
        }
    }

    func bytes(_ name: String) throws(StateStoreError) -> [UInt8] {
        guard let value = fields[name] else { throw corrupt(name) }
        return value
    }

    func string(_ name: String) throws(StateStoreError) -> String {
        String(decoding: try bytes(name), as: UTF8.self)
    }

    /// Nil when the field is absent (an empty value is `[]`).
    func optionalBytes(_ name: String) -> [UInt8]? {
        fields[name]
    }

    /// Nil when the field is absent (an empty value is `""`).
    func optionalString(_ name: String) -> String? {
        fields[name].map { String(decoding: $0, as: UTF8.self) }
    }

    func int64(_ name: String) throws(StateStoreError) -> Int64 {
        guard let value = try optionalInt64(name) else { throw corrupt(name) }
        return value
    }

    /// Nil when the field is absent; an error when present but not a decimal integer.
    func optionalInt64(_ name: String) throws(StateStoreError) -> Int64? {
        guard let value = fields[name] else { return nil }
        guard let n = Int64(String(decoding: value, as: UTF8.self)) else { throw corrupt(name) }
        return n
    }

    private func corrupt(_ name: String) -> StateStoreError {
        StateStoreError(.unavailable, "redis: stored \(what) has a missing or malformed \(name) field")
    }
}

extension AttestedKeyRecord {
    /// The `HSET` field/value pairs of a key hash (counter and created_at in decimal, byte fields raw); absent
    /// optionals are left out, so a key without attestation extensions has the same hash as before they existed.
    func appendHashArguments(to c: inout RedisCommand) {
        c.append("app_id"); c.append(appID)
        c.append("public_key"); c.append(publicKey)
        c.append("counter"); c.append(Int64(counter))
        c.append("environment"); c.append(environment)
        c.append("created_at"); c.append(createdAt)
        if let validationCategory { c.append("validation_category"); c.append(validationCategory) }
        if let bundleVersion { c.append("bundle_version"); c.append(bundleVersion) }
        if let keyAccessControl { c.append("key_access_control"); c.append(keyAccessControl) }
    }

    /// Absent optional fields read as nil: hashes written before the fields existed still load.
    init(keyID: String, hash: RedisHash) throws(StateStoreError) {
        let counter = try hash.int64("counter")
        guard let counter32 = UInt32(exactly: counter) else {
            throw StateStoreError(.unavailable, "redis: stored key \(keyID) has an out-of-range counter")
        }
        self.init(keyID: keyID, appID: try hash.string("app_id"), publicKey: try hash.bytes("public_key"),
                  counter: counter32, environment: try hash.string("environment"),
                  createdAt: try hash.int64("created_at"),
                  validationCategory: hash.optionalBytes("validation_category"),
                  bundleVersion: hash.optionalString("bundle_version"),
                  keyAccessControl: hash.optionalBytes("key_access_control"))
    }
}

extension ReceiptRecord {
    /// The `HSET` field/value pairs of a receipt hash; absent optionals are left out.
    func appendHashArguments(to c: inout RedisCommand) {
        c.append("receipt"); c.append(receipt)
        if let riskMetric { c.append("risk_metric"); c.append(Int64(riskMetric)) }
        c.append("created_at"); c.append(createdAt)
        if let notBefore { c.append("not_before"); c.append(notBefore) }
        c.append("last_used_at"); c.append(lastUsedAt)
    }

    init(hash: RedisHash) throws(StateStoreError) {
        let risk = try hash.optionalInt64("risk_metric")
        self.init(receipt: try hash.bytes("receipt"), riskMetric: risk.flatMap { Int(exactly: $0) },
                  createdAt: try hash.int64("created_at"), notBefore: try hash.optionalInt64("not_before"),
                  lastUsedAt: try hash.int64("last_used_at"))
    }
}
