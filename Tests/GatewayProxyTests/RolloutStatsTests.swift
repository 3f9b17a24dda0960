import Testing
import Attestation
import Observability
@testable import GatewayProxy

/// The rollout view's categories (Firebase's where they map) and the metric key that carries the route.
@Suite struct RolloutStatsTests {
    @Test func verificationKeysRoundTripWithTheRoute() {
        let key = VerificationKey.make(route: 513, verifier: 7, outcome: .failed, reason: VerificationStatus.expired.metricIndex)
        let (route, verifier, outcome, reason) = VerificationKey.split(key)
        #expect(route == 513 && verifier == 7 && outcome == .failed && reason == VerificationStatus.expired.metricIndex)
        #expect(VerificationKey.split(VerificationKey.make(route: 0, verifier: 0, outcome: .verified, reason: 0xFF)).outcome == .verified)
    }

    @Test func eachOutcomeLandsInItsCategory() {
        var w = RolloutStats.Window()
        w.add(outcome: .verified, reason: nil, 5)
        w.add(outcome: .absent, reason: .missingToken, 4)
        w.add(outcome: .failed, reason: .clientAttestationFailed, 3)
        w.add(outcome: .failed, reason: .tokenReplayed, 1)
        w.add(outcome: .failed, reason: .counterNotIncreasing, 1)
        w.add(outcome: .failed, reason: .challengeUnknown, 1)
        w.add(outcome: .failed, reason: .jwksUnavailable, 2)
        w.add(outcome: .failed, reason: .playIntegrityUnavailable, 1)
        w.add(outcome: .failed, reason: .expired, 6)
        w.add(outcome: .failed, reason: .badSignature, 1)
        #expect(w.verified == 5 && w.missing == 4 && w.clientAttestationFailed == 3 && w.replayed == 3 && w.unavailable == 3)
        #expect(w.invalid == ["expired": 6, "bad_signature": 1])
        #expect(w.rejected == 4 + 3 + 3 + 3 + 7)
        #expect(w.json() == #"{"verified":5,"missing":4,"client_attestation_failed":3,"invalid":{"bad_signature":1,"expired":6},"replayed":3,"unavailable":3}"#)
    }

    @Test func topListsAreBoundedAndOrdered() {
        var counts: [String: UInt64] = [:]
        for i in 0..<30 { counts["r\(i)"] = UInt64(i % 7) }
        let top = RolloutStats.top(counts)
        #expect(top.count == RolloutStats.topCount)
        #expect(top.first?.1 == 6 && top.map(\.1) == top.map(\.1).sorted(by: >))
        #expect(top.prefix(2).map(\.0) == ["r13", "r20"])   // ties by name
    }
}
