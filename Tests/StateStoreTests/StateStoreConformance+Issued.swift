import StateStore
import Testing

/// Conformance checks for issued one-time values (App Attest challenges): `issue` and `redeem`.
extension StateStoreConformance {
    static func issueThenRedeemOnce(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("challenge"), t = run.now
        #expect(try store.issue(namespace: ns, key: "c1", expiresAt: t + 60, now: t))
        #expect(try store.redeem(namespace: ns, key: "c1", now: t + 1))
        #expect(try !store.redeem(namespace: ns, key: "c1", now: t + 1), "redeemed once only")
        #expect(try !store.redeem(namespace: ns, key: "c1", now: t + 2))
        #expect(try !store.redeem(namespace: ns, key: "never-issued", now: t))
        #expect(try store.issue(namespace: ns, key: "", expiresAt: t + 60, now: t))
        #expect(try store.redeem(namespace: ns, key: "", now: t))
        #expect(try !store.redeem(namespace: ns, key: "", now: t))
        #expect(try store.issue(namespace: ns, key: "c1", expiresAt: t + 60, now: t + 3),
                "a redeemed value is no longer issued")
        #expect(try store.redeem(namespace: ns, key: "c1", now: t + 3))
    }

    static func isIssuedReadsWithoutRedeeming(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("challenge"), t = run.now
        #expect(try !store.isIssued(namespace: ns, key: "c", now: t))
        #expect(try store.issue(namespace: ns, key: "c", expiresAt: t + 10, now: t))
        #expect(try store.isIssued(namespace: ns, key: "c", now: t + 9))
        #expect(try store.isIssued(namespace: ns, key: "c", now: t + 9), "reading twice changes nothing")
        #expect(try !store.isIssued(namespace: ns, key: "c", now: t + 10), "expired at expiry")
        #expect(try !store.isIssued(namespace: run.name("other"), key: "c", now: t))
        #expect(try store.redeem(namespace: ns, key: "c", now: t + 1), "still redeemable after the reads")
        #expect(try !store.isIssued(namespace: ns, key: "c", now: t + 1), "a redeemed value is no longer issued")
        #expect(try store.consumeOnce(namespace: ns, key: "k", expiresAt: t + 60, now: t))
        #expect(try !store.isIssued(namespace: ns, key: "k", now: t), "consuming does not issue")
    }

    static func redeemHonoursExpiry(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("challenge"), t = run.now
        #expect(try store.issue(namespace: ns, key: "live", expiresAt: t + 10, now: t))
        #expect(try store.redeem(namespace: ns, key: "live", now: t + 9), "live until expiry")
        #expect(try store.issue(namespace: ns, key: "at-expiry", expiresAt: t + 10, now: t))
        #expect(try !store.redeem(namespace: ns, key: "at-expiry", now: t + 10), "expired at expiry")
        #expect(try !store.redeem(namespace: ns, key: "at-expiry", now: t + 11))
        #expect(try store.issue(namespace: ns, key: "late", expiresAt: t + 10, now: t))
        #expect(try !store.redeem(namespace: ns, key: "late", now: t + 500))
        #expect(try store.issue(namespace: ns, key: "past", expiresAt: t - 1, now: t), "issuing is not refused")
        #expect(try !store.redeem(namespace: ns, key: "past", now: t), "but it was never redeemable")
    }

    static func issueRefusesLiveDuplicate(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("challenge"), t = run.now
        try recordingHonoursExpiry(from: t) { try store.issue(namespace: ns, key: "c", expiresAt: $0, now: $1) }
        #expect(try !store.redeem(namespace: ns, key: "c", now: t + 40), "the refused issue did not extend it")
        #expect(try store.issue(namespace: ns, key: "d", expiresAt: t + 10, now: t))
        #expect(try !store.issue(namespace: ns, key: "d", expiresAt: t + 10, now: t))
        #expect(try store.redeem(namespace: ns, key: "d", now: t + 1))
    }

    /// The same namespace and key as a consumed value and as an issued value are two different values.
    static func issuedAndConsumedAreSeparate(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("shared"), t = run.now
        #expect(try store.consumeOnce(namespace: ns, key: "consumed-first", expiresAt: t + 60, now: t))
        #expect(try !store.redeem(namespace: ns, key: "consumed-first", now: t), "consuming does not issue")
        #expect(try store.issue(namespace: ns, key: "consumed-first", expiresAt: t + 60, now: t))
        #expect(try store.redeem(namespace: ns, key: "consumed-first", now: t))
        #expect(try !store.consumeOnce(namespace: ns, key: "consumed-first", expiresAt: t + 60, now: t),
                "redeeming does not undo consuming")

        #expect(try store.issue(namespace: ns, key: "issued-first", expiresAt: t + 60, now: t))
        #expect(try store.consumeOnce(namespace: ns, key: "issued-first", expiresAt: t + 60, now: t),
                "issuing does not consume")
        #expect(try store.redeem(namespace: ns, key: "issued-first", now: t), "consuming does not redeem")
        #expect(try !store.consumeOnce(namespace: ns, key: "issued-first", expiresAt: t + 60, now: t))
    }

    static func issuedNamespacesAreIndependent(_ store: any AttestationStateStore, _ run: Run) throws {
        let a = run.name("app-a"), b = run.name("app-b"), t = run.now
        #expect(try store.issue(namespace: a, key: "c", expiresAt: t + 60, now: t))
        #expect(try !store.redeem(namespace: b, key: "c", now: t))
        #expect(try store.issue(namespace: b, key: "c", expiresAt: t + 60, now: t))
        #expect(try store.redeem(namespace: a, key: "c", now: t))
        #expect(try store.redeem(namespace: b, key: "c", now: t))
        // Namespace "…a:b" with key "c" and namespace "…a" with key "b:c" are different values.
        #expect(try store.issue(namespace: run.name("a:b"), key: "c", expiresAt: t + 60, now: t))
        #expect(try !store.redeem(namespace: run.name("a"), key: "b:c", now: t))
        #expect(try store.issue(namespace: run.name("a"), key: "b:c", expiresAt: t + 60, now: t))
        #expect(try store.redeem(namespace: run.name("a:b"), key: "c", now: t))
        #expect(try store.redeem(namespace: run.name("a"), key: "b:c", now: t))
    }

    /// 16 threads race to redeem each of 50 issued values, one per barrier-synchronised round: one winner each.
    static func concurrentRedeemHasOneWinner(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("challenge"), now = run.now, keys = 50
        for key in 0..<keys {
            #expect(try store.issue(namespace: ns, key: "race-\(key)", expiresAt: now + 60, now: now))
        }
        let wins = try ThreadRace.run(threads: threads, rounds: keys) { _, key in
            try store.redeem(namespace: ns, key: "race-\(key)", now: now)
        }
        let winnersPerKey = (0..<keys).map { key in wins.filter { $0[key] }.count }
        #expect(winnersPerKey.allSatisfy { $0 == 1 }, "winners per key: \(winnersPerKey)")
    }

    /// `counted`: the backend's sweep deletes and counts (SQLite, memory); otherwise it returns 0 (Redis).
    static func sweepRemovesExpiredIssuedValues(_ store: any AttestationStateStore, _ run: Run, counted: Bool) throws {
        let ns = run.name("challenge"), t = run.now
        #expect(try store.issue(namespace: ns, key: "short-1", expiresAt: t + 5, now: t))
        #expect(try store.issue(namespace: ns, key: "short-2", expiresAt: t + 10, now: t))
        #expect(try store.issue(namespace: ns, key: "long", expiresAt: t + 100, now: t))
        #expect(try store.consumeOnce(namespace: ns, key: "short-1", expiresAt: t + 5, now: t))
        #expect(try store.sweepExpired(now: t + 10) == (counted ? 3 : 0), "consumed and issued values both count")
        #expect(try store.sweepExpired(now: t + 10) == 0, "nothing left to sweep")
        #expect(try !store.redeem(namespace: ns, key: "short-1", now: t + 10))
        #expect(try store.redeem(namespace: ns, key: "long", now: t + 10), "still live")
        #expect(try store.issue(namespace: ns, key: "short-2", expiresAt: t + 100, now: t + 10))
        #expect(try store.redeem(namespace: ns, key: "short-2", now: t + 10))
    }
}
