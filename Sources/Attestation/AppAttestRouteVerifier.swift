public import GatewayCore
import StateStore

/// App Attest assertions on a route (PROTOCOL.md "App Attest"): the key id, the assertion and, per binding, a
/// fresh timestamp or a challenge. The steps: the key from the cache or the store (before the body is read, so a
/// made-up key id cannot make the gateway hold bodies for nothing), then the whole body (the request binding signs
/// its hash), the signature and policy on the loop, the risk policy, then the challenge and the counter
/// compare-and-set in the store — only then does the upstream see the request.
///
/// One per route: it carries the route's `max_risk_metric` and the process's key cache and state policy.
public final class AppAttestRouteVerifier: CredentialVerifier {
    public let verifier: AppAttestVerifier
    let keys: AppAttestKeyCache
    /// `max_risk_metric`: keys whose fraud metric is higher are refused (`risk_too_high`).
    let maxRiskMetric: Int?
    /// `state.on_unavailable: allow`: a counter the store cannot advance lets the request through, marked.
    let allowWhenUnavailable: Bool
    /// Told of every key that passed (the fraud-metric refresher refreshes the receipts of keys in use).
    let onKeyUse: @Sendable (String) -> Void

    public init(_ verifier: AppAttestVerifier, keys: AppAttestKeyCache, maxRiskMetric: Int?, allowWhenUnavailable: Bool,
                onKeyUse: @escaping @Sendable (String) -> Void = { _ in }) {
        self.verifier = verifier
        self.keys = keys
        self.maxRiskMetric = maxRiskMetric
        self.allowWhenUnavailable = allowWhenUnavailable
        self.onKeyUse = onKeyUse
    }

    /// The headers, checked as far as they can be without the key.
    public struct Presented: Sendable {
        let keyID: String
        let assertion: [UInt8]
        /// `binding: request`: the timestamp header's bytes, as signed.
        let timestamp: [UInt8]
        /// `binding: challenge`: the challenge as sent.
        let challenge: String?
    }

    public var name: String { verifier.name }
    public var scheme: StaticString { "AppAttest" }
    public var presenceHeader: [UInt8] { Self.keyIDHeader }
    public var credentialHeaders: [[UInt8]] { AppAttestVerifier.tokenHeaders.map { Array($0.utf8) } }

    static let keyIDHeader = Array(AppAttestVerifier.keyIDHeader.utf8)
    static let assertionHeader = Array(AppAttestVerifier.assertionHeader.utf8)
    static let timestampHeader = Array(AppAttestVerifier.timestampHeader.utf8)
    static let challengeHeader = Array(AppAttestVerifier.challengeHeader.utf8)

    /// One key id (canonical base64 of 32 bytes), one assertion (base64, bounded), and per binding one timestamp
    /// or one bounded challenge. An assertion without its key id is malformed, not absent.
    public func extract(_ headers: HeaderView) -> Extraction<Presented> {
        let keyField: Range<Int>
        switch headers.single(Self.keyIDHeader) {
        case .missing: return headers.has(Self.assertionHeader) ? .malformed : .absent
        case .malformed: return .malformed
        case .value(let r): keyField = r
        }
        let keyID = headers.string(keyField)
        guard let keyBytes = StandardBase64.decode(keyID), keyBytes.count == 32 else { return .malformed }
        guard case .value(let a) = headers.single(Self.assertionHeader),
              a.count <= AppAttestVerifier.maxAssertionBytes * 4 / 3 + 4,
              let assertion = StandardBase64.decode(headers.string(a)) else { return .malformed }
        switch verifier.binding {
        case .request:
            guard case .value(let t) = headers.single(Self.timestampHeader) else { return .malformed }
            return .presented(Presented(keyID: keyID, assertion: assertion, timestamp: Array(headers[t]), challenge: nil))
        case .challenge:
            guard case .value(let c) = headers.single(Self.challengeHeader), c.count <= AppAttestVerifier.maxChallengeBytes else {
                return .malformed
            }
            return .presented(Presented(keyID: keyID, assertion: assertion, timestamp: [], challenge: headers.string(c)))
        }
    }

    public func verify(_ presented: Presented, _ request: VerificationRequest, loop: NoLoopState?) -> VerifierStep {
        if case .request(let maxSkew) = verifier.binding {
            guard let fresh = AppAttestVerifier.timestampIsFresh(presented.timestamp, now: request.now, maxSkewSeconds: maxSkew) else {
                return .done(.rejected(.malformedToken))
            }
            guard fresh else { return .done(.rejected(.staleTimestamp)) }
        }
        let line = request.signedLine
        let now = request.now
        if let entry = keys.get(presented.keyID) { return keyKnown(entry, presented, line, now: now) }
        let keyID = presented.keyID
        return .store(StoreStep(operation: "appattest_key", run: { store throws(StateStoreError) in
            guard let record = try store.key(id: keyID) else { return .done(.rejected(.unknownKeyID)) }
            let riskMetric = try store.receipt(keyID: keyID)?.riskMetric
            // A stored key that is not a P-256 point cannot verify anything.
            guard let entry = self.keys.put(record, riskMetric: riskMetric) else { return .done(.rejected(.badAssertion)) }
            return self.keyKnown(entry, presented, line, now: now)
        }, failed: { _ in .done(.rejected(.stateUnavailable)) }))
    }

    /// The key is known: the body next (its hash is signed with the request binding).
    private func keyKnown(_ entry: AppAttestKeyCache.Entry, _ presented: Presented, _ line: SignedRequestLine, now: Int64) -> VerifierStep {
        .body { bodySHA256 in self.check(entry, presented, line, bodySHA256: bodySHA256, now: now) }
    }

    /// Signature, app, environment and extension policy, then the risk policy; then the store.
    private func check(_ entry: AppAttestKeyCache.Entry, _ presented: Presented, _ line: SignedRequestLine,
                       bodySHA256: [UInt8], now: Int64) -> VerifierStep {
        let key = entry.record
        let clientData = presented.challenge.map { Array($0.utf8) } ?? AppAttestVerifier.requestClientData(
            method: line.method, target: line.target, timestamp: presented.timestamp, bodySHA256: bodySHA256)
        let verified: VerifiedAppAttestAssertion
        switch verifier.verifyAssertion(presented.assertion, clientData: clientData, key: entry.key, keyAppID: key.appID,
                                        keyEnvironment: key.environment, previousCounter: 0) {
        case .failure(let status): return .done(.rejected(status))
        case .success(let v): verified = v
        }
        // The metric as the cache has it now (the refresher may have updated it since the key was looked up).
        let riskMetric = keys.get(key.keyID)?.riskMetric ?? entry.riskMetric
        let riskField = riskMetric.map { VerdictField("X-Attest-Risk-Metric", String($0)) }
        if let max = maxRiskMetric, let riskMetric, riskMetric > max, let riskField {
            return .done(.refused(.riskTooHigh, fields: [riskField]))
        }
        var fields = [VerdictField("X-Attest-Key-Id", key.keyID)]
        if let riskField { fields.append(riskField) }
        let passed = PassedCredential(appID: key.appID, fields: fields, consumption: .none)
        let keyID = key.keyID
        let unknownOrReplayed = StoreStep(operation: "appattest_key", run: { store throws(StateStoreError) in
            // The compare-and-set also fails for a key no longer in the store (cached here before it was removed).
            .done(.rejected(try store.key(id: keyID) == nil ? .unknownKeyID : .counterNotIncreasing))
        }, failed: { _ in .done(.rejected(.stateUnavailable)) })   // refused either way: the counter was not advanced
        let failed: @Sendable (StateStoreError) -> VerifierStep = { [allowWhenUnavailable] error in
            .done(allowWhenUnavailable && error.failsOpen ? .passedUnchecked(passed, .stateUnavailable) : .rejected(.stateUnavailable))
        }
        guard let challenge = presented.challenge else {
            // The request binding: the compare-and-set alone, batched with the drain's others.
            return .store(StoreStep(operation: "appattest_counter", advance: CounterAdvance(keyID: keyID, counter: verified.counter),
                                    then: { advanced in
                guard advanced else { return .store(unknownOrReplayed) }
                self.onKeyUse(keyID)
                return .done(.passed(passed))
            }, failed: failed))
        }
        let namespace = verifier.challengeNamespace
        return .store(StoreStep(operation: "appattest_counter", run: { store throws(StateStoreError) in
            if try !store.redeem(namespace: namespace, key: challenge, now: now) { return .done(.rejected(.challengeUnknown)) }
            if try store.advanceCounter(keyID: keyID, to: verified.counter) {
                self.onKeyUse(keyID)
                return .done(.passed(passed))
            }
            return .store(unknownOrReplayed)
        }, failed: failed))
    }
}
