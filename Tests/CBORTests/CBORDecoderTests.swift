import CBOR
import Testing

@Suite struct CBORDecoderTests {
    let decoder = CBORDecoder()

    @Test func scalarsDecode() throws {
        #expect(try decoder.decode([0x18, 0x64]).get() == .unsigned(100))
        #expect(try decoder.decode([0x38, 0x63]).get() == .negative(99))
        #expect(try decoder.decode([0x38, 0x63]).get().int64Value == -100)
        #expect(try decoder.decode([0x43, 1, 2, 3]).get() == .bytes([1, 2, 3]))
        #expect(try decoder.decode([0x62, 0x68, 0x69]).get() == .text("hi"))
        #expect(try decoder.decode([0xf5]).get() == .bool(true))
        #expect(try decoder.decode([0xf6]).get() == .null)
        #expect(try decoder.decode([0xf9, 0x3c, 0x00]).get() == .float(1.0))
        #expect(try decoder.decode([0xc1, 0x1a, 0, 0, 0, 1]).get() == .tag(1, .unsigned(1)))
        #expect(try decoder.decode([0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).get() == .unsigned(.max))
    }

    @Test func nestedStructuresRoundTrip() throws {
        let value = CBORValue.map([(.text("a"), .array([.unsigned(1), .negative(0), .bytes([])])),
                                   (.negative(1), .tag(24, .bytes([0xa0]))), (.unsigned(7), .map([]))])
        #expect(try decoder.decode(TestCBOR.encode(value)).get() == value)
    }

    @Test func prefixDecodingReportsBytesConsumed() throws {
        let decoded = try decoder.decodePrefix([0x82, 0x01, 0x02, 0xff, 0xee]).get()
        #expect(decoded.value == .array([.unsigned(1), .unsigned(2)]))
        #expect(decoded.bytesConsumed == 3)
    }

    @Test func trailingBytesAreRejectedByWholeInputDecode() {
        #expect(decoder.decode([0x01, 0x02]) == .failure(CBORError(.trailingBytes, at: 1)))
    }

    @Test func indefiniteLengthItemsAreRejected() {
        for input: [UInt8] in [[0x5f, 0x41, 0x00, 0xff], [0x7f, 0xff], [0x9f, 0xff], [0xbf, 0xff], [0x81, 0x9f, 0xff]] {
            #expect(codeOf(decoder.decode(input)) == .indefiniteLength)
        }
    }

    @Test func malformedHeadersAreRejected() {
        #expect(codeOf(decoder.decode([0x1c])) == .malformed)
        #expect(codeOf(decoder.decode([0xff])) == .malformed)
        #expect(codeOf(decoder.decode([0xf8, 0x10])) == .malformed)
        #expect(codeOf(decoder.decode([])) == .truncated)
        #expect(codeOf(decoder.decode([0x62, 0x68])) == .truncated)
    }

    @Test func hugeDeclaredCountIsRejectedBeforeLibcborAllocates() {
        #expect(codeOf(decoder.decode([0x9b, 0, 0, 0, 1, 0, 0, 0, 0, 0x00])) == .truncated)
        #expect(codeOf(decoder.decode([0xba, 0xff, 0xff, 0xff, 0xff])) == .truncated)
        #expect(codeOf(decoder.decode([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])) == .truncated)
    }

    @Test func depthLimitIsEnforced() {
        let sixteen = [UInt8](repeating: 0x81, count: 15) + [0x00]
        #expect((try? decoder.decode(sixteen).get()) != nil)
        let seventeen = [UInt8](repeating: 0x81, count: 16) + [0x00]
        #expect(codeOf(decoder.decode(seventeen)) == .tooDeep)
        #expect(codeOf(decoder.decode([UInt8](repeating: 0xc1, count: 40) + [0x00])) == .tooDeep)
    }

    @Test func itemAndSizeLimitsAreEnforced() {
        let small = CBORDecoder(limits: CBORDecoderLimits(maxInputBytes: 8, maxDepth: 16, maxItems: 3))
        #expect(codeOf(small.decode([0x83, 1, 2, 3])) == .tooManyItems)
        #expect((try? small.decode([0x82, 1, 2]).get()) != nil)
        #expect(codeOf(small.decode([UInt8](repeating: 0, count: 9))) == .inputTooLarge)
    }

    @Test func duplicateMapKeysAreRejected() {
        #expect(codeOf(decoder.decode([0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02])) == .duplicateMapKey)
    }

    @Test func invalidUTF8IsRejected() {
        // libcbor 0.8 already refuses it (.malformed); the Swift-side check is the second line of defence.
        let code = codeOf(decoder.decode([0x62, 0xc3, 0x28]))
        #expect(code == .invalidUTF8 || code == .malformed)
    }

    private func codeOf<T>(_ result: Result<T, CBORError>) -> CBORError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }
}
