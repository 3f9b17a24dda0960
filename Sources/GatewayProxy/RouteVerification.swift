import Attestation
import GatewayCore
import HTTP1

/// A route's verification as the proxy runs it: the Authenticator (Attestation) decides; this file turns its
/// decisions into what the upstream and the access log see.
typealias RouteVerification = Authenticator

extension VerificationDecision {
    /// The access log's view of a decision.
    var accessLogVerdict: Verdict {
        switch self {
        case .verified, .verifiedUnchecked: .verified
        case .failed: .failed
        case .absent: .absent
        }
    }
}

extension HTTP1RequestHead {
    /// The head's fields as verifiers read them (valid inside `body`).
    func withHeaderView<R>(_ body: (HeaderView) -> R) -> R {
        bytes.withUnsafeBytes { body(HeaderView(bytes: $0, fields: fields)) }
    }

    /// The method and request-target as sent (an absolute-form target as its path and query), for App Attest's
    /// request binding.
    var signedLine: SignedRequestLine {
        let start = bytes.withUnsafeBytes { raw -> Int in
            let t = UnsafeRawBufferPointer(rebasing: raw[target])
            let origin = HeaderFilter.originForm(t)
            guard let base = t.baseAddress, let o = origin.baseAddress, o >= base, o < base + t.count else { return target.lowerBound }
            return target.lowerBound + (o - base)
        }
        return .head(bytes: bytes, method: method, target: start < target.upperBound ? start..<target.upperBound : target)
    }
}

extension Authenticator {
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

    private func appendVerified(verifier i: Int, token: PassedCredential, reason: VerificationStatus?, to out: ByteBuffer) {
        out.append("X-Attest-Verdict: verified\r\nX-Attest-Verifier: " as StaticString)
        out.append(verifiers[i].name)
        out.append("\r\n" as StaticString)
        if let appID = token.appID {
            out.append("X-Attest-App-Id: " as StaticString)
            out.append(appID)
            out.append("\r\n" as StaticString)
        }
        Self.append(token.fields, to: out)
        if let reason {
            out.append("X-Attest-Reason: " as StaticString)
            out.append(reason.code)
            out.append("\r\n" as StaticString)
        }
    }

    /// Verifier-made fields, one line each.
    static func append(_ fields: [VerdictField], to out: ByteBuffer) {
        for f in fields {
            out.append(f.name)
            out.append(": " as StaticString)
            out.append(f.value)
            out.append("\r\n" as StaticString)
        }
    }
}
