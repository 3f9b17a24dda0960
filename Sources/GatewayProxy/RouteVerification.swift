import Attestation
import GatewayConfig
import GatewayCore
import HTTP1

/// A route's verification, compiled once: which verifiers, any-of or all-of, enforce or monitor.
public struct RouteVerification: Sendable {
    public let verifiers: [AppCheckVerifier]
    public let requireAll: Bool
    public let monitor: Bool
    public let stripTokenHeaders: Bool
    /// `limited_use: true`: a verified App Check token must carry a `jti`, consumed once in the state store.
    public let limitedUse: Bool
    /// Lower-case token header names of this route's verifiers (stripped before forwarding when asked).
    let tokenHeaders: [[UInt8]]
}

/// What the route's verifiers decided about one request.
enum VerificationDecision {
    case verified(verifier: Int, token: VerifiedAppCheckToken)
    /// Verified, but the replay check could not run (`state.on_unavailable: allow`): forwarded with the reason.
    case verifiedUnchecked(verifier: Int, token: VerifiedAppCheckToken, reason: VerificationStatus)
    /// A token was presented and failed (`verifier` is the one whose failure decides).
    case failed(verifier: Int, status: VerificationStatus)
    /// No verifier found its token header.
    case absent

    var accessLogVerdict: StaticString {
        switch self {
        case .verified, .verifiedUnchecked: "verified"
        case .failed: "failed"
        case .absent: "absent"
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

    /// Runs the verifiers in their listed order: any-of stops at the first pass, all-of at the first failure.
    /// Only the verifiers that ran have side effects (the replay check runs afterwards, on the passing token only).
    func evaluate(_ head: HTTP1RequestHead, now: Int64, caches: [VerifiedTokenCache?]) -> VerificationDecision {
        head.bytes.withUnsafeBytes { raw in
            var firstFailure: VerificationDecision? = nil
            var lastPass: VerificationDecision? = nil
            for (i, verifier) in verifiers.enumerated() {
                let outcome: AppCheckOutcome
                switch Self.tokenField(head, raw, lowercasedName: tokenHeaders[i]) {
                case .missing:
                    if requireAll { return firstFailure ?? .absent }
                    continue
                case .malformed:
                    outcome = .rejected(.malformedToken)
                case .value(let range):
                    outcome = verifier.verify(token: UnsafeRawBufferPointer(rebasing: raw[range]), now: now,
                                              cache: caches[i])
                }
                switch outcome {
                case .verified(let token):
                    if !requireAll { return .verified(verifier: i, token: token) }
                    lastPass = .verified(verifier: i, token: token)
                case .rejected(let status):
                    if requireAll { return .failed(verifier: i, status: status) }
                    if firstFailure == nil { firstFailure = .failed(verifier: i, status: status) }
                }
            }
            return lastPass ?? firstFailure ?? .absent
        }
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

    private func appendVerified(verifier i: Int, token: VerifiedAppCheckToken, reason: VerificationStatus?, to out: ByteBuffer) {
        out.append("X-Attest-Verdict: verified\r\nX-Attest-Verifier: " as StaticString)
        out.append(verifiers[i].name)
        out.append("\r\nX-Attest-App-Id: " as StaticString)
        out.append(token.appID)
        out.append("\r\n" as StaticString)
        if let reason {
            out.append("X-Attest-Reason: " as StaticString)
            out.append(reason.code)
            out.append("\r\n" as StaticString)
        }
    }
}
