/// The Lua scripts that make multi-step operations atomic on the Redis server (a script runs without any other
/// command interleaving, which is what gives `consumeOnce` and `advanceCounter` their cross-replica guarantees).
///
/// Scripts are sent as `EVALSHA`; the SHA-1 is learnt once per process with `SCRIPT LOAD`, and a `NOSCRIPT` reply
/// (a restarted or failed-over server, `SCRIPT FLUSH`) falls back to `EVAL`, which also caches the script again.
struct RedisScript: Sendable {
    /// Index into the client's SHA cache.
    let id: Int
    let name: String
    let source: String

    static let all: [RedisScript] = [consume, registerKey, advanceCounter, keysForApp, putReceipt, takeToken, registerKeyRecord, listKeyID,
                                     consumeMany, advanceCounterMany]

    /// Records a one-time value (`consumeOnce` and `issue`; they differ only in the key's kind).
    /// KEYS[1] = the one-time value's key; ARGV = expiresAt, now (caller's unix seconds), lifetime in ms (≥ 1).
    /// The stored value is `expiresAt`, compared with the caller's `now`, so "expired" means the same thing here as
    /// in the other backends even when Redis has not evicted the key yet; the PX lifetime only bounds memory.
    static let consume = RedisScript(id: 0, name: "consumeOnce", source: """
        local v = redis.call('GET', KEYS[1])
        if v and tonumber(v) and tonumber(v) > tonumber(ARGV[2]) then return 0 end
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
        return 1
        """)

    /// `consume` for several one-time values in one call (a drain's consumes: one round trip, one `WAIT`, and one
    /// command for the server to parse instead of one per request). KEYS = the values' keys; ARGV[1] = now, then per
    /// key i ARGV[2i] = its expiresAt and ARGV[2i+1] its lifetime in ms. Returns 1 or 0 per key, in order; a key
    /// given twice is consumed by its first occurrence (the second sees the first's SET), as one at a time would.
    /// Layout 1 only: on a Cluster the keys are in different slots.
    static let consumeMany = RedisScript(id: 8, name: "consumeMany", source: """
        local now = tonumber(ARGV[1])
        local out = {}
        for i = 1, #KEYS do
          local v = redis.call('GET', KEYS[i])
          if v and tonumber(v) and tonumber(v) > now then
            out[i] = 0
          else
            redis.call('SET', KEYS[i], ARGV[2 * i], 'PX', ARGV[2 * i + 1])
            out[i] = 1
          end
        end
        return out
        """)

    /// KEYS[1] = key hash, KEYS[2] = the app's key list; ARGV[1] = key id, then the hash's field, value, … (absent
    /// optional fields left out). Creates the hash and appends to the list only if the key id is new.
    static let registerKey = RedisScript(id: 1, name: "registerKey", source: """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        redis.call('HSET', KEYS[1], unpack(ARGV, 2))
        redis.call('RPUSH', KEYS[2], ARGV[1])
        return 1
        """)

    /// Layout 2 (Cluster): the record alone. KEYS[1] = key hash; ARGV = field, value, … Creates it only if the key id
    /// is new (1), else 0.
    static let registerKeyRecord = RedisScript(id: 6, name: "registerKeyRecord", source: """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        redis.call('HSET', KEYS[1], unpack(ARGV))
        return 1
        """)

    /// Layout 2 (Cluster): KEYS[1] = the app's key list, KEYS[2] = the same ids as a set (one hash tag: one slot);
    /// ARGV[1] = the key id. Appends it to the list only the first time (1), else 0.
    static let listKeyID = RedisScript(id: 7, name: "listKeyID", source: """
        if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
        redis.call('RPUSH', KEYS[1], ARGV[1])
        return 1
        """)

    /// KEYS[1] = key hash; ARGV[1] = the new counter. Compare-and-set: 1 when stored < new (and stored), else 0.
    static let advanceCounter = RedisScript(id: 2, name: "advanceCounter", source: """
        local c = tonumber(redis.call('HGET', KEYS[1], 'counter'))
        if c == nil then return 0 end
        if c < tonumber(ARGV[1]) then
          redis.call('HSET', KEYS[1], 'counter', ARGV[1])
          return 1
        end
        return 0
        """)

    /// `advanceCounter` for several keys in one call (a drain's App Attest assertions). KEYS = the key hashes;
    /// ARGV[i] = key i's new counter. Returns 1 or 0 per key, in order; a key given twice compares its second
    /// counter with what the first stored, as one at a time would. Layout 1 only (on a Cluster the keys are in
    /// different slots).
    static let advanceCounterMany = RedisScript(id: 9, name: "advanceCounterMany", source: """
        local out = {}
        for i = 1, #KEYS do
          local c = tonumber(redis.call('HGET', KEYS[i], 'counter'))
          if c ~= nil and c < tonumber(ARGV[i]) then
            redis.call('HSET', KEYS[i], 'counter', ARGV[i])
            out[i] = 1
          else
            out[i] = 0
          end
        end
        return out
        """)

    /// KEYS[1] = the app's key list; ARGV[1] = the key-hash prefix. Returns {{id, {field, value, …}}, …} in
    /// registration order, in one consistent snapshot. (Reads keys it is not given: fine on one Redis, not Cluster.)
    static let keysForApp = RedisScript(id: 3, name: "keys", source: """
        local out = {}
        for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
          local h = redis.call('HGETALL', ARGV[1] .. id)
          if #h > 0 then out[#out + 1] = {id, h} end
        end
        return out
        """)

    /// KEYS[1] = receipt hash; ARGV = field, value, … Replaces the whole hash, so absent optional fields vanish.
    static let putReceipt = RedisScript(id: 4, name: "putReceipt", source: """
        redis.call('DEL', KEYS[1])
        redis.call('HSET', KEYS[1], unpack(ARGV))
        return 1
        """)

    /// A shared rate limit as GCRA (the generic cell rate algorithm: a token bucket kept as one number, the
    /// theoretical arrival time of the next request, as Envoy's ratelimit and redis-cell do). KEYS[1] = the limit's
    /// key; ARGV[1] = the emission interval (µs per token, ≥ 1), ARGV[2] = the burst window (burst × interval, µs).
    /// Time is Redis' own (`TIME`; fine before a write, scripts replicate their effects), so replicas' clocks do
    /// not matter. Returns 0 when a token was taken (the stored time advanced by one interval, the key expiring when
    /// the bucket would be full again), else the µs until one is back. A stored time further ahead than the window
    /// allows (a reload lowered the burst or raised the rate) is stored back as an empty bucket under the new settings.
    static let takeToken = RedisScript(id: 5, name: "takeToken", source: """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local interval = tonumber(ARGV[1])
        local window = tonumber(ARGV[2])
        local v = redis.call('GET', KEYS[1])
        local tat = v and tonumber(v)
        if not tat or tat < now then tat = now end
        if tat > now + window then
          tat = now + window
          redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.max(1, math.ceil(window / 1000)))
        end
        local next = tat + interval
        local wait = next - window - now
        if wait > 0 then return wait end
        redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.max(1, math.ceil((next - now) / 1000)))
        return 0
        """)
}
