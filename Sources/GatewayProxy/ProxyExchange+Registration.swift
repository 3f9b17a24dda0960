import Attestation
import GatewayCore
import GatewayCrypto
import HTTP1
import JOSE
import Observability
import StateStore
import GatewayPosix

/// The registration endpoints (PROTOCOL.md "App Attest registration", Additions "Play Integrity"): one-time
/// challenges; App Attest attestations verified against the pinned root and stored as keys with counter 0; Play
/// Integrity tokens bound to the challenge, judged by the verifier's policy.
extension ProxyExchange {
    func beginRegistration(_ head: HTTP1RequestHead, _ endpoint: RegistrationEndpoints.Endpoint) {
        exchange.registration = endpoint
        // registration_rate_limit: per client address, before the body is read or any work is done for it.
        let name = endpoint.registrar.name
        if let limit = gen.runtime.registrationLimits[name] {
            let key = rateLimitAddress(head)
            if let shared = gen.runtime.sharedRateLimits {
                takeSharedToken(shared, limit, name: "registration:" + name, key: key,
                                close: !http.requestDone || !head.keepAlive) { conn in conn.registrationAdmitted(head) }
                return
            }
            if let retry = gen.runtime.rateLimiter.take(limit, name: "registration:" + name, key: key) {
                respondLocal(.rateLimited(retryAfter: retry), close: !http.requestDone || !head.keepAlive)
                return
            }
        }
        registrationAdmitted(head)
    }

    /// A registration request past its rate limit: hold its body, then answer it.
    private func registrationAdmitted(_ head: HTTP1RequestHead) {
        guard head.methodIs("POST") else {
            respondLocal(.methodNotAllowed(allow: "POST"), close: !http.requestDone || !head.keepAlive)
            return
        }
        exchange.bodyLimit = RegistrationEndpoints.maxBodyBytes
        if case .contentLength(let n) = head.framing, n > RegistrationEndpoints.maxBodyBytes {
            respondLocal(.payloadTooLarge(), close: true)
            return
        }
        let held = HeldBody(budget: gen.runtime.heldBodies)
        if case .contentLength(let n) = head.framing, !held.reserve(total: n) {
            respondLocal(.overloaded(), close: !http.requestDone || !head.keepAlive)
            return
        }
        exchange.heldBody = held
        if !http.requestDone {
            sendContinueIfExpected(head)
            setDeadline(worker.loop.now + worker.idleTimeout)
            return   // `process` reads the body, then `heldBodyComplete` calls `registrationBodyReady`
        }
        registrationBodyReady()
    }

    func registrationBodyReady() {
        guard let (action, registrar) = exchange.registration, let held = exchange.heldBody else { return }
        switch (action, registrar) {
        case (.challenge, _): issueChallenge(registrar)
        case (.attest, .appAttest(let verifier)): verifyAttestation(verifier, body: held.bytes)
        case (.attest, .playIntegrity(let verifier)): verifyPlayIntegrity(verifier, body: held.bytes)
        }
    }

    /// 32 random bytes, base64url, recorded in the state store until the TTL.
    private func issueChallenge(_ registrar: RegistrationEndpoints.Registrar) {
        guard let state = gen.runtime.state else { return }
        let challenge = Base64URL.encode(SecureRandom.bytes(32))
        let now = worker.unixNow()
        let ttl = registrar.challengeTTLSeconds
        let namespace = registrar.challengeNamespace
        offLoop(state, "challenge_issue", { store in
            Result { () throws(StateStoreError) in try store.issue(namespace: namespace, key: challenge, expiresAt: now + ttl, now: now) }
        }) { conn, result in
            if case .success(true) = result {
                conn.registrationAnswer(.json(status: 200, "OK", "{\"challenge\":\"\(challenge)\",\"expires_in\":\(ttl)}"))
            } else {
                conn.registrationAnswer(.registrationRejected(.stateUnavailable), reason: .stateUnavailable)
            }
        }
    }

    /// The JSON mobile plugins send: `keyId`, `challenge`, `token` (base64 attestation), optional `platform` and
    /// `format` (when present, `format` must be `apple-app-attest`).
    static func parseAttestRequest(_ body: [UInt8]) -> (keyID: String, challenge: String, token: [UInt8])? {
        guard case .object(let o)? = try? StrictJSON.parse(body),
              case .string(let keyID)? = o["keyId"], case .string(let challenge)? = o["challenge"],
              case .string(let token)? = o["token"], !challenge.isEmpty,
              challenge.utf8.count <= AppAttestVerifier.maxChallengeBytes else { return nil }
        if let platform = o["platform"] { guard case .string = platform else { return nil } }
        if let format = o["format"] { guard case .string("apple-app-attest") = format else { return nil } }
        guard let bytes = StandardBase64.decode(token) ?? Base64URL.decode(token), !bytes.isEmpty else { return nil }
        return (keyID, challenge, bytes)
    }

    /// The attestation's checks run on a worker thread (a chain verification costs about a millisecond); the
    /// challenge is redeemed and the key stored only when they pass, so a forged attestation cannot burn a challenge.
    private func verifyAttestation(_ verifier: AppAttestVerifier, body: [UInt8]) {
        guard let request = Self.parseAttestRequest(body) else {
            registrationAnswer(.badRegistration(), reason: .malformedToken)
            return
        }
        let now = worker.unixNow()
        offLoop(Self.blockingQueue, {
            verifier.verifyRegistration(keyID: request.keyID, challenge: request.challenge, attestation: request.token, now: now)
        }) { conn, result in
            conn.attestationVerified(verifier, challenge: request.challenge, result, now: now)
        }
    }

    private func attestationVerified(_ verifier: AppAttestVerifier, challenge: String,
                                     _ result: Result<AppAttestVerifier.Registration, AppAttestFailure>, now: Int64) {
        let registration: AppAttestVerifier.Registration
        switch result {
        case .failure(let failure):
            let status: VerificationStatus = switch failure {
            case .appIDMismatch, .wrongEnvironment: .appNotAllowed
            case .malformed, .malformedKeyID: .malformedToken
            case .badReceipt: .badReceipt
            default: .badAssertion
            }
            let requestID = withRequestID { String(decoding: $0, as: UTF8.self) }
            Logger.warn("app attest registration rejected",
                        ["verifier": verifier.name, "detail": failure.description, "request_id": requestID])
            registrationAnswer(.registrationRejected(status), reason: status)
            return
        case .success(let r): registration = r
        }
        guard let state = gen.runtime.state else { return }
        let record = AttestedKeyRecord(keyID: registration.keyID, appID: registration.appID, publicKey: registration.key.publicKey,
                                       counter: 0, environment: registration.key.environment.rawValue, createdAt: now,
                                       validationCategory: registration.key.validationCategory,
                                       bundleVersion: registration.key.bundleVersion,
                                       keyAccessControl: registration.key.keyAccessControl)
        // A verified receipt (fraud_metric) records its own creation time, not-before and metric; else the time of registration.
        let verified = registration.receipt
        let receipt = ReceiptRecord(receipt: registration.key.receipt, riskMetric: verified?.riskMetric,
                                    createdAt: verified?.createdAt ?? now, notBefore: verified?.notBefore, lastUsedAt: now)
        let namespace = verifier.challengeNamespace
        offLoop(state, "appattest_register", { store -> Result<Bool, StateStoreError> in
            Result { () throws(StateStoreError) -> Bool in
                guard try store.redeem(namespace: namespace, key: challenge, now: now) else { return false }
                // A key registered before (the app retried) keeps its counter; its receipt is refreshed.
                _ = try store.registerKey(record)
                try store.putReceipt(keyID: record.keyID, receipt)
                return true
            }
        }) { conn, result in
            switch result {
            case .success(true):
                state.appAttestKeys.put(record, riskMetric: receipt.riskMetric)
                conn.exchange.verdict = .verified
                conn.exchange.verifierMetric = MetricNames.shared.id(verifier.name)
                conn.registrationAnswer(.json(status: 201, "Created",
                    "{\"keyId\":\(JSONText.quoted(record.keyID)),\"environment\":\"\(record.environment)\",\"appId\":\(JSONText.quoted(record.appID))}"))
            case .success(false):
                conn.registrationAnswer(.registrationRejected(.challengeUnknown), reason: .challengeUnknown)
            case .failure:
                conn.registrationAnswer(.registrationRejected(.stateUnavailable), reason: .stateUnavailable)
            }
        }
    }

    /// The plugin contract's Android half: `{"platform":"android","format":"google-play-integrity-standard","keyId":…,
    /// "challenge":…,"token":…}`; `keyId` is the plugin's provider handle and is stored nowhere.
    static func parseAndroidAttestRequest(_ body: [UInt8]) -> (challenge: String, token: [UInt8])? {
        guard case .object(let o)? = try? StrictJSON.parse(body),
              case .string("android")? = o["platform"], case .string("google-play-integrity-standard")? = o["format"],
              case .string(let challenge)? = o["challenge"], case .string(let token)? = o["token"],
              !challenge.isEmpty, challenge.utf8.count <= AppAttestVerifier.maxChallengeBytes, !token.isEmpty else { return nil }
        if let keyID = o["keyId"] { guard case .string = keyID else { return nil } }
        return (challenge, Array(token.utf8))
    }

    /// The challenge must be live (read, not redeemed: no call to Google for a made-up one); then the token is decoded
    /// (by Google for a standard one) and judged on a worker thread; the challenge is redeemed only when it passed, so
    /// a forged token cannot burn a challenge.
    private func verifyPlayIntegrity(_ verifier: PlayIntegrityVerifier, body: [UInt8]) {
        guard let request = Self.parseAndroidAttestRequest(body) else {
            registrationAnswer(.badRegistration(), reason: .malformedToken)
            return
        }
        guard let state = gen.runtime.state else { return }
        let now = worker.unixNow()
        let namespace = verifier.challengeNamespace
        offLoop(state, "playintegrity_challenge", { store in
            Result { () throws(StateStoreError) in try store.isIssued(namespace: namespace, key: request.challenge, now: now) }
        }) { conn, issued in
            switch issued {
            case .success(true): conn.decodePlayIntegrity(verifier, request)
            case .success(false): conn.registrationAnswer(.registrationRejected(.challengeUnknown), reason: .challengeUnknown)
            case .failure: conn.registrationAnswer(.registrationRejected(.stateUnavailable), reason: .stateUnavailable)
            }
        }
    }

    private func decodePlayIntegrity(_ verifier: PlayIntegrityVerifier, _ request: (challenge: String, token: [UInt8])) {
        let nowMillis = WallClock.unixMillis()
        let now = nowMillis / 1000
        let name = verifier.name
        offLoop(Self.blockingQueue, {
            verifier.verifyRegistration(token: request.token, challenge: request.challenge, nowMillis: nowMillis,
                                        log: { message in Logger.error(message, ["verifier": name]) })
        }) { conn, result in
            if case .failure(let status) = result {
                conn.registrationAnswer(.registrationRejected(status), reason: status)
                return
            }
            guard let state = conn.gen.runtime.state else { return }
            let namespace = verifier.challengeNamespace
            conn.offLoop(state, "playintegrity_register", { store in
                Result { () throws(StateStoreError) in try store.redeem(namespace: namespace, key: request.challenge, now: now) }
            }) { conn, redeemed in
                switch redeemed {
                case .success(true):
                    conn.exchange.verdict = .verified
                    conn.exchange.verifierMetric = MetricNames.shared.id(verifier.name)
                    conn.registrationAnswer(.json(status: 201, "Created",
                        "{\"platform\":\"android\",\"appId\":\(JSONText.quoted(verifier.policy.packageName))}"))
                case .success(false):
                    conn.registrationAnswer(.registrationRejected(.challengeUnknown), reason: .challengeUnknown)
                case .failure:
                    conn.registrationAnswer(.registrationRejected(.stateUnavailable), reason: .stateUnavailable)
                }
            }
        }
    }

    /// Answers a registration request (its body has been read whole, so the connection stays open).
    private func registrationAnswer(_ response: LocalResponse, reason: VerificationStatus? = nil) {
        exchange.heldBody = nil
        if let reason {
            exchange.verdict = .failed
            if let (_, registrar) = exchange.registration { exchange.verifierMetric = MetricNames.shared.id(registrar.name) }
            exchange.reason = reason
        }
        respondLocal(response, close: !(exchange.head?.keepAlive ?? false))
    }
}
