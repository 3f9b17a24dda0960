import Testing
import JOSE

@Suite struct Base64URLTests {
    @Test(arguments: [
        ("", [UInt8]()),
        ("QQ", [0x41]),
        ("QUI", [0x41, 0x42]),
        ("QUJD", [0x41, 0x42, 0x43]),
        ("-_8", [0xFB, 0xFF]),
        ("AAEC_w", [0x00, 0x01, 0x02, 0xFF]),
    ])
    func validInputDecodes(input: String, expected: [UInt8]) {
        #expect(Base64URL.decode(input) == expected)
    }

    @Test(arguments: [
        "QQ==", "QUI=", "QQ=",          // padding
        "+/8", "-/8", "+_8",            // standard alphabet characters
        "QU JD", " QUJD", "QUJD\n", "QU\tI",   // whitespace anywhere
        "Q", "QUJDR", "QUJDRUZHS",     // length % 4 == 1
        "QR", "QUJ", "AAEC_x",          // unused low bits set (non-canonical)
        "QU.D", "QU\u{0}D", "QUJé",     // other bytes
    ])
    func invalidInputIsRejected(input: String) {
        #expect(Base64URL.decode(input) == nil)
    }

    @Test func nonCanonicalLastCharacterIsRejected() {
        // "QQ" and "QR" both decode to "A" in a lenient decoder; only the canonical one is accepted.
        #expect(Base64URL.decode("QQ") == [0x41])
        #expect(Base64URL.decode("QR") == nil)
        #expect(Base64URL.decode("QUI") == [0x41, 0x42])
        #expect(Base64URL.decode("QUJ") == nil)
    }

    @Test func encodeRoundTripsAllLengths() {
        var bytes: [UInt8] = []
        for n in 0..<70 {
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(encoded.utf8.count % 4 != 1)
            #expect(Base64URL.decode(encoded) == bytes)
            bytes.append(UInt8(truncatingIfNeeded: n &* 37 &+ 251))
        }
    }

    @Test func everyAlphabetCharacterDecodes() {
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        let decoded = Base64URL.decode(alphabet)
        #expect(decoded != nil)
        #expect(decoded.map { Base64URL.encode($0) } == alphabet)
    }

    /// Every one of the 256 byte values, at each position of a quad and of a 2- and 3-character tail: accepted
    /// exactly when it is one of the 64 characters (the decoding table has no hole and no extra entry).
    @Test func everyByteOutsideTheAlphabetIsRejectedAtEveryPosition() {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for byte in 0...255 {
            let b = UInt8(byte)
            for (template, position) in [("AAAA", 0), ("AAAA", 1), ("AAAA", 2), ("AAAA", 3), ("AAAAAA", 4), ("AAAAAAA", 5),
                                         ("AAAAAAAA", 7)] {
                var input = Array(template.utf8)
                input[position] = b
                // The tail's last character carries unused bits: "A" (0) is the only choice that keeps them zero.
                let isLastOfTail = template.utf8.count % 4 != 0 && position == template.utf8.count - 1
                let decoded = input.withUnsafeBytes { Base64URL.decode($0) }
                let expected = alphabet.contains(b) && (!isLastOfTail || b == UInt8(ascii: "A"))
                #expect((decoded != nil) == expected, "byte \(byte) at \(position) of \(template.utf8.count)")
            }
        }
    }
}
