import Testing
import Attestation
import CBOR
import GatewayCrypto

/// Every attestation vector verifies at its `verifyAt`, and each single-field change is rejected.
@Suite struct AppAttestAttestationVerifierTests {
    let verifier = AppAttestAttestationVerifier()

    func policy(_ v: AppAttestVector) -> AppAttestEnvironmentPolicy { v.environment == "production" ? .production : .development }

    func verify(_ v: AppAttestVector, clientDataHash: [UInt8]? = nil, appID: String? = nil, environment: AppAttestEnvironmentPolicy? = nil,
                root: X509Certificate = AppAttestVector.root, at time: Int64? = nil, keyID: String? = nil) -> Result<VerifiedAppAttestKey, AppAttestFailure> {
        verifier.verify(attestation: v.attestation!, keyID: keyID ?? v.keyID!, clientDataHash: clientDataHash ?? v.clientDataHash!,
                        appID: appID ?? v.appID, environment: environment ?? policy(v), root: root, at: time ?? v.verifyAt!)
    }

    func failure(_ r: Result<VerifiedAppAttestKey, AppAttestFailure>) -> AppAttestFailure? {
        if case .failure(let f) = r { return f }
        return nil
    }

    @Test func thereAreFourteenAttestationVectors() {
        #expect(AppAttestVector.withAttestation.count == 14)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func vectorVerifies(_ v: AppAttestVector) throws {
        let key = try verify(v).get()
        #expect(key.publicKey == v.expectedPublicKey)
        #expect(key.keyID == SHA256Hasher.hash(key.publicKey))
        #expect(key.environment.rawValue == v.environment)
        #expect(!key.receipt.isEmpty)
        #expect(key.counter == 0)
        // `.any` accepts either environment.
        #expect((try? verify(v, environment: .any).get()) != nil)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func changedClientDataHashIsRejected(_ v: AppAttestVector) {
        var hash = v.clientDataHash!
        hash[hash.count - 1] ^= 0x01
        #expect(failure(verify(v, clientDataHash: hash)) == .nonceMismatch)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func wrongAppIDIsRejected(_ v: AppAttestVector) {
        #expect(failure(verify(v, appID: v.appID + "x")) == .appIDMismatch)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func wrongEnvironmentIsRejected(_ v: AppAttestVector) {
        let wrong: AppAttestEnvironmentPolicy = v.environment == "production" ? .development : .production
        #expect(failure(verify(v, environment: wrong)) == .wrongEnvironment)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func timeOutsideLeafValidityIsRejected(_ v: AppAttestVector) {
        #expect(failure(verify(v, at: v.leafNotBefore! - 1)) == .untrustedChain)
        #expect(failure(verify(v, at: v.leafNotAfter! + 1)) == .untrustedChain)
        #expect((try? verify(v, at: v.leafNotBefore!).get()) != nil)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func differentRootIsRejected(_ v: AppAttestVector) throws {
        let chain = try AppAttestAttestationObject.parse(v.attestation!).get().certificateChain
        // The real intermediate as "root": partial chains must not be accepted.
        let intermediate = try #require(X509Certificate(der: chain[1]))
        #expect(failure(verify(v, root: intermediate)) == .untrustedChain)
        // Another vector's leaf as "root".
        let other = AppAttestVector.withAttestation.first { $0.name != v.name }!
        let otherLeaf = try #require(X509Certificate(der: try AppAttestAttestationObject.parse(other.attestation!).get().certificateChain[0]))
        #expect(failure(verify(v, root: otherLeaf)) == .untrustedChain)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func otherKeyIDIsRejected(_ v: AppAttestVector) {
        let other = AppAttestVector.withAttestation.first { $0.keyID != v.keyID }!
        #expect(failure(verify(v, keyID: other.keyID!)) == .keyIDMismatch)
        #expect(failure(verify(v, keyID: "not base64")) == .malformedKeyID)
    }

    @Test func appleSampleUsesTheRawChallengeAndCarriesExtensions() throws {
        let v = AppAttestVector.named("apple-doc-guide-2026")
        #expect(v.clientDataHash == Array("example_server_challenge".utf8))
        let key = try verify(v).get()
        #expect(key.environment == .production)
        #expect(key.bundleVersion == "1")
        #expect(key.validationCategory == [0x01, 0x00, 0x00, 0x00])
        // Hashing the challenge (what most libraries do) does not reproduce Apple's published nonce.
        #expect(failure(verify(v, clientDataHash: SHA256Hasher.hash(v.clientDataHash!))) == .nonceMismatch)
    }

    @Test func garbageIsMalformed() {
        let v = AppAttestVector.withAttestation[0]
        let r = verifier.verify(attestation: [0xA0], keyID: v.keyID!, clientDataHash: v.clientDataHash!, appID: v.appID,
                                environment: .any, root: AppAttestVector.root, at: v.verifyAt!)
        guard case .failure(.malformed) = r else { Issue.record("expected malformed, got \(r)"); return }
    }

    @Test func failuresMapToVerificationStatus() {
        #expect(AppAttestFailure.nonceMismatch.status == .badAssertion)
        #expect(AppAttestFailure.untrustedChain.status == .badAssertion)
        #expect(AppAttestFailure.counterNotIncreasing.status == .counterNotIncreasing)
    }
}
