import Testing
import Attestation
import GatewayCore
import GatewayCrypto
import JOSE
import StateStore
import Synchronization
import Dispatch

/// Play Integrity's steps driven by hand: classic tokens minted here (JWE A256KW/A256GCM around JWS ES256 with test
/// keys), Google's answers injected; every new `VerificationStatus` case produced.
@Suite struct PlayIntegrityVerifierTests {
    static let now: Int64 = 1_800_000_000
    static let package = "com.example.app"
    static let certificate = Array(repeating: UInt8(7), count: 32)
    static let digest = Base64URL.encode(certificate)
    static let aes = SecureRandom.bytes(32)
    static let signing = try! ECPrivateKey.generate(.p256)
    static let keys = PlayIntegrityClassicKeys(decryptionKey: aes,
                                               verificationKey: ECPublicKey(uncompressedP256: try! signing.uncompressedPublicPoint())!)!
    static let body = Array("{\"amount\":1}".utf8)
    static let timestamp = String(now)

    /// The request hash of `POST /pay` with `body` and `timestamp`.
    static func hash(method: String = "POST", target: String = "/pay", body: [UInt8] = body) -> String {
        PlayIntegrityVerifier.requestHash(method: Array(method.utf8), target: Array(target.utf8), timestamp: Array(timestamp.utf8),
                                          bodySHA256: SHA256Hasher.hash(body))
    }

    /// A verdict with every field the policy reads; `edit` changes what a test needs.
    static func verdict(nonce: String? = hash(), requestHash: String? = nil, _ edit: (inout [String: JSONValue]) -> Void = { _ in }) -> JSONValue {
        var request: [(String, JSONValue)] = [("requestPackageName", .string(package)), ("timestampMillis", .string(String(now * 1000)))]
        if let nonce { request.append(("nonce", .string(nonce))) }
        if let requestHash { request.append(("requestHash", .string(requestHash))) }
        var fields: [String: JSONValue] = [
            "requestPackageName": .string(package), "appRecognitionVerdict": "PLAY_RECOGNIZED", "packageName": .string(package),
            "certificateSha256Digest": [.string(digest)], "deviceRecognitionVerdict": ["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY"],
            "deviceActivityLevel": "LEVEL_1", "appLicensingVerdict": "LICENSED", "playProtectVerdict": "NO_ISSUES",
        ]
        edit(&fields)
        request[0].1 = fields["requestPackageName"] ?? .null
        if let ts = fields["timestampMillis"] { request[1].1 = ts }
        func pick(_ names: [String]) -> JSONValue {
            .object(JSONObject(names.compactMap { n in fields[n].map { (n, $0) } }))
        }
        var device = [("deviceRecognitionVerdict", fields["deviceRecognitionVerdict"] ?? [])]
        if let level = fields["deviceActivityLevel"] { device.append(("recentDeviceActivity", ["deviceActivityLevel": level])) }
        return .object(JSONObject([
            ("requestDetails", .object(JSONObject(request))),
            ("appIntegrity", pick(["appRecognitionVerdict", "packageName", "certificateSha256Digest"])),
            ("deviceIntegrity", .object(JSONObject(device))),
            ("accountDetails", pick(["appLicensingVerdict"])),
            ("environmentDetails", pick(["playProtectVerdict"])),
        ]))
    }

    /// A classic token: the verdict signed ES256 by `signer`, encrypted under `kek`.
    static func classic(_ verdict: JSONValue = verdict(), kek: [UInt8] = aes, signer: ECPrivateKey = signing,
                        jwsHeader: JSONValue = ["alg": "ES256"]) throws -> String {
        let jws = try JWSSigner.signES256(header: jwsHeader, payload: Array(JSONEncoding.encode(verdict).utf8), key: signer)
        return try #require(CompactJWE.encrypt(Array(jws.utf8), kek: kek))
    }

    /// Google's answers, scripted per URL kind ("token" / "decode"); calls counted.
    final class Google: Sendable {
        let answers = AnnotatedMutex<[String: [(status: Int, body: String)?]]>([:])
        let calls = AnnotatedMutex<[String]>([])
        let decoded = AnnotatedMutex<[String: JSONValue]>([:])   // token → verdict

        func post(_ url: String, _ body: [UInt8]) -> (status: Int, body: [UInt8])? {
            let kind = url.hasSuffix("/token") ? "token" : "decode"
            calls.withLock { $0.append(kind) }
            let scripted = answers.withLock { a -> (status: Int, body: String)?? in
                guard var list = a[kind], !list.isEmpty else { return .none }
                let next = list.removeFirst()
                a[kind] = list
                return .some(next)
            }
            if case .some(let answer) = scripted { return answer.map { ($0.status, Array($0.body.utf8)) } }
            if kind == "token" { return (200, Array(#"{"access_token":"ya29.test","expires_in":3599,"token_type":"Bearer"}"#.utf8)) }
            guard case .object(let o)? = try? StrictJSON.parse(body), case .string(let token)? = o["integrityToken"],
                  let verdict = decoded.withLock({ $0[token] }) else { return (400, Array("{\"error\":{\"code\":400}}".utf8)) }
            return (200, Array(JSONEncoding.encode(["tokenPayloadExternal": verdict]).utf8))
        }

        func count(_ kind: String) -> Int { calls.withLock { $0.filter { $0 == kind }.count } }
    }

    static let account = GoogleServiceAccount(clientEmail: "gw@example.iam.gserviceaccount.com", privateKeyID: "k1",
                                              privateKey: try! RSAPrivateKey.generate(), tokenURI: nil)

    func verifier(binding: PlayIntegrityBinding = .request, google: Google? = nil, classic: Bool = true,
                  policy: PlayIntegrityPolicy = PlayIntegrityPolicy(packageName: package, certificateDigests: [digest]),
                  maxInFlight: Int = 32, replayWindowSeconds: Int64 = 24 * 3600) -> PlayIntegrityVerifier {
        let g = google.map { script in
            PlayIntegrityGoogle(account: Self.account, packageName: Self.package, apiBaseURL: "https://play.test", tokenURL: "https://oauth.test/token",
                                retryDelayMillis: 1, maxInFlight: maxInFlight, post: { url, _, body in script.post(url, body) })
        }
        return PlayIntegrityVerifier(name: "android", policy: policy, binding: binding, classic: classic ? Self.keys : nil, google: g,
                                     registrationPath: "/.attest/android", replayWindowSeconds: replayWindowSeconds)
    }

    /// Every step run in order against `store`; the step names in `steps`.
    func run(_ v: PlayIntegrityVerifier, token: String, timestamp: String? = timestamp, body: [UInt8] = body,
             store: MemoryStateStore = MemoryStateStore(), steps: inout [String]) -> VerifierOutcome? {
        var fields = [("x-play-integrity", token)]
        if let timestamp { fields.append(("x-play-integrity-timestamp", timestamp)) }
        var bytes: [UInt8] = []
        var ranges: [HeaderField] = []
        for (n, value) in fields {
            ranges.append(HeaderField(name: bytes.count..<(bytes.count + n.utf8.count), value: (bytes.count + n.utf8.count)..<(bytes.count + n.utf8.count + value.utf8.count)))
            bytes += Array((n + value).utf8)
        }
        let request = VerificationRequest(now: Self.now, signedLine: .original(method: Array("POST".utf8), target: Array("/pay".utf8)), loopState: nil)
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
                do { step = try work.run(store) } catch { step = work.failed(error) }
            case .body(let continuation):
                steps.append("body")
                step = continuation(SHA256Hasher.hash(body))
            case .blocking(let work):
                steps.append("blocking")
                step = work(BlockingContext(store: store, log: { _ in }))
            }
        }
        return nil
    }

    func reason(_ v: PlayIntegrityVerifier, _ token: String, timestamp: String? = timestamp, body: [UInt8] = body) -> String? {
        var steps: [String] = []
        switch run(v, token: token, timestamp: timestamp, body: body, steps: &steps) {
        case .passed?: return nil
        case .rejected(let status)?: return status.code
        default: return "?"
        }
    }

    // MARK: classic tokens

    @Test func aClassicTokenPassesWithItsVerdictFields() throws {
        var steps: [String] = []
        guard case .passed(let p)? = run(verifier(), token: try Self.classic(), steps: &steps) else {
            Issue.record("not passed")
            return
        }
        #expect(steps == ["body"])
        #expect(p.appID == Self.package)
        #expect(p.fields.map { "\($0.name): \($0.value)" } == ["X-Attest-Device-Integrity: MEETS_DEVICE_INTEGRITY",
                                                               "X-Attest-App-Recognition: PLAY_RECOGNIZED"])
        guard case .once(let consume) = p.consumption else {
            Issue.record("nothing to consume")
            return
        }
        #expect(consume.namespace == "playintegrity-token:com.example.app" && consume.expiresAt == Self.now + 86_400)
    }

    @Test func wrongKeysTamperingAndAlgorithmsAreRefused() throws {
        let v = verifier()
        #expect(reason(v, try Self.classic(kek: SecureRandom.bytes(32))) == "bad_signature")
        #expect(reason(v, try Self.classic(signer: try ECPrivateKey.generate(.p256))) == "bad_signature")
        #expect(reason(v, try Self.classic(jwsHeader: ["alg": "HS256"])) == "unsupported_algorithm")
        #expect(reason(v, try Self.classic(jwsHeader: ["alg": "ES256", "crit": ["exp"]])) == "malformed_token")
        var parts = try Self.classic().split(separator: ".").map(String.init)
        var ct = try #require(Base64URL.decode(parts[3]))
        ct[ct.count / 2] ^= 0x01
        parts[3] = Base64URL.encode(ct)
        #expect(reason(v, parts.joined(separator: ".")) == "malformed_token")
        #expect(reason(v, "a.b.c.d.e f") == "malformed_token")          // not a token's characters
        #expect(reason(v, String(repeating: "A", count: 16 * 1024 + 1)) == "malformed_token")
        // Without a service account, a token that is not a JWE has nowhere to go.
        #expect(reason(v, "standard-token") == "malformed_token")
    }

    @Test func thePolicyProducesEachReason() throws {
        let v = verifier(policy: PlayIntegrityPolicy(packageName: Self.package, certificateDigests: [Self.digest], requireLicensed: true,
                                                     playProtect: ["NO_ISSUES"], maxDeviceActivity: 2))
        func with(_ edit: (inout [String: JSONValue]) -> Void) throws -> String? { reason(v, try Self.classic(Self.verdict(edit))) }
        #expect(try with { _ in } == nil)
        #expect(try with { $0["requestPackageName"] = "com.evil.app" } == "wrong_package")
        #expect(try with { $0["packageName"] = "com.evil.app" } == "wrong_package")
        #expect(try with { $0["timestampMillis"] = .string(String((Self.now - 301) * 1000)) } == "stale_timestamp")
        #expect(try with { $0["appRecognitionVerdict"] = "UNRECOGNIZED_VERSION" } == "app_not_recognized")
        #expect(try with { $0["certificateSha256Digest"] = [.string(Base64URL.encode(Array(repeating: 8, count: 32)))] } == "app_not_recognized")
        #expect(try with { $0["certificateSha256Digest"] = nil } == "app_not_recognized")
        #expect(try with { $0["deviceRecognitionVerdict"] = ["MEETS_BASIC_INTEGRITY"] } == "device_integrity_too_low")
        #expect(try with { $0["deviceRecognitionVerdict"] = [] } == "device_integrity_too_low")
        #expect(try with { $0["deviceRecognitionVerdict"] = ["MEETS_VIRTUAL_INTEGRITY"] } == "device_integrity_too_low")
        #expect(try with { $0["appLicensingVerdict"] = "UNLICENSED" } == "not_licensed")
        #expect(try with { $0["playProtectVerdict"] = "HIGH_RISK" } == "environment_risk")
        #expect(try with { $0["playProtectVerdict"] = nil } == "environment_risk")
        #expect(try with { $0["deviceActivityLevel"] = "LEVEL_3" } == "device_activity_too_high")
        #expect(try with { $0["deviceActivityLevel"] = "UNEVALUATED" } == "device_activity_too_high")
        #expect(try with { $0["timestampMillis"] = .number(JSONNumber(Self.now * 1000)) } == nil)
        #expect(try with { $0["timestampMillis"] = "17e11" } == "malformed_token")
        #expect(try with { $0["deviceRecognitionVerdict"] = "MEETS_DEVICE_INTEGRITY" } == "malformed_token")
        // A stronger label satisfies a weaker minimum.
        #expect(try with { $0["deviceRecognitionVerdict"] = ["MEETS_STRONG_INTEGRITY"] } == nil)
    }

    @Test func everyPlayIntegrityStatusHasItsHTTPStatus() {
        for s: VerificationStatus in [.appNotRecognized, .deviceIntegrityTooLow, .notLicensed, .wrongPackage, .environmentRisk, .deviceActivityTooHigh] {
            #expect(s.httpStatus == 403, "\(s)")
        }
        #expect(VerificationStatus.playIntegrityUnavailable.httpStatus == 503)
        #expect(VerificationStatus.playIntegrityUnavailable.code == "play_integrity_unavailable")
    }

    // MARK: binding

    @Test func theRequestHashCoversMethodTargetTimestampAndBody() throws {
        let v = verifier()
        #expect(reason(v, try Self.classic(), body: Array("{\"amount\":100}".utf8)) == "bad_assertion")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: Self.hash(target: "/other")))) == "bad_assertion")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: Self.hash(method: "PUT")))) == "bad_assertion")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: Self.hash() + "="))) == nil)        // padding is not part of it
        #expect(reason(v, try Self.classic(), timestamp: String(Self.now + 1)) == "bad_assertion")
        #expect(reason(v, try Self.classic(), timestamp: String(Self.now - 301)) == "stale_timestamp")
        #expect(reason(v, try Self.classic(), timestamp: "12ab") == "malformed_token")
        #expect(reason(v, try Self.classic(), timestamp: nil) == "malformed_token")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: nil))) == "malformed_token")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: Self.hash(), requestHash: Self.hash()))) == "malformed_token")
    }

    @Test func aNonceIsAChallengeRedeemedOnce() throws {
        let v = verifier(binding: .nonce)
        let store = MemoryStateStore()
        _ = try store.issue(namespace: v.challengeNamespace, key: "challenge-1", expiresAt: Self.now + 300, now: Self.now)
        let token = try Self.classic(Self.verdict(nonce: "challenge-1"))
        var steps: [String] = []
        guard case .passed? = run(v, token: token, timestamp: nil, store: store, steps: &steps) else {
            Issue.record("not passed")
            return
        }
        #expect(steps == ["playintegrity_nonce"])
        #expect(run(v, token: token, timestamp: nil, store: store, steps: &steps).map { "\($0)" } == "\(VerifierOutcome.rejected(.challengeUnknown))")
        #expect(reason(v, try Self.classic(Self.verdict(nonce: "never-issued")), timestamp: nil) == "challenge_unknown")
        // A standard token's request hash still binds the request under `binding: nonce`.
        #expect(reason(v, try Self.classic(Self.verdict(nonce: nil, requestHash: Self.hash()))) == nil)
    }

    // MARK: standard tokens (Google)

    @Test func aStandardTokenIsDecodedByGoogleOnceAndItsVerdictCached() throws {
        let google = Google()
        google.decoded.withLock { $0["std-1"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        let v = verifier(google: google)
        var steps: [String] = []
        guard case .passed? = run(v, token: "std-1", steps: &steps) else {
            Issue.record("not passed")
            return
        }
        #expect(steps == ["blocking", "body"])
        steps = []
        guard case .passed? = run(v, token: "std-1", steps: &steps) else {
            Issue.record("cached verdict not passed")
            return
        }
        #expect(steps == ["body"])                                           // from the cache: no call
        #expect(google.count("token") == 1 && google.count("decode") == 1)
        #expect(reason(v, "std-unknown") == "malformed_token")             // Google: 400
        #expect(google.count("token") == 1)                                 // the access token reused
    }

    @Test func googleFailuresAreRetriedOnceThenUnavailable() throws {
        let google = Google()
        google.decoded.withLock { $0["std-2"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        let v = verifier(google: google)
        google.answers.withLock { $0["decode"] = [(503, ""), nil] }
        #expect(reason(v, "std-2") == "play_integrity_unavailable")
        #expect(google.count("decode") == 2)
        google.answers.withLock { $0["decode"] = [(500, "")] }
        #expect(reason(v, "std-2") == nil)                                   // the retry succeeded
        google.answers.withLock { $0["decode"] = [(403, "{\"error\":\"PERMISSION_DENIED\"}")] }
        google.decoded.withLock { $0["std-3"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        #expect(reason(v, "std-3") == "play_integrity_unavailable")
        google.answers.withLock { $0["decode"] = [(200, "{\"no\":1}")] }
        google.decoded.withLock { $0["std-4"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        #expect(reason(v, "std-4") == "play_integrity_unavailable")
    }

    @Test func aRefusedAccessTokenIsRenewedOnceAndATokenEndpointFailureIsUnavailable() throws {
        let google = Google()
        google.decoded.withLock { $0["std-5"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        let v = verifier(google: google)
        google.answers.withLock { $0["decode"] = [(401, "")] }
        #expect(reason(v, "std-5") == nil)
        #expect(google.count("token") == 2)
        let down = Google()
        down.answers.withLock { $0["token"] = [(400, "{\"error\":\"invalid_grant\"}")] }
        #expect(reason(verifier(google: down), "std-6") == "play_integrity_unavailable")
        #expect(down.count("decode") == 0)
    }

    @Test func refusedTokensAreRememberedAndSpellingsShareOneKey() throws {
        let google = Google()
        let v = verifier(google: google)
        #expect(reason(v, "junk-token") == "malformed_token")
        #expect(reason(v, "junk-token") == "malformed_token")
        #expect(google.count("decode") == 1)                                 // the 400 is remembered: no second call
        google.decoded.withLock { $0["abc-_x"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        var steps: [String] = []
        guard case .passed(let a)? = run(v, token: "abc-_x", steps: &steps), case .passed(let b)? = run(v, token: "abc+/x==", steps: &steps),
              case .once(let ka) = a.consumption, case .once(let kb) = b.consumption else {
            Issue.record("not passed")
            return
        }
        #expect(ka.key == kb.key)                                            // one replay key for both spellings
        #expect(google.count("decode") == 2)                                 // and one call: the second came from the cache
    }

    @Test func aConsumedTokenIsKeptAtLeastWhileThePolicyWouldAcceptIt() throws {
        var steps: [String] = []
        let v = verifier(replayWindowSeconds: 1)
        guard case .passed(let p)? = run(v, token: try Self.classic(), steps: &steps), case .once(let c) = p.consumption else {
            Issue.record("not passed")
            return
        }
        #expect(c.expiresAt == Self.now + 300 + 1)                           // timestampMillis (now) + max_skew, not now + 1
    }

    @Test func timestampsBeyondAnyClockAreMalformedNotAnOverflow() throws {
        let v = verifier(policy: PlayIntegrityPolicy(packageName: Self.package, certificateDigests: [Self.digest], maxSkewMillis: 300_000))
        #expect(try reason(v, Self.classic(Self.verdict { $0["timestampMillis"] = .number(JSONNumber(Int64.max)) })) == "malformed_token")
        #expect(try reason(v, Self.classic(Self.verdict { $0["timestampMillis"] = "9223372036854775807" })) == "malformed_token")
        #expect(PlayIntegrityVerifier.requestHash(method: [], target: [], timestamp: [], bodySHA256: []).utf8.count == 43)
    }

    @Test func atMostMaxInFlightCallsWaitOnGoogle() throws {
        let google = Google()
        let gate = DispatchSemaphore(value: 0), entered = DispatchSemaphore(value: 0)
        let slow = PlayIntegrityGoogle(account: Self.account, packageName: Self.package, apiBaseURL: "https://play.test",
                                       tokenURL: "https://oauth.test/token", retryDelayMillis: 1, maxInFlight: 2, post: { url, _, body in
            if !url.hasSuffix("/token") {
                entered.signal()
                gate.wait()
            }
            return google.post(url, body)
        })
        let group = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: group) { _ = slow.decode(Array("t".utf8), now: Self.now, log: { _ in }) }
        }
        entered.wait()
        entered.wait()
        // Both places taken: a third call is refused at once, without a call.
        #expect(slow.decode(Array("t".utf8), now: Self.now, log: { _ in }).failure == .playIntegrityUnavailable)
        gate.signal()
        gate.signal()
        group.wait()
        #expect(google.count("decode") == 2)                                 // the third never called
        google.decoded.withLock { $0["t"] = Self.verdict(nonce: nil, requestHash: Self.hash()) }
        gate.signal()
        #expect(slow.decode(Array("t".utf8), now: Self.now, log: { _ in }).isSuccess)   // the places came back
    }

    @Test func aFailedAccessTokenFetchIsNotRepeatedByEveryCaller() throws {
        let google = Google()
        google.answers.withLock { $0["token"] = [(500, ""), (500, "")] }
        let v = verifier(google: google)
        #expect(reason(v, "std-7") == "play_integrity_unavailable")
        #expect(reason(v, "std-8") == "play_integrity_unavailable")
        #expect(google.count("token") == 2)                                  // one fetch (and its retry), then the backoff
        #expect(google.count("decode") == 0)
    }

    // MARK: registration

    @Test func aRegistrationTokenIsBoundToTheChallenge() throws {
        let google = Google()
        google.decoded.withLock { $0["reg-1"] = Self.verdict(nonce: nil, requestHash: PlayIntegrityVerifier.challengeHash("c-1")) }
        let v = verifier(google: google)
        #expect(v.verifyRegistration(token: Array("reg-1".utf8), challenge: "c-1", nowMillis: Self.now * 1000, log: { _ in }).isSuccess)
        #expect(v.verifyRegistration(token: Array("reg-1".utf8), challenge: "c-2", nowMillis: Self.now * 1000, log: { _ in }).failure == .badAssertion)
        let classic = try Self.classic(Self.verdict(nonce: PlayIntegrityVerifier.challengeHash("c-3")) { $0["deviceRecognitionVerdict"] = [] })
        #expect(v.verifyRegistration(token: Array(classic.utf8), challenge: "c-3", nowMillis: Self.now * 1000, log: { _ in }).failure == .deviceIntegrityTooLow)
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { true } else { false } }
}
