import CBOR
import GatewayCrypto

/// What an App Attest attestation object says about itself, decoded but **not verified**: for explaining a
/// rejection (the operator CLI, logs). Nothing here may be trusted unless the same call also returned a
/// `VerifiedAppAttestKey`, and code that acts on a key takes only that type.
public struct AppAttestAttestationClaims: Sendable, Equatable {
    /// The leaf extension that describes the key's access control (an "ACL blob"); Apple's iOS/macOS 27 sample
    /// carries it, earlier keys do not. Reported as opaque DER: its inner format is not documented.
    public static let keyAccessControlOID = "1.2.840.113635.100.8.6"

    /// credentialId from the authenticator data; App Attest makes it the key ID.
    public let credentialID: [UInt8]
    /// The COSE key in the authenticator data, as an uncompressed P-256 point.
    public let credentialPublicKey: [UInt8]
    /// The leaf certificate's key (uncompressed P-256); nil when the leaf does not parse or holds another key type.
    public let certifiedPublicKey: [UInt8]?
    /// The 16-byte aaguid.
    public let aaguid: [UInt8]
    /// The environment the aaguid names; nil when it names neither.
    public let environment: AppAttestEnvironment?
    /// SHA-256 of the App ID the key claims to belong to.
    public let rpIdHash: [UInt8]
    /// The signature counter (0 in a genuine attestation).
    public let counter: UInt32
    /// authData extension `apple_validation_category_01`, when present.
    public let validationCategory: [UInt8]?
    /// authData extension `apple_bundle_version_01`, when present.
    public let bundleVersion: String?
    /// The leaf's notBefore and notAfter (unix seconds); nil when the leaf does not parse.
    public let leafNotBefore: Int64?
    public let leafNotAfter: Int64?
    /// The DER of leaf extension `keyAccessControlOID`, when the leaf carries it (once).
    public let keyAccessControl: [UInt8]?

    /// Decodes `attestation` (CBOR, base64-decoded) without checking anything: no chain, no nonce, no key ID.
    /// `.malformed` when the envelope does not parse. Certificates that do not parse leave their fields nil.
    public static func decode(attestation: [UInt8]) -> Result<AppAttestAttestationClaims, AppAttestFailure> {
        parse(attestation).map(\.claims)
    }

    /// The parsed object, each certificate of its chain (nil where one does not parse), and the claims.
    static func parse(_ attestation: [UInt8]) -> Result<
        (object: AppAttestAttestationObject, certificates: [X509Certificate?], claims: AppAttestAttestationClaims),
        AppAttestFailure
    > {
        switch AppAttestAttestationObject.parse(attestation) {
        case .failure(let error):
            return .failure(.malformed(error.description))
        case .success(let object):
            let certificates = object.certificateChain.map { X509Certificate(der: $0) }
            return .success((object, certificates, AppAttestAttestationClaims(object: object, leaf: certificates[0])))
        }
    }

    private init(object: AppAttestAttestationObject, leaf: X509Certificate?) {
        let authData = object.authenticatorData
        let credential = object.attestedCredentialData
        credentialID = credential.credentialId
        credentialPublicKey = credential.publicKey
        certifiedPublicKey = leaf?.publicKeyUncompressedP256()
        aaguid = credential.aaguid
        environment = AppAttestEnvironment(aaguid: credential.aaguid)
        rpIdHash = authData.rpIdHash
        counter = authData.signCount
        validationCategory = authData.appleValidationCategory
        bundleVersion = authData.appleBundleVersion
        leafNotBefore = leaf?.notBefore
        leafNotAfter = leaf?.notAfter
        keyAccessControl = leaf?.extensionValue(oid: Self.keyAccessControlOID)
    }
}
