import Testing
import Attestation
import CBOR
import GatewayCrypto

/// Every assertion vector verifies with its key and previous counter; tampering, replay and a wrong App ID fail.
@Suite struct AppAttestAssertionVerifierTests {
    let verifier = AppAttestAssertionVerifier()

    func verify(_ v: AppAttestVector, _ a: AppAttestVector.Assertion, assertion: [UInt8]? = nil, appID: String? = nil,
                previousCounter: UInt32? = nil) -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        verifier.verify(assertion: assertion ?? a.assertion, clientData: a.clientData, publicKey: a.publicKey,
                        appID: appID ?? v.appID, previousCounter: previousCounter ?? a.previousCounter)
    }

    func failure(_ r: Result<VerifiedAppAttestAssertion, AppAttestFailure>) -> AppAttestFailure? {
        if case .failure(let f) = r { return f }
        return nil
    }

    @Test func thereAreTwelveAssertionVectors() {
        #expect(AppAttestVector.withAssertions.count == 12)
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func vectorVerifies(_ v: AppAttestVector) throws {
        for a in v.assertions {
            let verified = try verify(v, a).get()
            #expect(verified.counter == a.expectedCounter)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func assertionKeyIsTheAttestedKey(_ v: AppAttestVector) {
        guard let expected = v.expectedPublicKey else { return } // assertion-only vector
        for a in v.assertions { #expect(a.publicKey == expected) }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func flippedSignatureByteIsRejected(_ v: AppAttestVector) throws {
        for a in v.assertions {
            let signature = try AppAttestAssertionObject.parse(a.assertion).get().signature
            // Flip the signature's last byte (inside `s`, so the DER stays well formed) in the CBOR bytes.
            let start = try #require(firstOffset(of: signature, in: a.assertion))
            #expect(failure(verify(v, a, assertion: flipped(a.assertion, at: start + signature.count - 1))) == .badSignature)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func nonIncreasingCounterIsRejected(_ v: AppAttestVector) {
        for a in v.assertions {
            let r = verify(v, a, previousCounter: a.expectedCounter)
            #expect(failure(r) == .counterNotIncreasing)
            #expect(failure(r)?.status == .counterNotIncreasing)
            #expect(failure(verify(v, a, previousCounter: a.expectedCounter + 1)) == .counterNotIncreasing)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func wrongAppIDIsRejected(_ v: AppAttestVector) {
        for a in v.assertions {
            let r = verify(v, a, appID: v.appID + "x")
            #expect(failure(r) == .appIDMismatch)
            #expect(failure(r)?.status == .badAssertion)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func otherClientDataIsRejected(_ v: AppAttestVector) {
        for a in v.assertions {
            let r = verifier.verify(assertion: a.assertion, clientData: a.clientData + [0], publicKey: a.publicKey,
                                    appID: v.appID, previousCounter: a.previousCounter)
            #expect(failure(r) == .badSignature)
        }
    }

    /// App Attest signs the nonce as an ECDSA-SHA256 *message*: the signed digest is SHA256(nonce). Treating the
    /// nonce as the digest fails on every vector; hashing it once more succeeds.
    @Test(arguments: AppAttestVector.withAssertions)
    func nonceIsAMessageNotADigest(_ v: AppAttestVector) throws {
        for a in v.assertions {
            let object = try AppAttestAssertionObject.parse(a.assertion).get()
            let nonce = SHA256Hasher.hash(object.authenticatorData.bytes + SHA256Hasher.hash(a.clientData))
            let key = try #require(ECPublicKey(uncompressedP256: a.publicKey))
            #expect(!key.verifyPrehashed(derSignature: object.signature, digest: nonce))
            #expect(key.verifyPrehashed(derSignature: object.signature, digest: SHA256Hasher.hash(nonce)))
            #expect(key.verifyES256(derSignature: object.signature, message: nonce))
        }
    }

    /// One byte of the signed authenticator data — App ID hash, flags or counter — breaks the signature, which is
    /// checked first, so a raised counter or another app's hash can never be smuggled in.
    @Test(arguments: AppAttestVector.withAssertions)
    func flippedAuthenticatorDataByteIsRejected(_ v: AppAttestVector) throws {
        for a in v.assertions {
            let authData = try AppAttestAssertionObject.parse(a.assertion).get().authenticatorData.bytes
            let start = try #require(firstOffset(of: authData, in: a.assertion))
            for offset in [0, 31, 32, 36] {  // rpIdHash first and last byte, flags, counter's low byte
                #expect(failure(verify(v, a, assertion: flipped(a.assertion, at: start + offset))) == .badSignature)
            }
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func wrongTeamOrBundleIsRejected(_ v: AppAttestVector) throws {
        let dot = try #require(v.appID.firstIndex(of: "."))
        let team = v.appID[..<dot], bundle = v.appID[v.appID.index(after: dot)...]
        for a in v.assertions {
            #expect(failure(verify(v, a, appID: "ZZZZZZZZZZ.\(bundle)")) == .appIDMismatch)
            #expect(failure(verify(v, a, appID: "\(team).com.example.other")) == .appIDMismatch)
        }
    }

    /// Another device's key (the assertion names no key; the server looks it up by key ID) fails the signature.
    @Test(arguments: AppAttestVector.withAssertions)
    func otherKeyIsRejected(_ v: AppAttestVector) {
        let other = AppAttestVector.withAssertions.first { $0.assertions[0].publicKey != v.assertions[0].publicKey }!
        for a in v.assertions {
            let r = verifier.verify(assertion: a.assertion, clientData: a.clientData, publicKey: other.assertions[0].publicKey,
                                    appID: v.appID, previousCounter: a.previousCounter)
            #expect(failure(r) == .badSignature)
        }
    }

    /// `verifyAndDecode` returns the same result as `verify` and the authenticator data even when it rejects.
    @Test(arguments: AppAttestVector.withAssertions)
    func verifyAndDecodeReportsTheAuthenticatorData(_ v: AppAttestVector) throws {
        for a in v.assertions {
            let passed = verifier.verifyAndDecode(assertion: a.assertion, clientData: a.clientData, publicKey: a.publicKey,
                                                  appID: v.appID, previousCounter: a.previousCounter)
            #expect(try passed.result.get().counter == a.expectedCounter)
            #expect(passed.authenticatorData?.signCount == a.expectedCounter)
            let replayed = verifier.verifyAndDecode(assertion: a.assertion, clientData: a.clientData, publicKey: a.publicKey,
                                                    appID: v.appID, previousCounter: a.expectedCounter)
            #expect(failure(replayed.result) == .counterNotIncreasing)
            #expect(replayed.authenticatorData?.signCount == a.expectedCounter)
            #expect(replayed.authenticatorData?.rpIdHash == SHA256Hasher.hash(Array(v.appID.utf8)))
        }
        let garbage = verifier.verifyAndDecode(assertion: [0xA0], clientData: [], publicKey: v.assertions[0].publicKey,
                                               appID: v.appID, previousCounter: 0)
        #expect(garbage.authenticatorData == nil)
        guard case .failure(.malformed) = garbage.result else { Issue.record("expected malformed, got \(garbage.result)"); return }
    }

    /// The prepared verify (a duplicated context) takes exactly what a context built per call takes: the DER
    /// signature as signed, nothing with a byte added, dropped or a length changed, and not the raw `R ‖ S` form.
    @Test(arguments: AppAttestVector.withAssertions)
    func onlyTheExactDERSignatureVerifies(_ v: AppAttestVector) throws {
        let a = v.assertions[0]
        let object = try AppAttestAssertionObject.parse(a.assertion).get()
        let nonce = SHA256Hasher.hash(object.authenticatorData.bytes + SHA256Hasher.hash(a.clientData))
        let key = try #require(ECPublicKey(uncompressedP256: a.publicKey))
        let der = object.signature
        #expect(key.verifyES256(derSignature: der, message: nonce))
        var longer = der
        longer[1] += 1
        for variant in [der + [0], Array(der.dropLast()), longer, [], [0x30, 0x00], Array(der.dropFirst(2))] {
            #expect(!key.verifyES256(derSignature: variant, message: nonce), "\(variant)")
        }
        #expect(!key.verifyES256(derSignature: der, message: nonce + [0]))
        #expect(key.verifyES256(derSignature: der, message: nonce), "a failure leaves the prepared context usable")
    }

    @Test func invalidPublicKeyIsRejected() {
        let v = AppAttestVector.withAssertions[0], a = v.assertions[0]
        var point = a.publicKey
        point[64] ^= 0x01 // off the curve
        let r = verifier.verify(assertion: a.assertion, clientData: a.clientData, publicKey: point, appID: v.appID, previousCounter: 0)
        #expect(failure(r) == .badPublicKey)
    }
}
