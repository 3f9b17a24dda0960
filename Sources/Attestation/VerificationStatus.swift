/// Every way a verification can end without a pass: one closed list, mapped to the HTTP status, the response
/// body's `reason`, the log field and the metric label in one place (PROTOCOL.md "What a rejected client gets").
public enum VerificationStatus: String, Sendable, CaseIterable, Error {
    case missingToken = "missing_token"
    case malformedToken = "malformed_token"
    case unsupportedAlgorithm = "unsupported_algorithm"
    case unknownKey = "unknown_key"
    case badSignature = "bad_signature"
    case wrongIssuer = "wrong_issuer"
    case wrongAudience = "wrong_audience"
    case expired
    case notYetValid = "not_yet_valid"
    case appNotAllowed = "app_not_allowed"
    case missingJTI = "missing_jti"
    case tokenReplayed = "token_replayed"
    case unknownKeyID = "unknown_key_id"
    case badAssertion = "bad_assertion"
    case counterNotIncreasing = "counter_not_increasing"
    case staleTimestamp = "stale_timestamp"
    case bodyTooLarge = "body_too_large"
    case challengeUnknown = "challenge_unknown"
    case jwksUnavailable = "jwks_unavailable"
    case stateUnavailable = "state_unavailable"
    case deviceCheckFailed = "device_check_failed"
    case deviceCheckUnavailable = "device_check_unavailable"
    case missingSubject = "missing_subject"
    case unknownSubject = "unknown_subject"
    case riskTooHigh = "risk_too_high"
    case badReceipt = "bad_receipt"
    /// The placeholder a Firebase SDK sends when the device could not attest (PROTOCOL.md Additions): nobody forged
    /// a token, the device failed to get one — counted apart from forgeries in metrics and the rollout view.
    case clientAttestationFailed = "client_attestation_failed"
    // Play Integrity (PROTOCOL.md Additions).
    case appNotRecognized = "app_not_recognized"
    case deviceIntegrityTooLow = "device_integrity_too_low"
    case notLicensed = "not_licensed"
    case wrongPackage = "wrong_package"
    case environmentRisk = "environment_risk"
    case deviceActivityTooHigh = "device_activity_too_high"
    case playIntegrityUnavailable = "play_integrity_unavailable"

    /// 403: a valid token from an app or audience that is not allowed; 503: keys or state unavailable (the client
    /// may retry); 401: the token is missing or invalid.
    public var httpStatus: Int {
        switch self {
        case .appNotAllowed, .wrongAudience, .unknownSubject, .riskTooHigh, .appNotRecognized, .deviceIntegrityTooLow,
             .notLicensed, .wrongPackage, .environmentRisk, .deviceActivityTooHigh: 403
        case .jwksUnavailable, .stateUnavailable, .deviceCheckUnavailable, .playIntegrityUnavailable: 503
        default: 401
        }
    }

    /// The reason code as it appears in responses, logs and metric labels.
    public var code: String { rawValue }
}

extension VerificationStatus {
    /// A small stable number per reason (its position in `allCases`), for metric keys on the request path.
    public var metricIndex: Int { Self.indexes[self] ?? 0xFF }
    private static let indexes: [VerificationStatus: Int] = Dictionary(uniqueKeysWithValues: allCases.enumerated().map { ($1, $0) })
}
