import Foundation
import Testing
import Attestation
import CBOR
import GatewayCrypto
import GatewayTestSupport

/// The simulated device and CA produce objects the gateway's real verifiers accept, with the bytes a real device
/// writes; replays and tampering are rejected as for real devices.
@Suite struct SimulatedAppAttestTests {
    static let ca = try! SimulatedAppAttestCA.generate()
    static let challenge = Array("server-challenge-123".utf8)

    func device(_ environment: AppAttestEnvironment = .production, extensions: SimulatedAppAttestExtensions = .none) throws -> SimulatedAppAttestDevice {
        try SimulatedAppAttestDevice(teamID: "ABCDE12345", bundleID: "com.example.app", environment: environment, extensions: extensions)
    }

    func verifyAttestation(_ device: SimulatedAppAttestDevice, _ attestation: [UInt8], environment: AppAttestEnvironmentPolicy = .production,
                           ca: SimulatedAppAttestCA = ca) -> Result<VerifiedAppAttestKey, AppAttestFailure> {
        AppAttestAttestationVerifier().verify(
            attestation: attestation, keyID: device.keyID, clientDataHash: SHA256Hasher.hash(Self.challenge), appID: device.appID,
            environment: environment, root: ca.rootCertificate, at: Int64(Date().timeIntervalSince1970))
    }

    func verifyAssertion(_ device: SimulatedAppAttestDevice, _ assertion: [UInt8], clientData: [UInt8], previous: UInt32)
        -> Result<VerifiedAppAttestAssertion, AppAttestFailure> {
        AppAttestAssertionVerifier().verify(assertion: assertion, clientData: clientData, publicKey: device.publicKey,
                                            appID: device.appID, previousCounter: previous)
    }

    func failure<T>(_ r: Result<T, AppAttestFailure>) -> AppAttestFailure? {
        if case .failure(let f) = r { return f }
        return nil
    }

    @Test func attestationIsAcceptedByTheRealVerifier() throws {
        let d = try device()
        let key = try verifyAttestation(d, try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)).get()
        #expect(key.publicKey == d.publicKey)
        #expect(key.keyID == d.keyIDBytes)
        #expect(key.environment == .production)
        #expect(key.counter == 0)
        #expect(!key.receipt.isEmpty)
        #expect(key.validationCategory == nil && key.bundleVersion == nil)
    }

    @Test func attestationWithIOS27ExtensionsReportsThem() throws {
        let extensions = SimulatedAppAttestExtensions(validationCategory: SimulatedAppAttestExtensions.validationCategory(1), bundleVersion: "42")
        let d = try device(extensions: extensions)
        let attestation = try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)
        let key = try verifyAttestation(d, attestation).get()
        #expect(key.validationCategory == [0x01, 0x00, 0x00, 0x00])
        #expect(key.bundleVersion == "42")
        // As on iOS 27: the map follows the COSE key but the ED flag stays off.
        let authData = try AppAttestAttestationObject.parse(attestation).get().authenticatorData
        #expect(authData.flags.rawValue == 0x40)
        #expect(authData.extensions.count == 2)
    }

    @Test func authenticatorDataHasTheDeviceLayout() throws {
        let d = try device()
        let object = try AppAttestAttestationObject.parse(try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)).get()
        let bytes = object.authenticatorData.bytes
        #expect(Array(bytes[0..<32]) == SHA256Hasher.hash(Array("ABCDE12345.com.example.app".utf8)))
        #expect(bytes[32] == 0x40)
        #expect(Array(bytes[33..<37]) == [0, 0, 0, 0])
        #expect(Array(bytes[53..<55]) == [0x00, 0x20])
        #expect(Array(bytes[55..<87]) == d.keyIDBytes)
        // COSE key {1: 2, 3: -7, -1: 1, -2: x, -3: y} in shortest form, and nothing after it.
        #expect(Array(bytes[87..<97]) == [0xA5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20])
        #expect(bytes.count == 87 + 77)
        #expect(object.certificateChain.count == 2)
        #expect(object.certificateChain[1] == Self.ca.intermediateCertificate.der)
    }

    @Test func productionAndDevelopmentAAGUIDs() throws {
        for (environment, aaguid) in [(AppAttestEnvironment.production, Array("appattest".utf8) + [0, 0, 0, 0, 0, 0, 0]),
                                      (.development, Array("appattestdevelop".utf8))] {
            let d = try device(environment)
            let attestation = try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)
            #expect(try AppAttestAttestationObject.parse(attestation).get().attestedCredentialData.aaguid == aaguid)
            let policy: AppAttestEnvironmentPolicy = environment == .production ? .production : .development
            let other: AppAttestEnvironmentPolicy = environment == .production ? .development : .production
            #expect(try verifyAttestation(d, attestation, environment: policy).get().environment == environment)
            #expect(failure(verifyAttestation(d, attestation, environment: other)) == .wrongEnvironment)
        }
    }

    @Test func keyIDIsStandardBase64OfTheKeyHash() throws {
        let d = try device()
        #expect(Data(base64Encoded: d.keyID).map(Array.init) == SHA256Hasher.hash(d.publicKey))
        #expect(d.keyID.count == 44 && d.keyID.hasSuffix("="))
    }

    @Test func leafCarriesTheNonceExtension() throws {
        let d = try device()
        let attestation = try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)
        let object = try AppAttestAttestationObject.parse(attestation).get()
        let leaf = try #require(X509Certificate(der: object.certificateChain[0]))
        let value = try #require(leaf.extensionValue(oid: "1.2.840.113635.100.8.2"))
        #expect(Array(value.prefix(6)) == [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20])
        #expect(Array(value.dropFirst(6)) == SHA256Hasher.hash(object.authenticatorData.bytes + SHA256Hasher.hash(Self.challenge)))
        #expect(leaf.publicKeyUncompressedP256() == d.publicKey)
    }

    @Test func attestationFromAnotherCAIsUntrusted() throws {
        let d = try device()
        let attestation = try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: Self.ca)
        #expect(failure(verifyAttestation(d, attestation, ca: try SimulatedAppAttestCA.generate())) == .untrustedChain)
    }

    @Test func successiveAssertionsAreAcceptedAndReplayIsRejected() throws {
        let d = try device(extensions: SimulatedAppAttestExtensions(bundleVersion: "7"))
        let clientData = Array("GET\n/api/orders\n1700000000\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".utf8)
        var stored: UInt32 = 0
        var last: [UInt8] = []
        for expected in UInt32(1)...3 {
            last = try d.assert(clientData: clientData)
            let verified = try verifyAssertion(d, last, clientData: clientData, previous: stored).get()
            #expect(verified.counter == expected)
            #expect(verified.bundleVersion == "7")
            stored = verified.counter
        }
        #expect(d.counter == 3)
        let replay = verifyAssertion(d, last, clientData: clientData, previous: stored)
        #expect(failure(replay) == .counterNotIncreasing)
    }

    @Test func explicitCounterIsUsed() throws {
        let d = try device()
        let assertion = try d.assert(clientData: Self.challenge, counter: 41)
        #expect(try verifyAssertion(d, assertion, clientData: Self.challenge, previous: 40).get().counter == 41)
        #expect(d.counter == 41)
        #expect(try verifyAssertion(d, try d.assert(clientData: Self.challenge), clientData: Self.challenge, previous: 41).get().counter == 42)
    }

    @Test func flippedSignatureByteIsRejected() throws {
        let d = try device()
        let assertion = try d.assert(clientData: Self.challenge)
        let signature = try AppAttestAssertionObject.parse(assertion).get().signature
        // The map is {"signature": sig, …}: 1 (map) + 10 ("signature") + 2 (bytes header) bytes precede sig.
        #expect(Array(assertion[13..<13 + signature.count]) == signature)
        var tampered = assertion
        tampered[13 + signature.count - 1] ^= 0x01
        #expect(failure(verifyAssertion(d, tampered, clientData: Self.challenge, previous: 0)) == .badSignature)
        #expect(failure(verifyAssertion(d, assertion, clientData: Self.challenge + [0x00], previous: 0)) == .badSignature)
    }

    @Test func assertionSignsTheNonceAsAMessage() throws {
        let d = try device()
        let assertion = try d.assert(clientData: Self.challenge)
        let object = try AppAttestAssertionObject.parse(assertion).get()
        let nonce = SHA256Hasher.hash(object.authenticatorData.bytes + SHA256Hasher.hash(Self.challenge))
        let key = try #require(ECPublicKey(uncompressedP256: d.publicKey))
        #expect(key.verifyES256(derSignature: object.signature, message: nonce))
        #expect(!key.verifyPrehashed(derSignature: object.signature, digest: nonce))
        #expect(object.authenticatorData.flags.rawValue == 0x40 && object.authenticatorData.bytes.count == 37)
    }

    @Test func caSurvivesSaveAndLoad() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(!SimulatedAppAttestCA.exists(in: directory))
        try Self.ca.save(to: directory)
        #expect(SimulatedAppAttestCA.exists(in: directory))
        let loaded = try SimulatedAppAttestCA.load(from: directory)
        #expect(loaded.rootCertificateDER == Self.ca.rootCertificateDER)
        #expect(loaded.intermediateCertificate.der == Self.ca.intermediateCertificate.der)
        #expect(X509Certificate(pem: try String(contentsOfFile: SimulatedAppAttestCA.rootCertificatePath(in: directory), encoding: .utf8))?.der
                == Self.ca.rootCertificateDER)
        let keyMode = try FileManager.default.attributesOfItem(atPath: directory + "/root-key.pem")[.posixPermissions] as? Int
        #expect(keyMode == 0o600)
        // The loaded keys still sign: its leaves chain to the original root.
        let d = try device()
        #expect((try? verifyAttestation(d, try d.attest(clientDataHash: SHA256Hasher.hash(Self.challenge), ca: loaded)).get()) != nil)
    }

    @Test func deviceSurvivesSaveAndLoad() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let extensions = SimulatedAppAttestExtensions(validationCategory: [1, 0, 0, 0], bundleVersion: "3.1")
        let d = try device(.development, extensions: extensions)
        _ = try d.assert(clientData: Self.challenge)
        _ = try d.assert(clientData: Self.challenge)
        try d.save(to: directory)
        #expect(SimulatedAppAttestDevice.exists(in: directory))
        let loaded = try SimulatedAppAttestDevice.load(from: directory)
        #expect(loaded.keyID == d.keyID && loaded.publicKey == d.publicKey)
        #expect(loaded.teamID == d.teamID && loaded.bundleID == d.bundleID && loaded.environment == .development)
        #expect(loaded.extensions == extensions)
        #expect(loaded.counter == 2)
        let verified = try verifyAssertion(loaded, try loaded.assert(clientData: Self.challenge), clientData: Self.challenge, previous: 2).get()
        #expect(verified.counter == 3 && verified.validationCategory == [1, 0, 0, 0])
    }

    private func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("simulated-app-attest-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
