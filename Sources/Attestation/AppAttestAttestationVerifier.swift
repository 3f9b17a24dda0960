import CBOR
public import GatewayCrypto
/// Verifies an App Attest attestation object (the one-time key registration) and produces a `VerifiedAppAttestKey`.
///
/// The checks, in order, are those of Apple's "Validating apps that connect to your server", as confirmed against
/// the vectors (Tests/AttestationTests/AppAttestVectors/README): chain to the pinned root at `unixTime`; the
/// certified nonce equals SHA256(authData ‖ clientDataHash); SHA256(leaf key) equals the claimed key ID; rpIdHash
/// equals SHA256(App ID); counter 0; aaguid accepted by the environment policy; credentialId equals the key ID
/// and the COSE key equals the leaf key. Pure: bytes and time in, result out.
public struct AppAttestAttestationVerifier: Sendable {
    public init() {}

    /// - Parameters:
    ///   - attestation: the CBOR attestation object (base64-decoded).
    ///   - keyID: the key ID the app claims, standard base64.
    ///   - clientDataHash: the bytes the app passed to `attestKey` — normally SHA256 of the server's challenge.
    ///   - appID: `TEAMID.bundle.id`.
    ///   - environment: which aaguids to accept.
    ///   - root: the pinned Apple App Attestation Root CA.
    ///   - unixTime: the verification time (every certificate must be valid then).
    public func verify(
        attestation: [UInt8], keyID: String, clientDataHash: [UInt8], appID: String,
        environment: AppAttestEnvironmentPolicy, root: X509Certificate, at unixTime: Int64
    ) -> Result<VerifiedAppAttestKey, AppAttestFailure> {
        verifyAndDecode(attestation: attestation, keyID: keyID, clientDataHash: clientDataHash, appID: appID,
                        environment: environment, root: root, at: unixTime).result
    }

    /// `verify`, plus what the attestation claims about itself — decoded before any check, so a rejection can be
    /// explained (the operator CLI prints both). `claims` is nil only when the envelope does not parse.
    public func verifyAndDecode(
        attestation: [UInt8], keyID: String, clientDataHash: [UInt8], appID: String,
        environment: AppAttestEnvironmentPolicy, root: X509Certificate, at unixTime: Int64
    ) -> (claims: AppAttestAttestationClaims?, result: Result<VerifiedAppAttestKey, AppAttestFailure>) {
        // 1. Envelope.
        switch AppAttestAttestationClaims.parse(attestation) {
        case .failure(let failure):
            return (nil, .failure(failure))
        case .success(let parsed):
            return (parsed.claims, check(
                parsed.object, certificates: parsed.certificates, claims: parsed.claims, keyID: keyID,
                clientDataHash: clientDataHash, appID: appID, environment: environment, root: root, at: unixTime))
        }
    }

    private func check(
        _ object: AppAttestAttestationObject, certificates parsedCertificates: [X509Certificate?],
        claims: AppAttestAttestationClaims, keyID: String, clientDataHash: [UInt8], appID: String,
        environment: AppAttestEnvironmentPolicy, root: X509Certificate, at unixTime: Int64
    ) -> Result<VerifiedAppAttestKey, AppAttestFailure> {
        guard let claimedKeyID = AppAttestKeyID.decode(keyID) else { return .failure(.malformedKeyID) }
        let authData = object.authenticatorData
        let credential = object.attestedCredentialData

        // 2. Chain: leaf → intermediates → the pinned root, all valid at `unixTime`.
        let certificates = parsedCertificates.compactMap { $0 }
        guard certificates.count == parsedCertificates.count else { return .failure(.badCertificate) }
        let leaf = certificates[0]
        guard X509ChainVerifier.verify(leaf: leaf, intermediates: Array(certificates.dropFirst()), root: root, at: unixTime) else {
            return .failure(.untrustedChain)
        }

        // 3. Nonce: binds the authenticator data and the server's challenge to the Apple-signed leaf.
        guard let extensionDER = leaf.extensionValue(oid: AppAttestNonceExtension.oid),
              let certifiedNonce = AppAttestNonceExtension.nonce(fromExtensionDER: extensionDER) else {
            return .failure(.missingNonceExtension)
        }
        let hasher = SHA256Hasher()
        hasher.update(authData.bytes)
        hasher.update(clientDataHash)
        guard hasher.finish() == certifiedNonce else { return .failure(.nonceMismatch) }

        // 4. The key ID the client claims is the hash of the certified key.
        guard let leafKey = claims.certifiedPublicKey else { return .failure(.badCertificate) }
        guard SHA256Hasher.hash(leafKey) == claimedKeyID else { return .failure(.keyIDMismatch) }

        // 5. The key belongs to this app.
        guard authData.rpIdHash == SHA256Hasher.hash(Array(appID.utf8)) else { return .failure(.appIDMismatch) }

        // 6. A fresh key has never signed anything.
        guard authData.signCount == 0 else { return .failure(.counterNotZero) }

        // 7. Environment from the aaguid.
        guard let keyEnvironment = AppAttestEnvironment(aaguid: credential.aaguid), environment.accepts(keyEnvironment) else {
            return .failure(.wrongEnvironment)
        }

        // 8. The credential in authData is the certified key.
        guard credential.credentialId == claimedKeyID else { return .failure(.credentialIDMismatch) }
        guard credential.publicKey == leafKey else { return .failure(.publicKeyMismatch) }

        return .success(VerifiedAppAttestKey(
            publicKey: leafKey, keyID: claimedKeyID, environment: keyEnvironment, receipt: object.receipt,
            validationCategory: authData.appleValidationCategory, bundleVersion: authData.appleBundleVersion,
            keyAccessControl: leaf.extensionValue(oid: AppAttestAttestationClaims.keyAccessControlOID)))
    }
}
