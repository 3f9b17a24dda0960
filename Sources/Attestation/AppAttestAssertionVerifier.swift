public import CBOR
public import GatewayCrypto
/// Verifies an App Attest assertion (a per-request signature by an already attested key).
///
/// nonce = SHA256(authenticatorData ‖ SHA256(clientData)); the key signs `nonce` as an ECDSA-SHA256 *message*,
/// so the signed digest is SHA256(nonce). Then rpIdHash must be SHA256(App ID) and the counter must exceed the
/// stored one. Pure: the caller loads `publicKey`/`previousCounter` and stores the new counter on success.
public struct AppAttestAssertionVerifier: Sendable {
    public init() {}

    /// - Parameters:
    ///   - assertion: the CBOR assertion (base64-decoded).
    ///   - clientData: the exact bytes the app hashed (request binding and server challenge).
    ///   - publicKey: the key's uncompressed P-256 point from `VerifiedAppAttestKey`.
    ///   - appID: `TEAMID.bundle.id`.
    ///   - previousCounter: the highest counter accepted so far for this key (0 right after attestation).
    public func verify(
        assertion: [UInt8], clientData: [UInt8], publicKey: [UInt8], appID: String, previousCounter: UInt32
    ) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        verifyAndDecode(assertion: assertion, clientData: clientData, publicKey: publicKey, appID: appID,
                        previousCounter: previousCounter).result
    }

    /// `verify`, plus the assertion's authenticator data as parsed before any check (its counter, rpIdHash and
    /// extensions are claims until `result` is a success), so a rejection can be explained. `authenticatorData`
    /// is nil only when the envelope does not parse.
    public func verifyAndDecode(
        assertion: [UInt8], clientData: [UInt8], publicKey: [UInt8], appID: String, previousCounter: UInt32
    ) -> (authenticatorData: AuthenticatorData?, result: Result<VerifiedAppAttestAssertion, AppAttestFailure>) {
        switch AppAttestAssertionObject.parse(assertion) {
        case .failure(let error):
            return (nil, .failure(.malformed(error.description)))
        case .success(let object):
            return (object.authenticatorData, check(
                object, clientData: clientData, publicKey: publicKey, appID: appID, previousCounter: previousCounter))
        }
    }

    /// `verify` with the key already built — the gateway keeps built keys, as building one from its bytes costs
    /// more than the signature check itself (OpenSSL's decoder).
    public func verify(
        assertion: [UInt8], clientData: [UInt8], key: ECPublicKey, appID: String, previousCounter: UInt32
    ) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        verify(assertion: assertion, clientData: clientData, key: key, rpIDHash: SHA256Hasher.hash(Array(appID.utf8)),
               previousCounter: previousCounter)
    }

    /// `verify` with the App ID's SHA-256 already computed (the gateway hashes its App IDs once).
    public func verify(
        assertion: [UInt8], clientData: [UInt8], key: ECPublicKey, rpIDHash: [UInt8], previousCounter: UInt32
    ) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        switch AppAttestAssertionObject.parse(assertion) {
        case .failure(let error): return .failure(.malformed(error.description))
        case .success(let object):
            return check(object, clientData: clientData, key: key, rpIDHash: rpIDHash, previousCounter: previousCounter)
        }
    }

    private func check(
        _ object: AppAttestAssertionObject, clientData: [UInt8], publicKey: [UInt8], appID: String, previousCounter: UInt32
    ) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        guard let key = ECPublicKey(uncompressedP256: publicKey) else { return .failure(.badPublicKey) }
        return check(object, clientData: clientData, key: key, rpIDHash: SHA256Hasher.hash(Array(appID.utf8)),
                     previousCounter: previousCounter)
    }

    private func check(
        _ object: AppAttestAssertionObject, clientData: [UInt8], key: ECPublicKey, rpIDHash: [UInt8], previousCounter: UInt32
    ) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        let authData = object.authenticatorData

        let hasher = SHA256Hasher()
        hasher.update(authData.bytes)
        hasher.update(SHA256Hasher.hash(clientData))
        let nonce = hasher.finish()
        guard key.verifyES256(derSignature: object.signature, message: nonce) else { return .failure(.badSignature) }

        guard authData.rpIdHash == rpIDHash else { return .failure(.appIDMismatch) }
        // Strictly greater: an equal counter is a replayed assertion, a smaller one a cloned or rolled-back key.
        guard authData.signCount > previousCounter else { return .failure(.counterNotIncreasing) }
        return .success(VerifiedAppAttestAssertion(
            counter: authData.signCount, validationCategory: authData.appleValidationCategory,
            bundleVersion: authData.appleBundleVersion))
    }
}
