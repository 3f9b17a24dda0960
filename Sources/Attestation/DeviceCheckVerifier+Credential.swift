public import GatewayCore
import GatewayCrypto
import StateStore

/// DeviceCheck as a route verifier: the device token (and, with subject binding, the subject header) read on the
/// loop; Apple's calls and the subject record run as one blocking step, so a slow Apple never holds an event loop.
extension DeviceCheckVerifier: CredentialVerifier {
    /// The device token and the subject it is bound to (nil without subject binding, or when the header is absent).
    public struct Presented: Sendable {
        let token: String
        let subject: String?
    }

    public var scheme: StaticString { "DeviceCheck" }
    public var presenceHeader: [UInt8] { lowercasedHeader }

    public func extract(_ headers: HeaderView) -> Extraction<Presented> {
        switch headers.single(lowercasedHeader) {
        case .missing: return .absent
        case .malformed: return .malformed
        case .value(let range):
            guard range.count <= Self.maxTokenBytes else { return .malformed }
            var subject: String? = nil
            if let name = lowercasedSubjectHeader, case .value(let s) = headers.single(name) { subject = headers.string(s) }
            return .presented(Presented(token: headers.string(range), subject: subject))
        }
    }

    public func verify(_ presented: Presented, _ request: VerificationRequest, loop: NoLoopState?) -> VerifierStep {
        let now = request.now
        return .blocking { context in
            switch self.check(deviceToken: presented.token, subject: presented.subject, now: now, store: context.store, log: context.log) {
            case .rejected(let status):
                return .done(.rejected(status))
            case .passed(let bit0, let bit1):
                var fields: [VerdictField] = []
                if let bit0, let bit1 {
                    fields = [VerdictField("X-Attest-DeviceCheck-Bit0", bit0 ? "1" : "0"),
                              VerdictField("X-Attest-DeviceCheck-Bit1", bit1 ? "1" : "0")]
                }
                // Limited use: the token's SHA-256, per team, for `replay_window`.
                let consume = ConsumeRequest(namespace: self.replayNamespace, key: hexString(SHA256Hasher.hash(Array(presented.token.utf8))),
                                             expiresAt: now + self.replayWindowSeconds)
                return .done(.passed(PassedCredential(appID: nil, fields: fields, consumption: .once(consume))))
            }
        }
    }
}
