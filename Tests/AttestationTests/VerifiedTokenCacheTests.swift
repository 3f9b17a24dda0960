import Testing
import Attestation
import JOSE
import KeySetCache

@Suite struct VerifiedTokenCacheTests {
    @Test func aRepeatedTokenIsServedFromTheCacheButStillExpires() {
        let f = AppCheckFixture()
        let cache = VerifiedTokenCache(capacity: 4)
        let t = f.token()
        #expect(f.verify(t, cache: cache) == f.verify(t))
        #expect(cache.count == 1)
        if case .verified = f.verify(t, cache: cache) {} else { Issue.record("cached token not verified") }
        // An hour and more later the cached pass is re-checked and expires like any token.
        #expect(f.verify(t, at: f.now + 3600 + 61, cache: cache) == .rejected(.expired))
    }

    @Test func failuresAreNeverCached() {
        let f = AppCheckFixture()
        let cache = VerifiedTokenCache(capacity: 4)
        _ = f.verify(f.token(key: AppCheckFixture.otherKey), cache: cache)
        #expect(cache.count == 0)
    }

    @Test func aKeyRemovedFromTheSetRevokesCachedPasses() {
        final class Doc: @unchecked Sendable { var text = "" }
        let doc = Doc()
        let f = AppCheckFixture(jwks: { doc.text })
        doc.text = "{\"keys\":[" + f.key.jwk(kid: f.kid) + "]}"
        f.keys.refreshIfDue(force: true)
        let cache = VerifiedTokenCache(capacity: 4)
        let t = f.token()
        if case .verified = f.verify(t, cache: cache) {} else { Issue.record("not verified") }
        doc.text = "{\"keys\":[" + AppCheckFixture.otherKey.jwk(kid: "k2") + "]}"
        f.keys.refreshIfDue(force: true)
        #expect(f.verify(t, cache: cache) == .rejected(.unknownKey))
    }

    @Test func leastRecentlyUsedEntriesAreEvicted() {
        let f = AppCheckFixture()
        let cache = VerifiedTokenCache(capacity: 2)
        let tokens = (0..<3).map { i in f.token(claims: f.claims(["jti": .string("t\(i)")])) }
        for t in tokens { _ = f.verify(t, cache: cache) }
        #expect(cache.count == 2)
        let first = Array(tokens[0].utf8).withUnsafeBytes { cache.digest(of: $0) }
        #expect(cache.lookup(first) == nil)
        let last = Array(tokens[2].utf8).withUnsafeBytes { cache.digest(of: $0) }
        #expect(cache.lookup(last) != nil)
    }
}
