import Testing
import Attestation
import GatewayCrypto
import StateStore
import GatewayCore
import Synchronization

/// The DeviceCheck flow with Apple's answers injected: status mapping, one retry, the bit0 subject binding.
@Suite struct DeviceCheckVerifierTests {
    final class Script: Sendable {
        let answers: AnnotatedMutex<[String: [AppleResponse?]]>
        let calls = AnnotatedMutex<[String]>([])
        init(_ answers: [String: [AppleResponse?]]) { self.answers = AnnotatedMutex(answers) }
        func post(_ path: String) -> AppleResponse? {
            calls.withLock { $0.append(path) }
            return answers.withLock { a in
                guard var list = a[path], !list.isEmpty else { return AppleResponse(status: 200, body: []) }
                let next = list.removeFirst()
                a[path] = list
                return next
            }
        }
    }

    static let key = try! ECPrivateKey.generate(.p256)

    func verifier(_ script: Script, binding: Bool = false) -> DeviceCheckVerifier {
        DeviceCheckVerifier(name: "dc", teamID: "TEAM123456", headerName: "X-Apple-DeviceCheck",
                            subjectHeader: binding ? "X-User-Hash" : nil,
                            auth: AppleAuthToken(teamID: "TEAM123456", keyID: "KEY", key: Self.key), retryDelayMillis: 1,
                            post: { path, _, _ in script.post(path) })
    }

    func r(_ status: Int, _ body: String = "") -> AppleResponse { AppleResponse(status: status, body: Array(body.utf8)) }

    func check(_ v: DeviceCheckVerifier, subject: String? = nil, store: (any AttestationStateStore)? = nil) -> DeviceCheckOutcome {
        v.check(deviceToken: "t", subject: subject, now: 1_800_000_000, store: store) { _ in }
    }

    @Test func statusesMapToTheDocumentedReasons() {
        let validate = "/v1/validate_device_token"
        #expect(check(verifier(Script([validate: [r(200)]]))) == .passed(bit0: nil, bit1: nil))
        #expect(check(verifier(Script([validate: [r(400, "Missing or incorrectly formatted device token payload")]]))) == .rejected(.deviceCheckFailed))
        #expect(check(verifier(Script([validate: [r(400, "Missing or badly formatted authorization token")]]))) == .rejected(.deviceCheckUnavailable))
        #expect(check(verifier(Script([validate: [r(401)]]))) == .rejected(.deviceCheckUnavailable))
        #expect(check(verifier(Script([validate: [r(429), r(429)]]))) == .rejected(.deviceCheckUnavailable))
        #expect(check(verifier(Script([validate: [r(503), r(200)]]))) == .passed(bit0: nil, bit1: nil))
        #expect(check(verifier(Script([validate: [nil, nil]]))) == .rejected(.deviceCheckUnavailable))
        let once = Script([validate: [r(500), r(500), r(200)]])
        _ = check(verifier(once))
        #expect(once.calls.withLock { $0.count } == 2, "one retry, not more")
    }

    @Test func subjectBindingRecordsTheFirstSubjectAndSetsBit0() {
        let store = MemoryStateStore()
        let first = Script(["/v1/query_two_bits": [r(200, "Failed to find bit state")]])
        #expect(check(verifier(first, binding: true), subject: "alice", store: store) == .passed(bit0: false, bit1: false))
        #expect(first.calls.withLock { $0 } == ["/v1/query_two_bits", "/v1/update_two_bits"])
        let again = Script(["/v1/query_two_bits": [r(200, #"{"bit0":true,"bit1":true,"last_update_time":"2026-11"}"#)]])
        #expect(check(verifier(again, binding: true), subject: "alice", store: store) == .passed(bit0: true, bit1: true))
        #expect(check(verifier(Script(["/v1/query_two_bits": [r(200, #"{"bit0":true,"bit1":false}"#)]]), binding: true),
                      subject: "mallory", store: store) == .rejected(.unknownSubject))
        #expect(check(verifier(Script([:]), binding: true), subject: nil, store: store) == .rejected(.missingSubject))
        #expect(check(verifier(Script([:]), binding: true), subject: "alice", store: nil) == .rejected(.stateUnavailable))
    }

    @Test func theAuthTokenIsReusedForTwentyMinutes() throws {
        let auth = AppleAuthToken(teamID: "T", keyID: "K", key: Self.key)
        let a = try auth.current(now: 1_000)
        #expect(try auth.current(now: 1_000 + 1_199) == a)
        #expect(try auth.current(now: 1_000 + 1_200) != a)
    }
}
