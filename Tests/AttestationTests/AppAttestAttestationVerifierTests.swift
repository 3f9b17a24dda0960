import Testing
import Attestation
import CBOR
import GatewayCrypto

/// Every attestation vector verifies at its `verifyAt`, and each single-field change is rejected.
@Suite struct AppAttestAttestationVerifierTests {
    let verifier = AppAttestAttestationVerifier()

    func policy(_ v: AppAttestVector) -> AppAttestEnvironmentPolicy { v.environment == "production" ? .production : .development }

    func verify(_ v: AppAttestVector, attestation: [UInt8]? = nil, clientDataHash: [UInt8]? = nil, appID: String? = nil, environment: AppAttestEnvironmentPolicy? = nil,
                root: X509Certificate = AppAttestVector.root, at time: Int64? = nil, keyID: String? = nil) -> Result<VerifiedAppAttestKey, AppAttestFailure> {
        verifier.verify(attestation: attestation ?? v.attestation!, keyID: keyID ?? v.keyID!, clientDataHash: clientDataHash ?? v.clientDataHash!,
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

    @Test(arguments: AppAttestVector.withAttestation)
    func wrongTeamOrBundleIsRejected(_ v: AppAttestVector) throws {
        let dot = try #require(v.appID.firstIndex(of: "."))
        let team = v.appID[..<dot], bundle = v.appID[v.appID.index(after: dot)...]
        #expect(failure(verify(v, appID: "ZZZZZZZZZZ.\(bundle)")) == .appIDMismatch)
        #expect(failure(verify(v, appID: "\(team).com.example.other")) == .appIDMismatch)
    }

    /// One byte of the authenticator data in the CBOR — App ID hash, counter, aaguid (environment), credential ID,
    /// COSE key — changes SHA256(authData ‖ clientDataHash), so the Apple-certified nonce no longer matches.
    @Test(arguments: AppAttestVector.withAttestation)
    func flippedAuthDataByteIsRejected(_ v: AppAttestVector) throws {
        let authData = try AppAttestAttestationObject.parse(v.attestation!).get().authenticatorData.bytes
        let start = try #require(firstOffset(of: authData, in: v.attestation!))
        // rpIdHash (0…31), the counter's low byte (36), aaguid (37…52), credentialId (55…86), and y inside the
        // 77-byte COSE key that starts at 87.
        for offset in [0, 36, 37, 60, 87 + 75] {
            #expect(failure(verify(v, attestation: flipped(v.attestation!, at: start + offset))) == .nonceMismatch,
                    "authData byte \(offset)")
        }
    }

    /// One byte inside a certificate's DER in the CBOR: the leaf's certified nonce, its key, or its signature, or
    /// the intermediate's signature — each breaks a signature in the chain; a byte of the DER structure itself
    /// leaves no certificate at all.
    @Test(arguments: AppAttestVector.withAttestation)
    func flippedCertificateByteIsRejected(_ v: AppAttestVector) throws {
        let attestation = v.attestation!
        let object = try AppAttestAttestationObject.parse(attestation).get()
        let leaf = object.certificateChain[0], intermediate = object.certificateChain[1]
        let leafStart = try #require(firstOffset(of: leaf, in: attestation))
        let intermediateStart = try #require(firstOffset(of: intermediate, in: attestation))
        let certificate = try #require(X509Certificate(der: leaf))
        let nonceDER = try #require(certificate.extensionValue(oid: "1.2.840.113635.100.8.2"))
        let nonceInLeaf = try #require(firstOffset(of: nonceDER, in: leaf))
        let keyInLeaf = try #require(firstOffset(of: v.expectedPublicKey!, in: leaf))

        #expect(failure(verify(v, attestation: flipped(attestation, at: leafStart + nonceInLeaf + nonceDER.count - 1))) == .untrustedChain)
        #expect(failure(verify(v, attestation: flipped(attestation, at: leafStart + keyInLeaf + 1))) == .untrustedChain)
        #expect(failure(verify(v, attestation: flipped(attestation, at: leafStart + leaf.count - 1))) == .untrustedChain)
        #expect(failure(verify(v, attestation: flipped(attestation, at: intermediateStart + intermediate.count - 1))) == .untrustedChain)
        // 0x30 → 0x31: the leaf is no longer a DER SEQUENCE.
        #expect(failure(verify(v, attestation: flipped(attestation, at: leafStart))) == .badCertificate)
    }

    /// The claims come back with every result: equal to the verified key on success, still decoded on a rejection.
    @Test(arguments: AppAttestVector.withAttestation)
    func verifyAndDecodeReportsTheClaims(_ v: AppAttestVector) throws {
        let passed = verifier.verifyAndDecode(attestation: v.attestation!, keyID: v.keyID!, clientDataHash: v.clientDataHash!,
                                              appID: v.appID, environment: .any, root: AppAttestVector.root, at: v.verifyAt!)
        let key = try passed.result.get()
        let claims = try #require(passed.claims)
        #expect(claims == (try AppAttestAttestationClaims.decode(attestation: v.attestation!).get()))
        #expect(claims.credentialID == key.keyID)
        #expect(claims.certifiedPublicKey == key.publicKey)
        #expect(claims.credentialPublicKey == key.publicKey)
        #expect(claims.environment == key.environment)
        #expect(claims.counter == 0)
        #expect(claims.rpIdHash == SHA256Hasher.hash(Array(v.appID.utf8)))
        #expect(claims.validationCategory == key.validationCategory)
        #expect(claims.bundleVersion == key.bundleVersion)
        #expect(claims.keyAccessControl == key.keyAccessControl)
        #expect(claims.leafNotBefore == v.leafNotBefore)
        #expect(claims.leafNotAfter == v.leafNotAfter)

        let rejected = verifier.verifyAndDecode(attestation: v.attestation!, keyID: v.keyID!, clientDataHash: v.clientDataHash!,
                                                appID: v.appID + "x", environment: .any, root: AppAttestVector.root, at: v.verifyAt!)
        #expect(failure(rejected.result) == .appIDMismatch)
        #expect(rejected.claims == claims)

        let garbage = verifier.verifyAndDecode(attestation: [0xA0], keyID: v.keyID!, clientDataHash: v.clientDataHash!,
                                               appID: v.appID, environment: .any, root: AppAttestVector.root, at: v.verifyAt!)
        #expect(garbage.claims == nil)
        guard case .failure(.malformed) = garbage.result else { Issue.record("expected malformed, got \(garbage.result)"); return }
    }

    /// Extension 1.2.840.113635.100.8.6 (key access control) is on Apple's iOS 27 sample leaf only; the verified
    /// key carries the same bytes.
    @Test(arguments: AppAttestVector.withAttestation)
    func keyAccessControlIsDecodedWhenPresent(_ v: AppAttestVector) throws {
        let claims = try AppAttestAttestationClaims.decode(attestation: v.attestation!).get()
        let key = try verify(v).get()
        if v.name == "apple-doc-guide-2026" {
            let acl = try #require(claims.keyAccessControl)
            #expect(Array(acl.prefix(2)) == [0x30, UInt8(acl.count - 2)])
            #expect(key.keyAccessControl == acl)
        } else {
            #expect(claims.keyAccessControl == nil)
            #expect(key.keyAccessControl == nil)
        }
    }

    @Test func builtinRootIsTheVectorsRoot() {
        #expect(AppAttestRoots.apple.der == AppAttestVector.root.der)
        #expect(hexString(SHA256Hasher.hash(AppAttestRoots.apple.der))
                == "1cb9823ba28ba6ad2d33a006941de2ae4f513ef1d4e831b9f7e0fa7b6242c932")
        let v = AppAttestVector.withAttestation[0]
        #expect((try? verify(v, root: AppAttestRoots.apple).get()) != nil)
    }

    @Test func failureCodesAreDistinctSnakeCase() {
        let all: [AppAttestFailure] = [
            .malformed("x"), .malformedKeyID, .badCertificate, .untrustedChain, .missingNonceExtension, .nonceMismatch,
            .keyIDMismatch, .appIDMismatch, .counterNotZero, .wrongEnvironment, .credentialIDMismatch, .publicKeyMismatch,
            .badPublicKey, .badSignature, .counterNotIncreasing,
        ]
        #expect(Set(all.map(\.code)).count == all.count)
        #expect(all.allSatisfy { $0.code.allSatisfy { $0 == "_" || ("a"..."z").contains($0) } })
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
