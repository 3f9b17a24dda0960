import Testing
import JOSE

private func parse(_ text: String) throws(JSONError) -> JSONValue { try StrictJSON.parse(Array(text.utf8)) }

private func reason(_ bytes: [UInt8]) -> JSONError.Reason? {
    do throws(JSONError) { _ = try StrictJSON.parse(bytes); return nil } catch { return error.reason }
}

private func reason(_ text: String) -> JSONError.Reason? { reason(Array(text.utf8)) }

@Suite struct StrictJSONTests {
    @Test func acceptsAllValueKinds() throws {
        let v = try parse(#" {"a": [1, -2.5e+3, true, false, null, "x"], "b": {}} "#)
        let o = try #require(v.objectValue)
        #expect(o.keys == ["a", "b"])
        #expect(o["a"] == [1, .number(JSONNumber(validating: "-2.5e+3")!), true, false, nil, "x"])
        #expect(o["b"] == .object(JSONObject(members: [])!))
        #expect(o["missing"] == nil)
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"a":{"b":1,"b":1}}"#, #"[{"x":[{"k":1,"k":1}]}]"#, #"{"a":1,"\u0061":2}"#,
    ])
    func duplicateKeysAreRejectedAtAnyDepth(text: String) {
        #expect(reason(text) == .duplicateKey)
    }

    @Test func trailingCommasAreRejected() {
        #expect(reason(#"{"a":1,}"#) == .unexpectedCharacter)
        #expect(reason("[1,]") == .unexpectedCharacter)
    }

    @Test func trailingGarbageIsRejected() {
        #expect(reason(#"{"a":1}x"#) == .trailingData)
        #expect(reason(#"{"a":1}{}"#) == .trailingData)
        #expect(reason("{}\u{0}") == .trailingData)
    }

    @Test func leadingBOMIsRejected() {
        #expect(reason([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .unexpectedCharacter)
    }

    @Test(arguments: ["NaN", "Infinity", "-Infinity", "+1", "01", ".5", "1.", "1e", "0x10", "-"])
    func nonRFCNumbersAreRejected(text: String) {
        #expect(reason("[\(text)]") != nil)
    }

    @Test func loneSurrogatesAreRejected() {
        #expect(reason(#""\ud800""#) == .loneSurrogate)
        #expect(reason(#""\udc00""#) == .loneSurrogate)
        #expect(reason(#""\ud800\u0041""#) == .loneSurrogate)
        #expect(reason(#""\ud800x""#) == .loneSurrogate)
    }

    @Test func surrogatePairsAndEscapesDecode() throws {
        #expect(try parse(#""\ud83d\ude00""#) == "😀")
        #expect(try parse(#""\"\\\/\b\f\n\r\t\u00e9\u20AC""#) == "\"\\/\u{8}\u{C}\n\r\té€")
        #expect(try parse("\"é😀\"") == "é😀")
        #expect(reason(#""\x""#) == .invalidEscape)
        #expect(reason(#""\u12G4""#) == .invalidEscape)
    }

    @Test func controlCharactersInStringsAreRejected() {
        #expect(reason("\"a\u{1}b\"") == .controlCharacterInString)
        #expect(reason("\"a\nb\"") == .controlCharacterInString)
        #expect(reason("\"é\tb\"") == .controlCharacterInString)
    }

    @Test(arguments: [
        [0x22, 0xC0, 0xAF, 0x22],               // overlong '/'
        [0x22, 0xED, 0xA0, 0x80, 0x22],         // UTF-8-encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],   // above U+10FFFF
        [0x22, 0x80, 0x22],                     // lone continuation byte
        [0x22, 0xE2, 0x82, 0x22],               // truncated sequence
        [0x22, 0xFF, 0x22],
    ] as [[UInt8]])
    func invalidUTF8IsRejected(bytes: [UInt8]) {
        #expect(reason(bytes) == .invalidUTF8)
    }

    @Test func depth32IsAcceptedAndDepth33Rejected() throws {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(throws: Never.self) { try parse(ok) }
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(reason(deep) == .tooDeep)
        let deepObject = String(repeating: #"{"a":"#, count: 33) + "1" + String(repeating: "}", count: 33)
        #expect(reason(deepObject) == .tooDeep)
    }

    @Test func integersHaveInt64ViewOnlyWhenPlainAndInRange() throws {
        let v = try parse("[9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809, 1.0, 1e3, -0, 1700000000]")
        let a = try #require(v.arrayValue)
        #expect(a.map(\.int64Value) == [.max, .min, nil, nil, nil, nil, 0, 1_700_000_000])
        #expect(a[2] == .number(JSONNumber(validating: "9223372036854775808")!))
    }

    @Test func sizeLimitsApply() {
        let limits = StrictJSON.Limits(maxBytes: 10)
        #expect(throws: JSONError(.tooLarge, at: 0)) { try StrictJSON.parse(Array("[1,2,3,4,5]".utf8), limits: limits) }
        #expect(reason("[" + String(repeating: "1", count: 65) + "]") == .numberTooLong)
        let many = StrictJSON.Limits(maxElements: 3)
        #expect(throws: JSONError.self) { try StrictJSON.parse(Array("[1,2,3]".utf8), limits: many) }
    }

    @Test(arguments: ["", " ", "tru", "nul", "True", "{", "[", #"{"a"}"#, #"{"a" 1}"#, #"{a:1}"#, "'a'", #""abc"#])
    func malformedDocumentsAreRejected(text: String) {
        #expect(reason(text) != nil)
    }

    @Test func encodingRoundTrips() throws {
        let value: JSONValue = ["s": "q\"\\\n\u{1}é😀", "n": 1700000000, "a": [true, nil, -1], "o": ["k": "v"]]
        let text = JSONEncoding.encode(value)
        #expect(text.hasPrefix(#"{"s":"q\"\\\n\u0001é😀","n":1700000000"#))
        #expect(try parse(text) == value)
        #expect(JSONEncoding.string("a\"b") == #""a\"b""#)
    }

    @Test func objectBuiltFromMembersKeepsOrderAndRefusesDuplicates() {
        let o = JSONObject([("b", 1), ("a", "x")])
        #expect(o.keys == ["b", "a"] && o["a"] == "x" && o.count == 2)
        #expect(JSONObject(members: [("a", 1), ("a", 2)]) == nil)
    }

    @Test func objectEqualityIgnoresMemberOrder() throws {
        #expect(try parse(#"{"a":1,"b":2}"#) == parse(#"{"b":2,"a":1}"#))
        #expect(try parse(#"{"a":1,"b":2}"#) != parse(#"{"a":1,"b":3}"#))
    }

    @Test func mutatedDocumentsNeverCrashAndReencodeStably() throws {
        let seed = Array(#"{"a":[1,-2.5e3,"\u00e9\ud83d\ude00",{"b":null,"c":true}],"d":"x"}"#.utf8)
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            var doc = seed
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                doc[Int.random(in: 0..<doc.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            if let value = try? StrictJSON.parse(doc) {
                #expect(try StrictJSON.parse(Array(JSONEncoding.encode(value).utf8)) == value)
            }
        }
    }
}
