/// An App Attest key whose attestation passed every check of `AppAttestAttestationVerifier`. Only that verifier
/// constructs it; store it and later hand `publicKey` to `AppAttestAssertionVerifier`.
public struct VerifiedAppAttestKey: Sendable, Equatable {
    /// The credential's uncompressed P-256 point (65 bytes).
    public let publicKey: [UInt8]
    /// The key ID: SHA-256 of `publicKey` (32 bytes).
    public let keyID: [UInt8]
    /// The environment named by the aaguid.
    public let environment: AppAttestEnvironment
    /// The App Store receipt from attStmt (opaque CMS bytes; for a later fraud-metric exchange with Apple).
    public let receipt: [UInt8]
    /// authData extension `apple_validation_category_01`, when present (newer iOS versions).
    public let validationCategory: [UInt8]?
    /// authData extension `apple_bundle_version_01`, when present.
    public let bundleVersion: String?
    /// The DER of the leaf's key access-control extension (`AppAttestAttestationClaims.keyAccessControlOID`,
    /// macOS 27 keys), when the verified leaf carries it once; opaque, its inner format is not documented.
    public let keyAccessControl: [UInt8]?
    /// The attestation's counter (always 0): the value assertions must exceed.
    public let counter: UInt32

    init(publicKey: [UInt8], keyID: [UInt8], environment: AppAttestEnvironment, receipt: [UInt8],
         validationCategory: [UInt8]?, bundleVersion: String?, keyAccessControl: [UInt8]? = nil) {
        self.publicKey = publicKey
        self.keyID = keyID
        self.environment = environment
        self.receipt = receipt
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
        self.keyAccessControl = keyAccessControl
        self.counter = 0
    }
}

/// An App Attest assertion that passed `AppAttestAssertionVerifier`: store `counter` as the new high-water mark.
public struct VerifiedAppAttestAssertion: Sendable, Equatable {
    /// The assertion's sign counter, strictly greater than the previous one.
    public let counter: UInt32
    /// authData extension `apple_validation_category_01`, when present.
    public let validationCategory: [UInt8]?
    /// authData extension `apple_bundle_version_01`, when present.
    public let bundleVersion: String?
}
