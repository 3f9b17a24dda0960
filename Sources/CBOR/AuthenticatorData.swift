/// WebAuthn authenticator data as produced by App Attest — parsed, **not verified** (no hash, counter or key
/// has been compared with anything yet).
///
/// Layout: rpIdHash (32) ‖ flags (1) ‖ signCount (4, big-endian) ‖ [attested credential data when AT] ‖
/// [extensions map]. iOS 27 quirk: Apple's sample appends an extensions map with the ED flag *off*, so any
/// bytes after the fixed part (and the COSE key) are parsed as an extensions map whatever ED says; bytes that
/// are not exactly one CBOR map are an error, never silently ignored.
public struct AuthenticatorData: Sendable, Equatable {
    /// The flags byte.
    public struct Flags: OptionSet, Sendable, Equatable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// UP, bit 0.
        public static let userPresent = Flags(rawValue: 0x01)
        /// UV, bit 2.
        public static let userVerified = Flags(rawValue: 0x04)
        /// AT, bit 6: attested credential data follows the counter.
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        /// ED, bit 7: extensions follow (App Attest on iOS 27 appends them without setting this).
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// The exact input bytes (the verifier hashes them together with the client data hash).
    public let bytes: [UInt8]
    /// SHA-256 of the App ID (`teamId.bundleId`), 32 bytes.
    public let rpIdHash: [UInt8]
    public let flags: Flags
    /// The signature counter (0 in attestations).
    public let signCount: UInt32
    /// Present exactly when the AT flag is set.
    public let attestedCredentialData: AttestedCredentialData?
    /// The extensions map, keyed by text; empty when the data ends after the fixed part or COSE key.
    public let extensions: [String: CBORValue]
    /// `apple_validation_category_01` (a byte string, e.g. `01 00 00 00`), if present.
    public let appleValidationCategory: [UInt8]?
    /// `apple_bundle_version_01` (text), if present.
    public let appleBundleVersion: String?

    /// Offset of the attested credential data / extensions.
    static let fixedLength = 37
}

/// The attested credential data of an attestation's authenticator data.
public struct AttestedCredentialData: Sendable, Equatable {
    /// 16 bytes: `appattestdevelop` (development) or `appattest` + 7 zero bytes (production).
    public let aaguid: [UInt8]
    /// The credential ID; App Attest makes it the key ID, SHA-256 of the public key.
    public let credentialId: [UInt8]
    /// The COSE key as an uncompressed P-256 point: `04 ‖ x ‖ y`, 65 bytes.
    public let publicKey: [UInt8]

    /// The development-environment aaguid.
    public static let developmentAAGUID: [UInt8] = Array("appattestdevelop".utf8)
    /// The production-environment aaguid.
    public static let productionAAGUID: [UInt8] = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
}
