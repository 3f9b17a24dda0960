import Testing
import GatewayCrypto

/// AES-256 key wrap and GCM against published vectors, and every tampering refused.
@Suite struct AESTests {
    static func hex(_ s: String) -> [UInt8] {
        let c = Array(s.utf8.filter { $0 != 0x20 })
        return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    // RFC 3394 §4.6: 256 bits of key data with a 256-bit KEK.
    static let kek = hex("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
    static let keyData = hex("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
    static let wrapped = hex("28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21")

    @Test func keyWrapMatchesRFC3394Section4_6() {
        #expect(AES256.wrapKey(Self.keyData, kek: Self.kek) == Self.wrapped)
        #expect(AES256.unwrapKey(Self.wrapped, kek: Self.kek) == Self.keyData)
    }

    @Test func unwrapRefusesAWrongKeyAndEveryFlippedByte() {
        var other = Self.kek
        other[0] ^= 1
        #expect(AES256.unwrapKey(Self.wrapped, kek: other) == nil)
        for i in Self.wrapped.indices {
            var t = Self.wrapped
            t[i] ^= 0x80
            #expect(AES256.unwrapKey(t, kek: Self.kek) == nil)
        }
        #expect(AES256.unwrapKey(Array(Self.wrapped.dropLast(8)), kek: Self.kek) != Self.keyData)
        #expect(AES256.unwrapKey(Array(Self.wrapped.dropLast(1)), kek: Self.kek) == nil)
        #expect(AES256.unwrapKey(Self.wrapped, kek: Array(Self.kek.prefix(16))) == nil)
    }

    // RFC 7516 Appendix A.1: A256GCM with the example's CEK, IV and AAD (the protected header's base64url).
    static let cek: [UInt8] = [177, 161, 244, 128, 84, 143, 225, 115, 63, 180, 3, 255, 107, 154, 212, 246, 138, 7, 110, 91, 112,
                               46, 34, 105, 47, 130, 203, 46, 122, 234, 64, 252]
    static let iv: [UInt8] = [227, 197, 117, 252, 2, 219, 233, 68, 180, 225, 77, 219]
    static let aad = Array("eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ".utf8)
    static let plaintext = Array("The true sign of intelligence is not knowledge but imagination.".utf8)
    static let ciphertext: [UInt8] = [229, 236, 166, 241, 53, 191, 115, 196, 174, 43, 73, 109, 39, 122, 233, 96, 140, 206, 120, 52,
                                      51, 237, 48, 11, 190, 219, 186, 80, 111, 104, 50, 142, 47, 167, 59, 61, 181, 127, 196, 21, 40,
                                      82, 242, 32, 123, 143, 168, 226, 73, 216, 176, 144, 138, 247, 106, 60, 16, 205, 160, 109, 64,
                                      63, 192]
    static let tag: [UInt8] = [92, 80, 104, 49, 133, 25, 161, 215, 173, 101, 219, 211, 136, 91, 210, 145]

    @Test func gcmMatchesRFC7516AppendixA1() throws {
        let sealed = try #require(AES256.gcmSeal(Self.plaintext, key: Self.cek, iv: Self.iv, aad: Self.aad))
        #expect(sealed.ciphertext == Self.ciphertext)
        #expect(sealed.tag == Self.tag)
        #expect(AES256.gcmOpen(Self.ciphertext, key: Self.cek, iv: Self.iv, aad: Self.aad, tag: Self.tag) == Self.plaintext)
    }

    @Test func gcmRefusesTamperedCiphertextTagIVAndAAD() {
        func open(_ c: [UInt8] = Self.ciphertext, iv: [UInt8] = Self.iv, aad: [UInt8] = Self.aad, tag: [UInt8] = Self.tag) -> [UInt8]? {
            AES256.gcmOpen(c, key: Self.cek, iv: iv, aad: aad, tag: tag)
        }
        var c = Self.ciphertext; c[10] ^= 1
        var t = Self.tag; t[15] ^= 1
        var v = Self.iv; v[0] ^= 1
        var a = Self.aad; a[0] ^= 1
        #expect(open(c) == nil)
        #expect(open(tag: t) == nil)
        #expect(open(iv: v) == nil)
        #expect(open(aad: a) == nil)
        #expect(open(aad: []) == nil)
        #expect(open(tag: Array(Self.tag.prefix(12))) == nil)
        #expect(open(iv: Self.iv + [0]) == nil)
    }
}
