import Foundation
import Testing
import GatewayCrypto

/// One 2048-bit key generated per test run (generation is slow); no key material is committed.
let testKey: RSAPrivateKey = try! RSAPrivateKey.generate()

@Suite struct RSAKeyTests {
    let message = Array("header.payload".utf8)

    @Test func generatedKeySignsAndVerifies() throws {
        let signature = try testKey.signRS256(message)
        #expect(signature.count == 256)
        #expect(testKey.publicKey.bits == 2048)
        #expect(testKey.publicKey.verifyRS256(signature: signature, message: message))
    }

    @Test func flippedBitInMessageFails() throws {
        let signature = try testKey.signRS256(message)
        for bit in [0, 7, 8 * message.count - 1] {
            var tampered = message
            tampered[bit / 8] ^= 1 << (bit % 8)
            #expect(!testKey.publicKey.verifyRS256(signature: signature, message: tampered))
        }
    }

    @Test func flippedBitInSignatureFails() throws {
        let signature = try testKey.signRS256(message)
        for bit in [0, 1000, 2047] {
            var tampered = signature
            tampered[bit / 8] ^= 1 << (bit % 8)
            #expect(!testKey.publicKey.verifyRS256(signature: tampered, message: message))
        }
    }

    @Test func signatureOfWrongLengthFails() throws {
        let signature = try testKey.signRS256(message)
        #expect(!testKey.publicKey.verifyRS256(signature: [0] + signature, message: message))
        #expect(!testKey.publicKey.verifyRS256(signature: Array(signature.dropFirst()), message: message))
        #expect(!testKey.publicKey.verifyRS256(signature: [], message: message))
    }

    @Test func signatureFromAnotherKeyFails() throws {
        let other = try RSAPrivateKey.generate()
        let signature = try other.signRS256(message)
        #expect(!testKey.publicKey.verifyRS256(signature: signature, message: message))
    }

    @Test func emptyMessageSignsAndVerifies() throws {
        let signature = try testKey.signRS256([])
        #expect(testKey.publicKey.verifyRS256(signature: signature, message: []))
    }

    @Test func modulusBelow2048BitsIsRejected() {
        var n = SecureRandom.bytes(128)   // 1024 bits, top bit set, odd
        n[0] |= 0x80
        n[127] |= 1
        #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: n, exponent: [1, 0, 1]) }
        // Leading zeros do not make a modulus bigger.
        #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: [0] + n + [], exponent: [1, 0, 1]) }
    }

    @Test func generatingSmallKeyIsRejected() {
        #expect(throws: CryptoError.self) { try RSAPrivateKey.generate(bits: 1024) }
    }

    @Test func badExponentsAreRejected() {
        let n = testKey.modulus
        for e: [UInt8] in [[], [0], [1], [2], [1, 0, 0], [0, 1], [1, 0, 0, 0, 0, 0, 0, 0, 1]] {
            #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: n, exponent: e) }
        }
    }

    @Test func evenModulusIsRejected() {
        var n = testKey.modulus
        n[n.count - 1] &= 0xFE
        #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: n, exponent: [1, 0, 1]) }
    }

    @Test func modulusAndExponentAreBigEndianWithoutLeadingZero() {
        #expect(testKey.modulus.count == 256)
        #expect(testKey.modulus.first! >= 0x80)
        #expect(testKey.exponent == [0x01, 0x00, 0x01])
    }

    @Test func keyFromModulusAndExponentVerifiesLikePEMKey() throws {
        let signature = try testKey.signRS256(message)
        let fromNumbers = try RSAPublicKey(modulus: [0, 0] + testKey.modulus, exponent: testKey.exponent)
        let fromPEM = try RSAPublicKey(pem: testKey.publicKey.pem())
        #expect(fromNumbers.bits == 2048 && fromPEM.bits == 2048)
        #expect(fromNumbers.verifyRS256(signature: signature, message: message))
        #expect(fromPEM.verifyRS256(signature: signature, message: message))
        #expect(fromNumbers.pem() == fromPEM.pem())
    }

    /// Against OpenSSL's own command: its SHA-256 PKCS#1 v1.5 signature verifies; the same key signing SHA-384 or
    /// SHA-1 of the message (another DigestInfo inside the padding) does not, nor a PSS signature.
    @Test func onlyAPKCS1SHA256SignatureMadeByTheOpenSSLCommandVerifies() throws {
        let dir = NSTemporaryDirectory() + "rs256-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try testKey.pemPKCS8().write(toFile: dir + "/key.pem", atomically: true, encoding: .utf8)
        try Data(message).write(to: URL(fileURLWithPath: dir + "/msg"))
        func sign(_ options: [String]) throws -> [UInt8] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = ["dgst"] + options + ["-sign", dir + "/key.pem", "-out", dir + "/sig", dir + "/msg"]
            try p.run()
            p.waitUntilExit()
            #expect(p.terminationStatus == 0)
            return Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/sig")))
        }
        #expect(testKey.publicKey.verifyRS256(signature: try sign(["-sha256"]), message: message))
        #expect(!testKey.publicKey.verifyRS256(signature: try sign(["-sha384"]), message: message))
        #expect(!testKey.publicKey.verifyRS256(signature: try sign(["-sha1"]), message: message))
        #expect(!testKey.publicKey.verifyRS256(signature: try sign(["-sha256", "-sigopt", "rsa_padding_mode:pss"]), message: message))
    }

    @Test func privateKeyPEMRoundTrips() throws {
        let pem = testKey.pemPKCS8()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let reloaded = try RSAPrivateKey(pem: pem)
        #expect(reloaded.modulus == testKey.modulus)
        #expect(reloaded.pemPKCS8() == pem)
        let signature = try reloaded.signRS256(message)
        #expect(testKey.publicKey.verifyRS256(signature: signature, message: message))
    }

    @Test func publicPEMIsSubjectPublicKeyInfoWithoutPrivateMaterial() throws {
        let pem = testKey.publicKey.pem()
        #expect(pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: pem) }
    }

    @Test func garbagePEMIsRejected() {
        #expect(throws: CryptoError.self) { try RSAPublicKey(pem: "") }
        #expect(throws: CryptoError.self) { try RSAPublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n") }
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: "not a key") }
    }

    @Test func verificationIsSafeFromManyThreadsAtOnce() async throws {
        let signature = try testKey.signRS256(message)
        let key = testKey.publicKey, message = self.message
        let results = await withTaskGroup(of: Bool.self) { group in
            for k in 0..<64 {
                group.addTask { key.verifyRS256(signature: signature, message: k % 2 == 0 ? message : message + [0]) }
            }
            var out: [Bool] = []
            for await r in group { out.append(r) }
            return out
        }
        #expect(results.filter { $0 }.count == 32)
    }
}
