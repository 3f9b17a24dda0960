import Testing
import Attestation
import GatewayCore
import GatewayCrypto
import GatewayTestSupport
import StateStore

/// App Attest's request steps as the proxy runs them, driven by hand: the key from the store (then the cache), the
/// body, the signature, the risk policy, the counter — with a simulated device and an in-memory store.
@Suite struct AppAttestRouteVerifierTests {
    static let ca = try! SimulatedAppAttestCA.generate()
    static let now: Int64 = 1_800_000_000
    static let body = Array("{\"amount\":1}".utf8)

    struct Setup {
        let device: SimulatedAppAttestDevice
        let store = MemoryStateStore()
        let keys = AppAttestKeyCache()
        let verifier: AppAttestVerifier
    }

    func setup() throws -> Setup {
        let device = try SimulatedAppAttestDevice(teamID: "ABCDE12345", bundleID: "com.example.app", environment: .production)
        let verifier = AppAttestVerifier(name: "ios", teamID: "ABCDE12345", bundleIDs: ["com.example.app"], environment: .production,
                                         root: Self.ca.rootCertificate, binding: .request(maxSkewSeconds: 300), challengeTTLSeconds: 300,
                                         registrationPath: "/.attest")
        let s = Setup(device: device, verifier: verifier)
        _ = try s.store.registerKey(AttestedKeyRecord(keyID: device.keyID, appID: device.appID, publicKey: device.publicKey, counter: 0,
                                                      environment: "production", createdAt: 0))
        return s
    }

    /// The headers of one signed request (`POST /pay`, `body` unless `signedBody` says otherwise).
    func headers(_ s: Setup, signedBody: [UInt8] = body, counter: UInt32? = nil) throws -> [(String, String)] {
        let timestamp = Array(String(Self.now).utf8)
        let clientData = AppAttestVerifier.requestClientData(method: Array("POST".utf8), target: Array("/pay".utf8), timestamp: timestamp,
                                                             bodySHA256: SHA256Hasher.hash(signedBody))
        let assertion = try s.device.assert(clientData: clientData, counter: counter)
        return [("x-app-attest-key-id", s.device.keyID), ("x-app-attest-assertion", StandardBase64.encode(assertion)),
                ("x-app-attest-timestamp", String(Self.now))]
    }

    /// Every step run in order (the store steps against `store`, or as failed when `storeDown`); the steps' names.
    /// `downFrom`: the store fails from that step on (a step counted by its place among the store steps).
    func run(_ v: AppAttestRouteVerifier, _ s: Setup, _ fields: [(String, String)], storeDown: Bool = false,
             downFrom: Int? = nil, steps: inout [String]) -> VerifierOutcome? {
        var storeSteps = 0
        var bytes: [UInt8] = []
        var ranges: [HeaderField] = []
        for (n, value) in fields {
            ranges.append(HeaderField(name: bytes.count..<(bytes.count + n.utf8.count), value: (bytes.count + n.utf8.count)..<(bytes.count + n.utf8.count + value.utf8.count)))
            bytes += Array((n + value).utf8)
        }
        let request = VerificationRequest(now: Self.now, signedLine: .original(method: Array("POST".utf8), target: Array("/pay".utf8)),
                                          loopState: nil)
        var step: VerifierStep = bytes.withUnsafeBytes { raw in
            switch v.extract(HeaderView(bytes: raw, fields: ranges)) {
            case .absent: .done(.rejected(.missingToken))
            case .malformed: .done(.rejected(.malformedToken))
            case .presented(let p): v.verify(p, request, loop: nil)
            }
        }
        for _ in 0..<10 {
            switch step {
            case .done(let outcome): return outcome
            case .store(let work):
                steps.append(work.operation)
                storeSteps += 1
                if storeDown || downFrom.map({ storeSteps >= $0 }) == true {
                    step = work.failed(StateStoreError(.unavailable, "down"))
                } else {
                    do { step = try work.run(s.store) } catch { step = work.failed(error) }
                }
            case .body(let continuation):
                steps.append("body")
                step = continuation(SHA256Hasher.hash(Self.body))
            case .blocking:
                steps.append("blocking")
                return nil
            }
        }
        return nil
    }

    func lines(_ fields: [VerdictField]) -> [String] { fields.map { "\($0.name): \($0.value)" } }

    func verifier(_ s: Setup, maxRisk: Int? = nil, allow: Bool = false) -> AppAttestRouteVerifier {
        AppAttestRouteVerifier(s.verifier, keys: s.keys, maxRiskMetric: maxRisk, allowWhenUnavailable: allow)
    }

    @Test func theKeyComesFromTheStoreOnceThenTheCacheAndTheCounterAdvances() throws {
        let s = try setup()
        let v = verifier(s)
        var steps: [String] = []
        guard case .passed(let passed)? = run(v, s, try headers(s), steps: &steps) else { Issue.record("expected a pass"); return }
        #expect(steps == ["appattest_key", "body", "appattest_counter"])
        #expect(passed.appID == s.device.appID)
        #expect(lines(passed.fields) == ["X-Attest-Key-Id: \(s.device.keyID)"])
        steps = []
        guard case .passed? = run(v, s, try headers(s), steps: &steps) else { Issue.record("expected a second pass"); return }
        #expect(steps == ["body", "appattest_counter"])   // the cached key: no store read
        #expect(try s.store.key(id: s.device.keyID)?.counter == 2)
    }

    @Test func aReplayedCounterAndATamperedBodyAreRefused() throws {
        let s = try setup()
        let v = verifier(s)
        var steps: [String] = []
        let first = try headers(s)
        guard case .passed? = run(v, s, first, steps: &steps) else { Issue.record("expected a pass"); return }
        guard case .rejected(.counterNotIncreasing)? = run(v, s, first, steps: &steps) else { Issue.record("a replay must fail"); return }
        guard case .rejected(.badAssertion)? = run(v, s, try headers(s, signedBody: Array("{\"amount\":1000}".utf8)), steps: &steps) else {
            Issue.record("an assertion over another body must fail"); return
        }
    }

    @Test func anUnknownKeyIsRefusedBeforeTheBodyIsRead() throws {
        let s = try setup()
        let other = try Setup(device: SimulatedAppAttestDevice(teamID: "ABCDE12345", bundleID: "com.example.app", environment: .production),
                              verifier: s.verifier)
        var steps: [String] = []
        guard case .rejected(.unknownKeyID)? = run(verifier(s), s, try headers(other), steps: &steps) else {
            Issue.record("an unregistered key must fail"); return
        }
        #expect(steps == ["appattest_key"])
    }

    @Test func theRiskPolicyRefusesWithTheMetricForTheUpstream() throws {
        let s = try setup()
        s.keys.put(try #require(try s.store.key(id: s.device.keyID)), riskMetric: 12)
        var steps: [String] = []
        guard case .refused(.riskTooHigh, let fields)? = run(verifier(s, maxRisk: 10), s, try headers(s), steps: &steps) else {
            Issue.record("a key over max_risk_metric must be refused"); return
        }
        #expect(lines(fields) == ["X-Attest-Risk-Metric: 12"])
        #expect(steps == ["body"])   // refused before the counter moves
        guard case .passed(let passed)? = run(verifier(s, maxRisk: 20), s, try headers(s), steps: &steps) else { Issue.record("pass"); return }
        #expect(lines(passed.fields) == ["X-Attest-Key-Id: \(s.device.keyID)", "X-Attest-Risk-Metric: 12"])
    }

    @Test func aStoreThatCannotAnswerFailsClosedUnlessAllowed() throws {
        let s = try setup()
        s.keys.put(try #require(try s.store.key(id: s.device.keyID)), riskMetric: nil)
        var steps: [String] = []
        guard case .rejected(.stateUnavailable)? = run(verifier(s), s, try headers(s), storeDown: true, steps: &steps) else {
            Issue.record("must fail closed"); return
        }
        guard case .passedUnchecked(_, .stateUnavailable)? = run(verifier(s, allow: true), s, try headers(s), storeDown: true, steps: &steps) else {
            Issue.record("on_unavailable: allow passes, marked"); return
        }
    }

    /// A compare-and-set the store answered "not advanced" is a replay; the store failing on the key lookup that
    /// follows (unknown key or replay?) must not turn it into "could not answer": refused, also under `allow`.
    @Test func aReplayStaysRefusedWhenTheLookupAfterItFails() throws {
        let s = try setup()
        s.keys.put(try #require(try s.store.key(id: s.device.keyID)), riskMetric: nil)
        var steps: [String] = []
        let first = try headers(s)
        guard case .passed? = run(verifier(s, allow: true), s, first, steps: &steps) else { Issue.record("expected a pass"); return }
        steps = []
        let replay = run(verifier(s, allow: true), s, first, downFrom: 2, steps: &steps)
        #expect(steps == ["body", "appattest_counter", "appattest_key"])
        guard case .rejected(.stateUnavailable)? = replay else { Issue.record("a replay must stay refused, got \(String(describing: replay))"); return }
    }

    @Test func malformedAndStaleHeadersAreRefusedWithoutAnyStep() throws {
        let s = try setup()
        var good = try headers(s)
        var steps: [String] = []
        guard case .rejected(.malformedToken)? = run(verifier(s), s, [good[1]], steps: &steps) else {
            Issue.record("an assertion without its key id is malformed"); return
        }
        good[2] = ("x-app-attest-timestamp", String(Self.now - 3600))
        guard case .rejected(.staleTimestamp)? = run(verifier(s), s, good, steps: &steps) else { Issue.record("stale"); return }
        #expect(steps.isEmpty)
    }
}
