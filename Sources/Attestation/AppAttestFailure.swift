/// Why an App Attest attestation or assertion was rejected: specific enough for logs and tests, and mapped to
/// the closed `VerificationStatus` list in one place (`status`).
public enum AppAttestFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The CBOR envelope or authenticator data did not parse (the parser's description).
    case malformed(String)
    /// The key ID is not base64 of 32 bytes.
    case malformedKeyID
    /// A certificate in x5c did not parse, or the leaf key is not P-256.
    case badCertificate
    /// The chain does not lead to the pinned root, or a certificate is not valid at the verification time.
    case untrustedChain
    /// The leaf lacks the nonce extension 1.2.840.113635.100.8.2, or it is not `SEQUENCE { [1] OCTET STRING(32) }`.
    case missingNonceExtension
    /// SHA256(authData ‖ clientDataHash) differs from the certified nonce.
    case nonceMismatch
    /// SHA256(leaf public key) differs from the key ID the client claimed.
    case keyIDMismatch
    /// rpIdHash is not SHA256(App ID).
    case appIDMismatch
    /// An attestation whose counter is not 0.
    case counterNotZero
    /// The aaguid is not one the environment policy accepts.
    case wrongEnvironment
    /// credentialId differs from the key ID.
    case credentialIDMismatch
    /// The COSE key in authData differs from the leaf certificate's key.
    case publicKeyMismatch
    /// The stored public key is not a valid uncompressed P-256 point.
    case badPublicKey
    /// The assertion's ECDSA signature does not verify.
    case badSignature
    /// The assertion's counter is not greater than the stored one (a replay or a cloned key).
    case counterNotIncreasing
    /// With `fraud_metric`: the attestation's receipt does not verify or names another app, key or environment.
    case badReceipt(String)

    /// The one status every caller maps this failure to.
    public var status: VerificationStatus {
        switch self {
        case .counterNotIncreasing: .counterNotIncreasing
        case .badReceipt: .badReceipt
        default: .badAssertion
        }
    }

    /// A stable snake_case name for the case (e.g. `nonce_mismatch`): finer than `status`, for operators' tools
    /// and logs. Never sent to clients, which see only `status`.
    public var code: String {
        switch self {
        case .malformed: "malformed"
        case .badReceipt: "bad_receipt"
        case .malformedKeyID: "malformed_key_id"
        case .badCertificate: "bad_certificate"
        case .untrustedChain: "untrusted_chain"
        case .missingNonceExtension: "missing_nonce_extension"
        case .nonceMismatch: "nonce_mismatch"
        case .keyIDMismatch: "key_id_mismatch"
        case .appIDMismatch: "app_id_mismatch"
        case .counterNotZero: "counter_not_zero"
        case .wrongEnvironment: "wrong_environment"
        case .credentialIDMismatch: "credential_id_mismatch"
        case .publicKeyMismatch: "public_key_mismatch"
        case .badPublicKey: "bad_public_key"
        case .badSignature: "bad_signature"
        case .counterNotIncreasing: "counter_not_increasing"
        }
    }

    public var description: String {
        switch self {
        case .malformed(let why): "app attest: malformed (\(why))"
        default: "app attest: \(code)"
        }
    }
}
