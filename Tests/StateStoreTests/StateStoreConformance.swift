import Foundation
import StateStore
import Testing

/// The behaviour every `AttestationStateStore` backend must show, written once and run against each backend.
///
/// A backend's test file calls it with its own factory, one Swift Testing case per check:
///
///     @Test(arguments: StateStoreConformance.Check.allCases)
///     func conformance(_ check: StateStoreConformance.Check) throws {
///         try StateStoreConformance(make: { MemoryStateStore() }).run(check)
///     }
///
/// or everything at once with `try StateStoreConformance(make: …).runAll()`. Each check asks `make` for a fresh
/// store, and uses namespaces, key ids and app ids unique to the run, so a shared backend (one Redis) needs no
/// cleanup between runs. Times are near the real clock (a backend may turn `expiresAt - now` into a TTL), but
/// expiry is decided by the `now` argument alone.
struct StateStoreConformance {
    /// One behaviour; a backend may skip a case it documents as unsupported.
    enum Check: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case consumeOnce
        case consumeOnceHonoursExpiry
        case concurrentConsumeHasOneWinner
        case batchConsume
        case concurrentBatchesHaveOneWinner
        case isConsumedReadsWithoutRecording
        case keyRegistration
        case duplicateRegistrationKeepsOriginal
        case keyAttestationExtensionsRoundTrip
        case counterCompareAndSet
        case concurrentCounterAdvance
        case batchCounterAdvance
        case concurrentCounterBatches
        case receipts
        case sweepKeepsLiveValues
        case issueThenRedeemOnce
        case isIssuedReadsWithoutRedeeming
        case redeemHonoursExpiry
        case issueRefusesLiveDuplicate
        case issuedAndConsumedAreSeparate
        case issuedNamespacesAreIndependent
        case concurrentRedeemHasOneWinner
        case sweepRemovesExpiredIssuedValues
        case ping

        var testDescription: String { rawValue }
    }

    /// Threads racing in the concurrency checks.
    static let threads = 16

    /// Builds a fresh store (for a file backend, on a fresh file).
    let make: () throws -> any AttestationStateStore
    /// Whether `sweepExpired` deletes and counts expired values; false for a backend that expires them itself
    /// (Redis), whose sweep returns 0.
    var sweepCountsExpiredValues = true

    func runAll() throws {
        for check in Check.allCases {
            try run(check)
        }
    }

    func run(_ check: Check) throws {
        let store = try make()
        let run = Run()
        switch check {
        case .consumeOnce: try Self.consumeOnce(store, run)
        case .consumeOnceHonoursExpiry: try Self.consumeOnceHonoursExpiry(store, run)
        case .concurrentConsumeHasOneWinner: try Self.concurrentConsumeHasOneWinner(store, run)
        case .batchConsume: try Self.batchConsume(store, run)
        case .concurrentBatchesHaveOneWinner: try Self.concurrentBatchesHaveOneWinner(store, run)
        case .isConsumedReadsWithoutRecording: try Self.isConsumedReadsWithoutRecording(store, run)
        case .keyRegistration: try Self.keyRegistration(store, run)
        case .duplicateRegistrationKeepsOriginal: try Self.duplicateRegistrationKeepsOriginal(store, run)
        case .keyAttestationExtensionsRoundTrip: try Self.keyAttestationExtensionsRoundTrip(store, run)
        case .counterCompareAndSet: try Self.counterCompareAndSet(store, run)
        case .concurrentCounterAdvance: try Self.concurrentCounterAdvance(store, run)
        case .batchCounterAdvance: try Self.batchCounterAdvance(store, run)
        case .concurrentCounterBatches: try Self.concurrentCounterBatches(store, run)
        case .receipts: try Self.receipts(store, run)
        case .sweepKeepsLiveValues: try Self.sweepKeepsLiveValues(store, run)
        case .issueThenRedeemOnce: try Self.issueThenRedeemOnce(store, run)
        case .isIssuedReadsWithoutRedeeming: try Self.isIssuedReadsWithoutRedeeming(store, run)
        case .redeemHonoursExpiry: try Self.redeemHonoursExpiry(store, run)
        case .issueRefusesLiveDuplicate: try Self.issueRefusesLiveDuplicate(store, run)
        case .issuedAndConsumedAreSeparate: try Self.issuedAndConsumedAreSeparate(store, run)
        case .issuedNamespacesAreIndependent: try Self.issuedNamespacesAreIndependent(store, run)
        case .concurrentRedeemHasOneWinner: try Self.concurrentRedeemHasOneWinner(store, run)
        case .sweepRemovesExpiredIssuedValues:
            try Self.sweepRemovesExpiredIssuedValues(store, run, counted: sweepCountsExpiredValues)
        case .ping: try store.ping()
        }
    }

    /// Names unique to one check run, and the base time.
    struct Run {
        let id = "c\(UInt64.random(in: 0...UInt64.max))"
        let now = Int64(Date().timeIntervalSince1970)

        func name(_ suffix: String) -> String { "\(id).\(suffix)" }

        func key(_ suffix: String, app: String, counter: UInt32 = 0) -> AttestedKeyRecord {
            AttestedKeyRecord(
                keyID: name(suffix), appID: name(app), publicKey: [0x04] + Array(suffix.utf8) + [0, 0xFF],
                counter: counter, environment: "production", createdAt: now)
        }
    }

    // MARK: consumed one-time values

    static func consumeOnce(_ store: any AttestationStateStore, _ run: Run) throws {
        let jti = run.name("jti"), other = run.name("challenge")
        #expect(try store.consumeOnce(namespace: jti, key: "token-1", expiresAt: run.now + 60, now: run.now))
        #expect(try !store.consumeOnce(namespace: jti, key: "token-1", expiresAt: run.now + 60, now: run.now))
        #expect(try !store.consumeOnce(namespace: jti, key: "token-1", expiresAt: run.now + 600, now: run.now + 1))
        #expect(try store.consumeOnce(namespace: other, key: "token-1", expiresAt: run.now + 60, now: run.now),
                "namespaces are independent")
        #expect(try store.consumeOnce(namespace: jti, key: "token-2", expiresAt: run.now + 60, now: run.now))
        #expect(try store.consumeOnce(namespace: jti, key: "", expiresAt: run.now + 60, now: run.now))
        #expect(try !store.consumeOnce(namespace: jti, key: "", expiresAt: run.now + 60, now: run.now))
    }

    static func isConsumedReadsWithoutRecording(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("subject"), t = run.now
        #expect(try !store.isConsumed(namespace: ns, key: "s", now: t))
        #expect(try !store.isConsumed(namespace: ns, key: "s", now: t), "a read records nothing")
        #expect(try store.consumeOnce(namespace: ns, key: "s", expiresAt: t + 60, now: t))
        #expect(try store.isConsumed(namespace: ns, key: "s", now: t))
        #expect(try store.isConsumed(namespace: ns, key: "s", now: t + 59))
        #expect(try !store.isConsumed(namespace: ns, key: "s", now: t + 60), "expired")
        #expect(try !store.isConsumed(namespace: run.name("other"), key: "s", now: t))
        #expect(try store.issue(namespace: ns, key: "i", expiresAt: t + 60, now: t))
        #expect(try !store.isConsumed(namespace: ns, key: "i", now: t), "issued values are not consumed ones")
    }

    static func consumeOnceHonoursExpiry(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("jti"), t = run.now
        try recordingHonoursExpiry(from: t) { try store.consumeOnce(namespace: ns, key: "k", expiresAt: $0, now: $1) }
        #expect(try store.consumeOnce(namespace: ns, key: "k", expiresAt: t + 50, now: t + 40),
                "the refused call did not extend it")
    }

    /// The expiry rule `consumeOnce` and `issue` share, on one value (`record(expiresAt, now)`): refused while
    /// live, taken over at its expiry; a refused call leaves the stored expiry (here t + 40) as it was.
    static func recordingHonoursExpiry(from t: Int64, _ record: (_ expiresAt: Int64, _ now: Int64) throws -> Bool)
        throws {
        #expect(try record(t + 10, t))
        #expect(try !record(t + 10, t + 9), "live until expiry")
        #expect(try record(t + 20, t + 10), "expired at expiry")
        #expect(try !record(t + 30, t + 19), "new expiry kept")
        #expect(try record(t + 40, t + 25))
        #expect(try !record(t + 90, t + 25), "a live duplicate is refused")
    }

    /// 16 threads race for each of 50 keys, one key per barrier-synchronised round: exactly one winner each.
    static func concurrentConsumeHasOneWinner(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("jti"), now = run.now, keys = 50
        let wins = try ThreadRace.run(threads: threads, rounds: keys) { _, key in
            try store.consumeOnce(namespace: ns, key: "race-\(key)", expiresAt: now + 60, now: now)
        }
        let winnersPerKey = (0..<keys).map { key in wins.filter { $0[key] }.count }
        #expect(winnersPerKey.allSatisfy { $0 == 1 }, "winners per key: \(winnersPerKey)")
    }

    /// `consumeOnce(batch:)` through the existential (what the gateway calls): each result means what one
    /// `consumeOnce` would, in order; a value repeated in the batch (also 200 places apart, past any chunk a
    /// backend splits it into) is consumed by its first occurrence; an expired value is taken over.
    static func batchConsume(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("jti"), other = run.name("other"), t = run.now
        #expect(try store.consumeOnce(namespace: ns, key: "old", expiresAt: t + 60, now: t))
        #expect(try store.consumeOnce(namespace: ns, key: "stale", expiresAt: t + 5, now: t))
        let small = [ConsumeRequest(namespace: ns, key: "a", expiresAt: t + 60),
                     ConsumeRequest(namespace: ns, key: "a", expiresAt: t + 60),
                     ConsumeRequest(namespace: ns, key: "old", expiresAt: t + 60),
                     ConsumeRequest(namespace: other, key: "a", expiresAt: t + 60),
                     ConsumeRequest(namespace: ns, key: "stale", expiresAt: t + 60)]
        #expect(store.consumeOnce(batch: small, now: t + 10).map { try? $0.get() } == [true, false, false, true, true])
        #expect(try !store.consumeOnce(namespace: ns, key: "a", expiresAt: t + 60, now: t + 10))
        #expect(try !store.consumeOnce(namespace: ns, key: "stale", expiresAt: t + 60, now: t + 10), "taken over: live")
        var big = (0..<300).map { ConsumeRequest(namespace: ns, key: "b\($0)", expiresAt: t + 60) }
        big[250] = big[50]
        let results = store.consumeOnce(batch: big, now: t).map { try? $0.get() }
        #expect(results.count == 300 && results.allSatisfy { $0 != nil })
        #expect(results.enumerated().filter { $0.element == false }.map(\.offset) == [250])
        #expect(try !store.consumeOnce(namespace: ns, key: "b299", expiresAt: t + 60, now: t))
        #expect(store.consumeOnce(batch: [], now: t).isEmpty)
        #expect(store.consumeOnce(batch: [big[7]], now: t).map { try? $0.get() } == [false])
    }

    /// 8 threads each consume the same 200 values as one batch, each in its own order: each value once in all.
    static func concurrentBatchesHaveOneWinner(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("jti"), now = run.now, keys = 200
        let wins = try ThreadRace.run(threads: 8) { thread -> [Bool] in
            var order = Array(0..<keys)
            order.shuffle()
            let results = store.consumeOnce(batch: order.map { ConsumeRequest(namespace: ns, key: "k\($0)", expiresAt: now + 60) },
                                            now: now)
            var won = [Bool](repeating: false, count: keys)
            for (key, result) in zip(order, results) { won[key] = (try? result.get()) == true }
            return won
        }
        let winnersPerKey = (0..<keys).map { key in wins.filter { $0[key] }.count }
        #expect(winnersPerKey.allSatisfy { $0 == 1 }, "winners per key: \(winnersPerKey)")
    }

    static func sweepKeepsLiveValues(_ store: any AttestationStateStore, _ run: Run) throws {
        let ns = run.name("jti"), t = run.now
        #expect(try store.consumeOnce(namespace: ns, key: "short", expiresAt: t + 5, now: t))
        #expect(try store.consumeOnce(namespace: ns, key: "long", expiresAt: t + 100, now: t))
        let swept = try store.sweepExpired(now: t + 10)
        #expect(swept >= 0)
        #expect(try !store.consumeOnce(namespace: ns, key: "long", expiresAt: t + 100, now: t + 10), "still live")
        #expect(try store.consumeOnce(namespace: ns, key: "short", expiresAt: t + 100, now: t + 10))
        #expect(try store.sweepExpired(now: t + 10) == 0, "nothing left to sweep")
    }
}
