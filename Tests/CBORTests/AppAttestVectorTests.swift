import CBOR
import Testing

@Suite struct AppAttestVectorTests {
    @Test func vectorsAreBundled() {
        #expect(AppAttestVector.withAttestation.count == 14)
        #expect(AppAttestVector.withAssertions.count == 12)
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func everyAttestationVectorParses(_ vector: AppAttestVector) throws {
        let object = try AppAttestAttestationObject.parse(vector.attestation!).get()
        let authData = object.authenticatorData
        #expect(object.format == "apple-appattest")
        #expect(object.certificateChain.count >= 2)
        #expect(object.certificateChain.allSatisfy { $0.first == 0x30 })
        #expect(!object.receipt.isEmpty)
        #expect(authData.rpIdHash == TestSHA256.hash(Array(vector.appId.utf8)))
        #expect(authData.signCount == 0)
        #expect(authData.flags.contains(.attestedCredentialData))
        let credential = object.attestedCredentialData
        #expect(credential.aaguid == (vector.environment == "production"
            ? AttestedCredentialData.productionAAGUID : AttestedCredentialData.developmentAAGUID))
        #expect(credential.credentialId == vector.keyId)
        #expect(credential.publicKey == vector.expectedPublicKey)
        #expect(TestSHA256.hash(credential.publicKey) == vector.keyId)
    }

    @Test func appleIOS27SampleExposesExtensionsThoughEDFlagIsOff() throws {
        let vector = try #require(AppAttestVector.all.first { $0.name == "apple-doc-guide-2026" })
        let authData = try AppAttestAttestationObject.parse(vector.attestation!).get().authenticatorData
        #expect(!authData.flags.contains(.extensionData))
        #expect(authData.extensions.count == 2)
        #expect(authData.extensions["apple_bundle_version_01"] == .text("1"))
        #expect(authData.appleBundleVersion == "1")
        #expect(authData.appleValidationCategory == [0x01, 0x00, 0x00, 0x00])
    }

    @Test func olderAttestationsHaveNoExtensions() throws {
        for vector in AppAttestVector.withAttestation where vector.name != "apple-doc-guide-2026" {
            let authData = try AppAttestAttestationObject.parse(vector.attestation!).get().authenticatorData
            #expect(authData.extensions.isEmpty, "\(vector.name)")
            #expect(authData.appleBundleVersion == nil)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func everyAssertionVectorParses(_ vector: AppAttestVector) throws {
        for assertion in vector.assertions {
            let object = try AppAttestAssertionObject.parse(assertion.assertion).get()
            #expect(object.authenticatorData.signCount == assertion.expectedCounter)
            #expect(object.authenticatorData.bytes.count == 37)
            #expect(object.authenticatorData.rpIdHash == TestSHA256.hash(Array(vector.appId.utf8)))
            #expect(object.authenticatorData.attestedCredentialData == nil)
            #expect(object.authenticatorData.extensions.isEmpty)
            #expect(object.signature.first == 0x30)
        }
    }
}
