import Foundation
import Testing
import CBOR
import GatewayCrypto

/// The OpenSSL wrappers App Attest relies on, checked against the vectors' published values.
@Suite struct AppAttestX509Tests {
    @Test func rootParsesAndIsTheAppleRoot() {
        let root = AppAttestVector.root
        #expect(hexString(SHA256Hasher.hash(root.der)).hasPrefix("1cb9823b"))
        #expect(hexString(SHA256Hasher.hash(root.der)).hasSuffix("42c932"))
        #expect(root.publicKeyUncompressedP256() == nil) // P-384
    }

    @Test(arguments: AppAttestVector.withAttestation)
    func leafFieldsMatchTheVector(_ v: AppAttestVector) throws {
        let chain = try AppAttestAttestationObject.parse(v.attestation!).get().certificateChain
        let leaf = try #require(X509Certificate(der: chain[0]))
        #expect(leaf.notBefore == v.leafNotBefore)
        #expect(leaf.notAfter == v.leafNotAfter)
        #expect(leaf.publicKeyUncompressedP256() == v.expectedPublicKey)
        let ext = try #require(leaf.extensionValue(oid: "1.2.840.113635.100.8.2"))
        #expect(Array(ext.prefix(6)) == [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20])
        #expect(leaf.extensionValue(oid: "1.2.3.4") == nil)
        #expect(leaf.extensionValue(oid: "basicConstraints") == nil) // names are not OIDs
        let intermediate = try #require(X509Certificate(der: chain[1]))
        #expect(X509ChainVerifier.verify(leaf: leaf, intermediates: [intermediate], root: AppAttestVector.root, at: v.verifyAt!))
        #expect(!X509ChainVerifier.verify(leaf: leaf, intermediates: [], root: AppAttestVector.root, at: v.verifyAt!))
    }

    /// `ECPublicKey(pem:)` reads the SubjectPublicKeyInfo PEM `openssl ec -pubout` writes, P-256 only.
    @Test(arguments: AppAttestVector.withAssertions)
    func publicKeyPEMRoundTrips(_ v: AppAttestVector) throws {
        let point = v.assertions[0].publicKey
        let spki: [UInt8] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
            0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ] + point
        let pem = "-----BEGIN PUBLIC KEY-----\n" + Data(spki).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END PUBLIC KEY-----\n"
        #expect(ECPublicKey(pem: pem)?.uncompressedPoint == point)
    }

    @Test func otherPublicKeyPEMsAreRefused() throws {
        let p384 = """
            -----BEGIN PUBLIC KEY-----
            MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAE1CfntZndetAQin58XGEatZu4aLN/2Odo
            MRhSZCsRiEiZuVlvM0zwN/aW/gQ+sgM2CUbJN0UViIJeY9RWj5aT1AAAI7BaD5hz
            1vXyR65kgY+aAp2a3IebMdnmW8DXNSC+
            -----END PUBLIC KEY-----
            """
        #expect(ECPublicKey(pem: p384) == nil)
        #expect(ECPublicKey(pem: try RSAPrivateKey.generate().publicKey.pem()) == nil)
        #expect(ECPublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n") == nil)
        #expect(ECPublicKey(pem: "") == nil)
    }

    @Test func malformedDERIsRefused() throws {
        let v = AppAttestVector.withAttestation[0]
        let der = try AppAttestAttestationObject.parse(v.attestation!).get().certificateChain[0]
        #expect(X509Certificate(der: []) == nil)
        #expect(X509Certificate(der: Array(der.dropLast())) == nil)
        #expect(X509Certificate(der: der + [0]) == nil)
        #expect(ECPublicKey(uncompressedP256: [UInt8](repeating: 0, count: 65)) == nil)
    }
}
