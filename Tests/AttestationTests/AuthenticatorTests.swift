import Testing
@testable import Attestation
import GatewayCore
import StateStore

/// The Authenticator on its own, with scripted verifiers: the order verifiers run in, suspension and resumption,
/// and what limited use consumes. No HTTP, no sockets, no store.
@Suite struct AuthenticatorTests {
    /// A verifier whose header holds a script: `pass`, `fail`, `store` (suspends; its step passes when run).
    final class Scripted: CredentialVerifier, @unchecked Sendable {
        let name: String
        let header: [UInt8]
        let consumption: Consumption
        /// How often `extract` ran: a verifier that should not run must not even be read.
        var extracted = 0

        let scheme: StaticString

        init(_ name: String, consumption: Consumption = .none, scheme: StaticString = "Scripted") {
            self.name = name
            self.scheme = scheme
            header = Array(("x-" + name).utf8)
            self.consumption = consumption
        }

        var presenceHeader: [UInt8] { header }

        func extract(_ headers: HeaderView) -> Extraction<String> {
            extracted += 1
            switch headers.single(header) {
            case .missing: return .absent
            case .malformed: return .malformed
            case .value(let r): return .presented(headers.string(r))
            }
        }

        func verify(_ script: String, _ request: VerificationRequest, loop: NoLoopState?) -> VerifierStep {
            let passed = PassedCredential(appID: name, consumption: consumption)
            switch script {
            case "pass": return .done(.passed(passed))
            case "store":
                return .store(StoreStep(operation: "test", run: { _ in .done(.passed(passed)) },
                                        failed: { _ in .done(.rejected(.stateUnavailable)) }))
            case "risky": return .done(.refused(.riskTooHigh, fields: [VerdictField("X-Attest-Risk-Metric", "9")]))
            default: return .done(.rejected(.badSignature))
            }
        }
    }

    static var request: VerificationRequest { VerificationRequest(now: 1_800_000_000, signedLine: .original(method: [], target: []), loopState: nil) }

    /// Runs the evaluation to its decision, running each suspended step with `resume` (`steps` counts them).
    func decide(_ auth: Authenticator, _ fields: [(String, String)], progress: inout AuthenticationProgress,
                steps: inout Int) -> VerificationDecision {
        var bytes: [UInt8] = []
        var ranges: [HeaderField] = []
        for (n, v) in fields {
            let name = bytes.count..<(bytes.count + n.utf8.count)
            bytes += Array(n.utf8)
            let value = bytes.count..<(bytes.count + v.utf8.count)
            bytes += Array(v.utf8)
            ranges.append(HeaderField(name: name, value: value))
        }
        return bytes.withUnsafeBytes { raw in
            let headers = HeaderView(bytes: raw, fields: ranges)
            var step = auth.evaluate(headers, progress: &progress) { _ in Self.request }
            while case .suspended(let i, let pending) = step {
                steps += 1
                guard case .store(let work) = pending, let next = try? work.run(MemoryStateStore()) else {
                    Issue.record("unexpected step \(pending)")
                    return .absent
                }
                step = auth.resume(next, verifier: i, headers, progress: &progress) { _ in Self.request }
            }
            guard case .decided(let d) = step else { return .absent }
            return d
        }
    }

    func decide(_ auth: Authenticator, _ fields: [(String, String)]) -> VerificationDecision {
        var progress = AuthenticationProgress()
        var steps = 0
        return decide(auth, fields, progress: &progress, steps: &steps)
    }

    func auth(_ verifiers: [Scripted], requireAll: Bool = false, monitor: Bool = false, limitedUse: Bool = false) -> Authenticator {
        Authenticator(verifiers: verifiers, requireAll: requireAll, monitor: monitor, stripTokenHeaders: true, limitedUse: limitedUse)
    }

    @Test func anyOfStopsAtTheFirstPassAndNeverReadsTheRest() {
        let a = Scripted("a"), b = Scripted("b")
        let d = decide(auth([a, b]), [("X-A", "pass"), ("X-B", "pass")])
        guard case .verified(0, _) = d else { Issue.record("expected a's pass, got \(d)"); return }
        #expect(a.extracted == 1 && b.extracted == 0)
    }

    @Test func anyOfReportsTheFirstFailureWhenNothingPasses() {
        let d = decide(auth([Scripted("a"), Scripted("b")]), [("X-A", "fail"), ("X-B", "")])
        guard case .failed(0, .badSignature) = d else { Issue.record("got \(d)"); return }
    }

    @Test func requireAllStopsAtTheFirstMissingOrFailingCredential() {
        let a = Scripted("a"), b = Scripted("b")
        #expect(decide(auth([a, b], requireAll: true), [("X-B", "pass")]).status == .missingToken)
        #expect(b.extracted == 0)
        guard case .failed(1, .malformedToken) = decide(auth([a, b], requireAll: true), [("X-A", "pass"), ("X-B", "")]) else {
            Issue.record("an empty second credential must fail require_all"); return
        }
    }

    @Test func aSuspendedVerifierResumesWhereItStopped() {
        let a = Scripted("a"), b = Scripted("b")
        var progress = AuthenticationProgress()
        var steps = 0
        let d = decide(auth([a, b], requireAll: true), [("X-A", "store"), ("X-B", "pass")], progress: &progress, steps: &steps)
        guard case .verified(1, _) = d else { Issue.record("got \(d)"); return }
        #expect(steps == 1)
        #expect(a.extracted == 1 && b.extracted == 1)   // resuming did not run `a` again
        #expect(progress.passes.map(\.verifier) == [0, 1])
    }

    @Test func aStoreFailureDecidesThroughTheStepsOwnFailure() {
        let a = Scripted("a")
        let headers: [UInt8] = Array("x-astore".utf8)
        headers.withUnsafeBytes { raw in
            let view = HeaderView(bytes: raw, fields: [HeaderField(name: 0..<3, value: 3..<8)])
            var progress = AuthenticationProgress()
            let authenticator = auth([a])
            guard case .suspended(0, .store(let work)) = authenticator.evaluate(view, progress: &progress, request: { _ in Self.request }) else {
                Issue.record("expected a store step"); return
            }
            let next = work.failed(StateStoreError(.unavailable, "down"))
            guard case .decided(.failed(0, .stateUnavailable)) = authenticator.resume(next, verifier: 0, view, progress: &progress,
                                                                                      request: { _ in Self.request }) else {
                Issue.record("a store that cannot answer must fail closed"); return
            }
        }
    }

    @Test func monitorModeNeverEnforcesButKeepsTheReason() {
        let d = decide(auth([Scripted("a")], monitor: true), [("X-A", "fail")])
        #expect(d.status == .badSignature)
        #expect(auth([Scripted("a")], monitor: true).enforced(d) == nil)
        #expect(auth([Scripted("a")]).enforced(d) == .badSignature)
    }

    @Test func aPolicyRefusalKeepsItsFieldsForTheUpstream() {
        var progress = AuthenticationProgress()
        var steps = 0
        let d = decide(auth([Scripted("a")], monitor: true), [("X-A", "risky")], progress: &progress, steps: &steps)
        #expect(d.status == .riskTooHigh)
        #expect(progress.refusedFields == [VerdictField("X-Attest-Risk-Metric", "9")])
    }

    static let jti = ConsumeRequest(namespace: "p", key: "jti-1", expiresAt: 1)
    static let device = ConsumeRequest(namespace: "d", key: "hash", expiresAt: 1)

    @Test func limitedUseConsumesTheDecidingCredentialWithAnyOf() {
        let authenticator = auth([Scripted("a", consumption: .once(Self.jti)), Scripted("b", consumption: .once(Self.device))], limitedUse: true)
        var progress = AuthenticationProgress()
        var steps = 0
        let d = decide(authenticator, [("X-A", "pass"), ("X-B", "pass")], progress: &progress, steps: &steps)
        guard case .consume(let requests, let owners) = authenticator.consumption(for: d, progress: progress) else {
            Issue.record("expected a consume"); return
        }
        #expect(requests == [Self.jti] && owners == [0])
    }

    @Test func limitedUseConsumesEveryPassedCredentialWithRequireAll() {
        let authenticator = auth([Scripted("a", consumption: .once(Self.jti)), Scripted("b", consumption: .once(Self.device))],
                                 requireAll: true, limitedUse: true)
        var progress = AuthenticationProgress()
        var steps = 0
        let d = decide(authenticator, [("X-A", "pass"), ("X-B", "pass")], progress: &progress, steps: &steps)
        guard case .consume(let requests, let owners) = authenticator.consumption(for: d, progress: progress) else {
            Issue.record("expected a consume"); return
        }
        // A reusable second credential must not carry a spent first one along.
        #expect(requests == [Self.jti, Self.device] && owners == [0, 1])
        let replayed = authenticator.consumed([.success(true), .success(false)], verifiers: owners, decision: d, allowWhenUnavailable: false)
        guard case .failed(1, .tokenReplayed) = replayed else { Issue.record("got \(replayed)"); return }
    }

    /// on_unavailable: allow lets a request through on an unreachable store, never on a layout refusal — also when an
    /// earlier consume of the same request already failed open.
    @Test func aLayoutRefusalAfterAFailOpenFailureFailsClosed() {
        let authenticator = auth([Scripted("a", consumption: .once(Self.jti)), Scripted("b", consumption: .once(Self.device))],
                                 requireAll: true, limitedUse: true)
        var progress = AuthenticationProgress()
        var steps = 0
        let d = decide(authenticator, [("X-A", "pass"), ("X-B", "pass")], progress: &progress, steps: &steps)
        guard case .consume(_, let owners) = authenticator.consumption(for: d, progress: progress) else { Issue.record("consume"); return }
        for results: [Result<Bool, StateStoreError>] in [
            [.failure(StateStoreError(.unavailable, "down")), .failure(StateStoreError(.unavailable, "refused", cause: "layout"))],
            [.failure(StateStoreError(.unavailable, "refused", cause: "layout")), .failure(StateStoreError(.unavailable, "down"))],
        ] {
            let out = authenticator.consumed(results, verifiers: owners, decision: d, allowWhenUnavailable: true)
            guard case .failed(_, .stateUnavailable) = out else { Issue.record("layout refusal let through: \(out)"); return }
        }
        let down: [Result<Bool, StateStoreError>] = [.failure(StateStoreError(.unavailable, "down")), .success(true)]
        guard case .verifiedUnchecked = authenticator.consumed(down, verifiers: owners, decision: d, allowWhenUnavailable: true) else {
            Issue.record("an unreachable store under allow should pass unchecked"); return
        }
    }

    @Test func limitedUseWithoutAnIDFailsAndWithoutAConsumableDoesNothing() {
        let noID = auth([Scripted("a", consumption: .impossible(.missingJTI))], limitedUse: true)
        let d = decide(noID, [("X-A", "pass")])
        guard case .refused(.failed(0, .missingJTI)) = noID.consumption(for: d, progress: AuthenticationProgress()) else {
            Issue.record("a credential that cannot be consumed must fail limited use"); return
        }
        let counterBound = auth([Scripted("a", consumption: .none)], limitedUse: true)
        guard case .nothing = counterBound.consumption(for: decide(counterBound, [("X-A", "pass")]), progress: AuthenticationProgress()) else {
            Issue.record("nothing to consume"); return
        }
        let notLimited = auth([Scripted("a", consumption: .once(Self.jti))])
        guard case .nothing = notLimited.consumption(for: decide(notLimited, [("X-A", "pass")]), progress: AuthenticationProgress()) else {
            Issue.record("a route without limited_use consumes nothing"); return
        }
    }

    @Test func aStoreThatCannotConsumeFailsClosedUnlessAllowed() {
        let authenticator = auth([Scripted("a", consumption: .once(Self.jti))], limitedUse: true)
        let d = decide(authenticator, [("X-A", "pass")])
        let down: [Result<Bool, StateStoreError>] = [.failure(StateStoreError(.unavailable, "down"))]
        guard case .failed(0, .stateUnavailable) = authenticator.consumed(down, verifiers: [0], decision: d, allowWhenUnavailable: false) else {
            Issue.record("must fail closed"); return
        }
        guard case .verifiedUnchecked(0, _, .stateUnavailable) = authenticator.consumed(down, verifiers: [0], decision: d,
                                                                                       allowWhenUnavailable: true) else {
            Issue.record("on_unavailable: allow forwards, marked"); return
        }
    }

    @Test func aMissingCredentialChallengesOnlyForWhatIsMissing() {
        let authenticator = auth([Scripted("a", scheme: "A"), Scripted("b", scheme: "B")], requireAll: true)
        let bytes: [UInt8] = Array("x-apass".utf8)
        let schemes = bytes.withUnsafeBytes { raw in
            authenticator.schemes(for: .absent, headers: HeaderView(bytes: raw, fields: [HeaderField(name: 0..<3, value: 3..<7)]))
        }
        #expect(schemes.map(\.description) == ["B"])
        #expect(authenticator.schemes(for: .failed(verifier: 0, status: .expired), headers: nil).map(\.description) == ["A"])
        #expect(authenticator.schemes(for: .absent, headers: nil).map(\.description) == ["A", "B"])
    }
}
