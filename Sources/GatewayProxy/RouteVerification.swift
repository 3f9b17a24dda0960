import Attestation
import GatewayConfig
import GatewayCore
import HTTP1
import Observability

/// One verifier a route names.
public enum RouteVerifier: Sendable {
    case appCheck(AppCheckVerifier)
    case appAttest(AppAttestVerifier)
    case deviceCheck(DeviceCheckVerifier)

    public var name: String {
        switch self {
        case .appCheck(let v): v.name
        case .appAttest(let v): v.name
        case .deviceCheck(let v): v.name
        }
    }

    /// The header whose presence means "this verifier's token was sent" (lower-case).
    var presenceHeader: [UInt8] {
        switch self {
        case .appCheck(let v): Array(v.headerName.lowercased().utf8)
        case .appAttest: Array(AppAttestVerifier.keyIDHeader.utf8)
        case .deviceCheck(let v): Array(v.headerName.lowercased().utf8)
        }
    }

    /// The auth-scheme named in `WWW-Authenticate` when this verifier's token is missing or refused.
    var scheme: StaticString {
        switch self {
        case .appCheck: "AppCheck"
        case .appAttest: "AppAttest"
        case .deviceCheck: "DeviceCheck"
        }
    }

    /// Every header carrying this verifier's token (lower-case): stripped before forwarding when asked.
    var tokenHeaders: [[UInt8]] {
        switch self {
        case .appCheck, .deviceCheck: [presenceHeader]   // the subject header is forwarded unchanged
        case .appAttest: AppAttestVerifier.tokenHeaders.map { Array($0.utf8) }
        }
    }
}

/// A route's verification, compiled once: which verifiers, any-of or all-of, enforce or monitor.
public struct RouteVerification: Sendable {
    public let verifiers: [RouteVerifier]
    public let requireAll: Bool
    public let monitor: Bool
    public let stripTokenHeaders: Bool
    /// `limited_use: true`: a verified App Check token must carry a `jti`, consumed once in the state store.
    public let limitedUse: Bool
    /// Lower-case names of every token header of this route's verifiers (stripped before forwarding when asked).
    let tokenHeaders: [[UInt8]]
    /// Per verifier, the header that says its token is present.
    let presenceHeaders: [[UInt8]]
    /// Per verifier, its name's `MetricNames` id.
    let metricIDs: [Int]

    public init(verifiers: [RouteVerifier], requireAll: Bool, monitor: Bool, stripTokenHeaders: Bool, limitedUse: Bool) {
        self.verifiers = verifiers
        self.requireAll = requireAll
        self.monitor = monitor
        self.stripTokenHeaders = stripTokenHeaders
        self.limitedUse = limitedUse
        tokenHeaders = verifiers.flatMap(\.tokenHeaders)
        presenceHeaders = verifiers.map(\.presenceHeader)
        metricIDs = verifiers.map { MetricNames.shared.id($0.name) }
    }

    /// Whether some verifier must finish off the event loop (App Attest: key lookup and counter).
    var hasAppAttest: Bool {
        verifiers.contains { if case .appAttest = $0 { true } else { false } }
    }
}

/// What a passing verifier vouches for.
enum PassedToken {
    case appCheck(VerifiedAppCheckToken)
    case appAttest(appID: String, keyID: String, riskMetric: Int?)
    /// The two bits as Apple reported them (subject binding), else nil; the token's SHA-256 (limited use).
    case deviceCheck(bit0: Bool?, bit1: Bool?, tokenHash: [UInt8])

    /// `X-Attest-App-Id`: App Check's `sub`, App Attest's `TEAM.bundle`; DeviceCheck names no app.
    var appID: String? {
        switch self {
        case .appCheck(let t): t.appID
        case .appAttest(let appID, _, _): appID
        case .deviceCheck: nil
        }
    }
}

/// One verifier's result.
enum VerifierOutcome {
    case passed(PassedToken)
    /// Passed, but a state check could not run and `state.on_unavailable: allow` let it through.
    case passedUnchecked(PassedToken, VerificationStatus)
    case rejected(VerificationStatus)
}

/// What the route's verifiers decided about one request.
enum VerificationDecision {
    case verified(verifier: Int, token: PassedToken)
    /// Verified, but the replay check could not run (`state.on_unavailable: allow`): forwarded with the reason.
    case verifiedUnchecked(verifier: Int, token: PassedToken, reason: VerificationStatus)
    /// A token was presented and failed (`verifier` is the one whose failure decides).
    case failed(verifier: Int, status: VerificationStatus)
    /// No verifier found its token header.
    case absent

    var accessLogVerdict: Verdict {
        switch self {
        case .verified, .verifiedUnchecked: .verified
        case .failed: .failed
        case .absent: .absent
        }
    }

    /// The verifier that decided (nil for `absent`).
    var verifierIndex: Int? {
        switch self {
        case .verified(let i, _), .verifiedUnchecked(let i, _, _), .failed(let i, _): i
        case .absent: nil
        }
    }

    var status: VerificationStatus? {
        switch self {
        case .verified: nil
        case .verifiedUnchecked: nil
        case .failed(_, let s): s
        case .absent: .missingToken
        }
    }
}

/// A decision that ends verification early (wrapped so it can be a `Result` failure).
struct VerificationDecisionFailure: Error {
    let decision: VerificationDecision
}

/// The App Attest headers of a request, checked as far as they can be without the key: well-formed key id and
/// assertion, a fresh timestamp (request binding) or a challenge (challenge binding).
struct AppAttestPresentation {
    let keyID: String
    let assertion: [UInt8]
    /// `binding: request`: the timestamp header's bytes, as signed.
    let timestamp: [UInt8]
    /// `binding: challenge`: the challenge as sent.
    let challenge: String?
}

/// Where a route's evaluation stands: verifiers run in order, and an App Attest verifier suspends it until the
/// state store has answered.
struct EvaluationProgress {
    var next = 0
    var firstFailure: VerificationDecision? = nil
    var lastPass: VerificationDecision? = nil
    /// `require_all`: every verifier that passed, in order (limited use consumes each one's credential).
    var passes: [(verifier: Int, token: PassedToken)] = []
}

enum EvaluationStep {
    case decided(VerificationDecision)
    /// Verifier `verifier` needs the body, the key and the counter: resume with `record` and `evaluate`.
    case appAttest(verifier: Int, AppAttestPresentation)
    /// Verifier `verifier` needs Apple's answer (and the state store for the subject binding).
    case deviceCheck(verifier: Int, token: String, subject: String?)
}

/// Where a token header stands in a request head.
enum TokenField {
    case missing
    /// Repeated or empty: ambiguous, so malformed (PROTOCOL.md).
    case malformed
    case value(Range<Int>)
}

extension RouteVerification {
    /// Finds the single `name` field (lower-case) in `head`.
    static func tokenField(_ head: HTTP1RequestHead, _ raw: UnsafeRawBufferPointer, lowercasedName name: [UInt8]) -> TokenField {
        var found: Range<Int>? = nil
        for f in head.fields where f.name.count == name.count {
            var same = true
            for k in 0..<name.count where Bytes.lower(raw[f.name.lowerBound + k]) != name[k] { same = false; break }
            guard same else { continue }
            if found != nil { return .malformed }
            found = f.value
        }
        guard let found else { return .missing }
        return found.isEmpty ? .malformed : .value(found)
    }

    static let assertionHeader = Array(AppAttestVerifier.assertionHeader.utf8)
    static let timestampHeader = Array(AppAttestVerifier.timestampHeader.utf8)
    static let challengeHeader = Array(AppAttestVerifier.challengeHeader.utf8)

    static func hasField(_ head: HTTP1RequestHead, _ raw: UnsafeRawBufferPointer, lowercasedName name: [UInt8]) -> Bool {
        if case .missing = tokenField(head, raw, lowercasedName: name) { return false }
        return true
    }

    /// Runs the verifiers from `progress.next` in their listed order: any-of stops at the first pass, all-of at the
    /// first failure. Only the verifiers that ran have side effects (the replay check runs afterwards, on the
    /// passing token only). Stops early at an App Attest verifier with its headers present.
    func evaluate(_ head: HTTP1RequestHead, now: Int64, caches: [VerifiedTokenCache?],
                  progress: inout EvaluationProgress) -> EvaluationStep {
        head.bytes.withUnsafeBytes { raw in
            while progress.next < verifiers.count {
                let i = progress.next
                progress.next += 1
                let outcome: VerifierOutcome
                switch Self.tokenField(head, raw, lowercasedName: presenceHeaders[i]) {
                case .missing:
                    if case .appAttest = verifiers[i], Self.hasField(head, raw, lowercasedName: Self.assertionHeader) {
                        outcome = .rejected(.malformedToken)   // an assertion without its key id
                    } else {
                        if requireAll { return .decided(progress.firstFailure ?? .absent) }
                        continue
                    }
                case .malformed:
                    outcome = .rejected(.malformedToken)
                case .value(let range):
                    switch verifiers[i] {
                    case .appCheck(let verifier):
                        switch verifier.verify(token: UnsafeRawBufferPointer(rebasing: raw[range]), now: now, cache: caches[i]) {
                        case .verified(let token): outcome = .passed(.appCheck(token))
                        case .rejected(let status): outcome = .rejected(status)
                        }
                    case .appAttest(let verifier):
                        switch Self.appAttestPresentation(head, raw, keyID: range, verifier: verifier, now: now) {
                        case .success(let presented): return .appAttest(verifier: i, presented)
                        case .failure(let status): outcome = .rejected(status)
                        }
                    case .deviceCheck(let verifier):
                        guard range.count <= DeviceCheckVerifier.maxTokenBytes else {
                            outcome = .rejected(.malformedToken)
                            break
                        }
                        var subject: String? = nil
                        if let name = verifier.subjectHeader {
                            switch Self.tokenField(head, raw, lowercasedName: Array(name.lowercased().utf8)) {
                            case .value(let s): subject = String(decoding: UnsafeRawBufferPointer(rebasing: raw[s]), as: UTF8.self)
                            case .missing, .malformed: subject = nil
                            }
                        }
                        let token = String(decoding: UnsafeRawBufferPointer(rebasing: raw[range]), as: UTF8.self)
                        return .deviceCheck(verifier: i, token: token, subject: subject)
                    }
                }
                if let decided = record(outcome, verifier: i, progress: &progress) { return .decided(decided) }
            }
            return .decided(progress.lastPass ?? progress.firstFailure ?? .absent)
        }
    }

    /// Folds one verifier's outcome into the evaluation; a decision when it ends the evaluation.
    func record(_ outcome: VerifierOutcome, verifier i: Int, progress: inout EvaluationProgress) -> VerificationDecision? {
        switch outcome {
        case .passed(let token):
            if !requireAll { return .verified(verifier: i, token: token) }
            progress.lastPass = .verified(verifier: i, token: token)
            progress.passes.append((i, token))
        case .passedUnchecked(let token, let reason):
            if !requireAll { return .verifiedUnchecked(verifier: i, token: token, reason: reason) }
            progress.lastPass = .verifiedUnchecked(verifier: i, token: token, reason: reason)
        case .rejected(let status):
            if requireAll { return .failed(verifier: i, status: status) }
            if progress.firstFailure == nil { progress.firstFailure = .failed(verifier: i, status: status) }
        }
        return nil
    }

    /// Reads the App Attest headers: one key id (canonical base64 of 32 bytes), one assertion (base64, bounded),
    /// and per binding one fresh timestamp or one challenge.
    static func appAttestPresentation(_ head: HTTP1RequestHead, _ raw: UnsafeRawBufferPointer, keyID range: Range<Int>,
                                      verifier: AppAttestVerifier, now: Int64) -> Result<AppAttestPresentation, VerificationStatus> {
        let keyID = String(decoding: UnsafeRawBufferPointer(rebasing: raw[range]), as: UTF8.self)
        guard let keyBytes = StandardBase64.decode(keyID), keyBytes.count == 32 else { return .failure(.malformedToken) }
        guard case .value(let a) = tokenField(head, raw, lowercasedName: assertionHeader),
              a.count <= AppAttestVerifier.maxAssertionBytes * 4 / 3 + 4,
              let assertion = StandardBase64.decode(String(decoding: UnsafeRawBufferPointer(rebasing: raw[a]), as: UTF8.self)) else {
            return .failure(.malformedToken)
        }
        switch verifier.binding {
        case .request(let maxSkew):
            guard case .value(let t) = tokenField(head, raw, lowercasedName: timestampHeader) else {
                return .failure(.malformedToken)
            }
            let timestamp = Array(UnsafeRawBufferPointer(rebasing: raw[t]))
            guard let fresh = AppAttestVerifier.timestampIsFresh(timestamp, now: now, maxSkewSeconds: maxSkew) else {
                return .failure(.malformedToken)
            }
            guard fresh else { return .failure(.staleTimestamp) }
            return .success(AppAttestPresentation(keyID: keyID, assertion: assertion, timestamp: timestamp, challenge: nil))
        case .challenge:
            guard case .value(let c) = tokenField(head, raw, lowercasedName: challengeHeader),
                  c.count <= AppAttestVerifier.maxChallengeBytes else {
                return .failure(.malformedToken)
            }
            let challenge = String(decoding: UnsafeRawBufferPointer(rebasing: raw[c]), as: UTF8.self)
            return .success(AppAttestPresentation(keyID: keyID, assertion: assertion, timestamp: [], challenge: challenge))
        }
    }

    /// The `WWW-Authenticate` schemes of a rejection: the verifier that failed, or for a missing token every verifier
    /// whose credential the request does not carry (with `require_all`, a present App Check token next to a missing
    /// App Attest assertion challenges for App Attest only).
    func schemes(for decision: VerificationDecision, head: HTTP1RequestHead?) -> [StaticString] {
        if let i = decision.verifierIndex { return [verifiers[i].scheme] }
        var schemes: [StaticString] = []
        head?.bytes.withUnsafeBytes { raw in
            for (i, v) in verifiers.enumerated() {
                if let head, Self.hasField(head, raw, lowercasedName: presenceHeaders[i]) { continue }
                if !schemes.contains(where: { $0.description == v.scheme.description }) { schemes.append(v.scheme) }
            }
        }
        if schemes.isEmpty {
            for v in verifiers where !schemes.contains(where: { $0.description == v.scheme.description }) { schemes.append(v.scheme) }
        }
        return schemes
    }

    /// The `X-Attest-*` fields for the upstream (appended after the client's fields, which never carry any).
    func appendVerdictHeaders(_ decision: VerificationDecision, to out: ByteBuffer) {
        switch decision {
        case .verified(let i, let token):
            appendVerified(verifier: i, token: token, reason: nil, to: out)
        case .verifiedUnchecked(let i, let token, let reason):
            appendVerified(verifier: i, token: token, reason: reason, to: out)
        case .failed(let i, let status):
            out.append("X-Attest-Verdict: failed\r\nX-Attest-Verifier: " as StaticString)
            out.append(verifiers[i].name)
            out.append("\r\nX-Attest-Reason: " as StaticString)
            out.append(status.code)
            out.append("\r\n" as StaticString)
        case .absent:
            out.append("X-Attest-Verdict: absent\r\nX-Attest-Reason: missing_token\r\n" as StaticString)
        }
    }

    private func appendVerified(verifier i: Int, token: PassedToken, reason: VerificationStatus?, to out: ByteBuffer) {
        out.append("X-Attest-Verdict: verified\r\nX-Attest-Verifier: " as StaticString)
        out.append(verifiers[i].name)
        out.append("\r\n" as StaticString)
        if let appID = token.appID {
            out.append("X-Attest-App-Id: " as StaticString)
            out.append(appID)
            out.append("\r\n" as StaticString)
        }
        if case .deviceCheck(let bit0?, let bit1?, _) = token {
            out.append(bit0 ? "X-Attest-DeviceCheck-Bit0: 1\r\n" as StaticString : "X-Attest-DeviceCheck-Bit0: 0\r\n")
            out.append(bit1 ? "X-Attest-DeviceCheck-Bit1: 1\r\n" as StaticString : "X-Attest-DeviceCheck-Bit1: 0\r\n")
        }
        if case .appAttest(_, let keyID, let riskMetric) = token {
            out.append("X-Attest-Key-Id: " as StaticString)
            out.append(keyID)
            out.append("\r\n" as StaticString)
            if let riskMetric {
                out.append("X-Attest-Risk-Metric: " as StaticString)
                out.appendDecimal(riskMetric)
                out.append("\r\n" as StaticString)
            }
        }
        if let reason {
            out.append("X-Attest-Reason: " as StaticString)
            out.append(reason.code)
            out.append("\r\n" as StaticString)
        }
    }
}
