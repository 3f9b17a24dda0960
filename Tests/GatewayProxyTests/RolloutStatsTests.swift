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

/// The admin listener's Host check for the rollout view (DNS rebinding) and the loops' app counters.
@Suite struct RolloutAdminPiecesTests {
    @Test func onlyAddressesAndLocalhostNameTheRolloutView() {
        for ok in [nil, "127.0.0.1", "127.0.0.1:9901", "localhost", "LOCALHOST:80", "localhost.", "[::1]:9901", "[::1]", "10.0.0.7"] {
            #expect(AdminHandler.isLocalHost(ok), "\(ok ?? "nil")")
        }
        for bad in ["evil.example", "evil.example:9901", "127.0.0.1.evil.example", "localhost.evil", "1.2.3", "1.2.3.256",
                    "[::1]x", "[::1]:80x", "127.0.0.1:80:80", "", "[evil]", "localhost:x"] {
            #expect(!AdminHandler.isLocalHost(bad), "\(bad)")
        }
    }

    @Test func largeNameIdsDoNotAlias() {
        let a = VerificationKey.make(route: 0x10001, verifier: 0x10002, outcome: .absent, reason: 3)
        #expect(VerificationKey.split(a).route == 0x10001 && VerificationKey.split(a).verifier == 0x10002)
        #expect(a != VerificationKey.make(route: 1, verifier: 2, outcome: .absent, reason: 3))
    }

    @Test func appCountsAreBoundedBetweenTakesAndStartAfreshAfterOne() {
        let m = LoopMetrics()
        for i in 0..<(LoopMetrics.maxAppKeys + 10) { m.verifiedApp(route: 1, appID: "app\(i)") }
        m.verifiedApp(route: 1, appID: "app0")
        var taken = m.takeAppRequests()
        #expect(taken.count == LoopMetrics.maxAppKeys + 1)
        #expect(taken[AppRequestKey(route: 1, appID: AppRequestKey.otherApps)] == 10)
        #expect(taken[AppRequestKey(route: 1, appID: "app0")] == 2)
        m.verifiedApp(route: 1, appID: "new")   // the slots freed by the take
        taken = m.takeAppRequests()
        #expect(taken == [AppRequestKey(route: 1, appID: "new"): 1])
    }
}
