import StateStore
import Testing

/// The in-memory backend against the shared conformance suite, plus its sweep.
@Suite struct MemoryStateStoreTests {
    @Test(arguments: StateStoreConformance.Check.allCases)
    func conformance(_ check: StateStoreConformance.Check) throws {
        try StateStoreConformance(make: { MemoryStateStore() }).run(check)
    }

    @Test func sweepRemovesOnlyExpiredValues() throws {
        let store = MemoryStateStore()
        for i in 0..<10 {
            #expect(try store.consumeOnce(namespace: "jti", key: "k\(i)", expiresAt: Int64(100 + i), now: 0))
        }
        #expect(try store.sweepExpired(now: 104) == 5)
        #expect(try store.sweepExpired(now: 104) == 0)
        #expect(try !store.consumeOnce(namespace: "jti", key: "k5", expiresAt: 200, now: 104))
    }

    @Test func sweepRemovesExpiredIssuedValues() throws {
        let store = MemoryStateStore()
        for i in 0..<10 {
            #expect(try store.issue(namespace: "challenge", key: "k\(i)", expiresAt: Int64(100 + i), now: 0))
        }
        #expect(try store.redeem(namespace: "challenge", key: "k9", now: 0))
        #expect(try !store.redeem(namespace: "challenge", key: "k0", now: 100), "expired, left for the sweep")
        #expect(try store.sweepExpired(now: 104) == 5)
        #expect(try store.sweepExpired(now: 104) == 0)
        #expect(try !store.issue(namespace: "challenge", key: "k5", expiresAt: 200, now: 104))
        #expect(try store.redeem(namespace: "challenge", key: "k8", now: 104))
    }
}
