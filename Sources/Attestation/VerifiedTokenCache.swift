import GatewayCrypto

/// SHA-256 of a token, the cache key (the token itself is never stored).
public struct TokenDigest: Hashable, Sendable {
    let a: UInt64, b: UInt64, c: UInt64, d: UInt64
}

/// What a cached pass remembers: enough to re-run the time and key checks without the RSA work.
public struct CachedVerification: Sendable {
    public let token: VerifiedAppCheckToken
    public let keyID: String
    public let expiresAt: Int64
    public let issuedAt: Int64
    public let notBefore: Int64?
}

/// A bounded LRU of tokens that verified, so a token presented again skips the signature check. One per event
/// loop (loop-confined: no locks on the request path). Entries die at the token's `exp`; the cache never turns a
/// failure into a pass: the verifier re-checks time and key presence on every hit.
public final class VerifiedTokenCache {
    private struct Entry {
        var key: TokenDigest
        var value: CachedVerification
        var prev: Int
        var next: Int
    }

    public let capacity: Int
    private var index: [TokenDigest: Int] = [:]
    private var entries: [Entry] = []
    private var head = -1   // most recently used
    private var tail = -1   // least recently used
    private let hasher = SHA256Hasher()

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
        index.reserveCapacity(min(self.capacity, 1 << 16))
    }

    public var count: Int { index.count }

    public func digest(of token: UnsafeRawBufferPointer) -> TokenDigest {
        hasher.update(token)
        let d = hasher.finish()
        return d.withUnsafeBytes { p in
            TokenDigest(a: p.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                        b: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                        c: p.loadUnaligned(fromByteOffset: 16, as: UInt64.self),
                        d: p.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        }
    }

    public func lookup(_ key: TokenDigest) -> CachedVerification? {
        guard let i = index[key] else { return nil }
        moveToFront(i)
        return entries[i].value
    }

    /// Adds a pass; evicts the least recently used entry when full.
    public func insert(_ key: TokenDigest, _ value: CachedVerification, now: Int64) {
        if let i = index[key] {
            entries[i].value = value
            moveToFront(i)
            return
        }
        let slot: Int
        if entries.count < capacity {
            entries.append(Entry(key: key, value: value, prev: -1, next: -1))
            slot = entries.count - 1
        } else {
            slot = tail
            unlink(slot)
            index.removeValue(forKey: entries[slot].key)
            entries[slot] = Entry(key: key, value: value, prev: -1, next: -1)
        }
        index[key] = slot
        linkFront(slot)
    }

    public func remove(_ key: TokenDigest) {
        guard let i = index[key] else { return }
        // Keep the slot but make it the first to be reused.
        unlink(i)
        index.removeValue(forKey: key)
        entries[i].value = CachedVerification(token: entries[i].value.token, keyID: "", expiresAt: 0, issuedAt: 0, notBefore: nil)
        linkBack(i)
        entries[i].key = TokenDigest(a: 0, b: 0, c: 0, d: UInt64(i) &+ 0x8000_0000_0000_0000)
    }

    public func removeAll() {
        index.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        head = -1
        tail = -1
    }

    private func unlink(_ i: Int) {
        let p = entries[i].prev, n = entries[i].next
        if p >= 0 { entries[p].next = n } else { head = n }
        if n >= 0 { entries[n].prev = p } else { tail = p }
        entries[i].prev = -1
        entries[i].next = -1
    }

    private func linkFront(_ i: Int) {
        entries[i].next = head
        entries[i].prev = -1
        if head >= 0 { entries[head].prev = i }
        head = i
        if tail < 0 { tail = i }
    }

    private func linkBack(_ i: Int) {
        entries[i].prev = tail
        entries[i].next = -1
        if tail >= 0 { entries[tail].next = i }
        tail = i
        if head < 0 { head = i }
    }

    private func moveToFront(_ i: Int) {
        guard head != i else { return }
        unlink(i)
        linkFront(i)
    }
}
