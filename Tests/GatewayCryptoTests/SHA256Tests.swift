import Testing
import GatewayCrypto

@Suite struct SHA256Tests {
    @Test func abcMatchesKnownAnswer() {
        // FIPS 180-2, appendix B.1.
        #expect(hexString(SHA256Hasher.hash(Array("abc".utf8))) ==
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func emptyInputMatchesKnownAnswer() {
        #expect(hexString(SHA256Hasher.hash([])) ==
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func incrementalUpdatesEqualOneShotAndHasherResets() {
        let hasher = SHA256Hasher()
        hasher.update(Array("a".utf8))
        hasher.update(Array("bc".utf8))
        let first = hasher.finish()
        hasher.update(Array("abc".utf8))
        #expect(first == SHA256Hasher.hash(Array("abc".utf8)))
        #expect(hasher.finish() == first)
    }
}

@Suite struct SecureRandomTests {
    @Test func returnsRequestedCountOfDistinctBytes() {
        #expect(SecureRandom.bytes(0).isEmpty)
        let a = SecureRandom.bytes(32), b = SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
    }
}
