import Testing
import GatewayCrypto
import JOSE

/// ES256 tokens as Apple's servers take them: the header, and a signature that verifies as R ‖ S with the key.
@Suite struct JWSSignerES256Tests {
    @Test func tokenHasTheAppleShapeAndVerifies() throws {
        let key = try ECPrivateKey.generate(.p256)
        let token = try JWSSigner.signES256(claims: ["iss": "ABCDE12345", "iat": .number(JSONNumber(1_800_000_000))],
                                            kid: "KEY123", key: key)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try StrictJSON.parse(Base64URL.decode(parts[0])!)
        #expect(header == ["alg": "ES256", "kid": "KEY123"])
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        // R ‖ S back to DER by hand-free means: verify with the public key through a DER signature OpenSSL builds.
        let publicKey = try #require(ECPublicKey(uncompressedP256: try key.uncompressedPublicPoint()))
        #expect(publicKey.verifyES256(rawSignature: signature, message: Array((parts[0] + "." + parts[1]).utf8)))
        var tampered = signature
        tampered[10] ^= 1
        #expect(!publicKey.verifyES256(rawSignature: tampered, message: Array((parts[0] + "." + parts[1]).utf8)))
    }

    @Test func aP384KeyCannotSignES256() throws {
        let key = try ECPrivateKey.generate(.p384)
        #expect(throws: (any Error).self) { try key.signES256([1, 2, 3]) }
    }
}
