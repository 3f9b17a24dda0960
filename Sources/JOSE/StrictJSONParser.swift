/// The recursive-descent parser behind `StrictJSON`: bytes in, a `JSONValue` or a `JSONError` out, no I/O.
struct StrictJSONParser {
    private let bytes: UnsafeRawBufferPointer
    private let limits: StrictJSON.Limits
    private var i = 0
    private var elements = 0

    /// Members a top-level object has room for before it grows (an App Check token's claims: 8).
    static let topLevelCapacity = 8

    init(bytes: UnsafeRawBufferPointer, limits: StrictJSON.Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    mutating func parseDocument() throws(JSONError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else { throw JSONError(.tooLarge, at: 0) }
        skipWhitespace()
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard i == bytes.count else { throw JSONError(.trailingData, at: i) }
        return value
    }

    /// Only the RFC's four: a BOM, NBSP or form feed is not whitespace.
    private mutating func skipWhitespace() {
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
        elements += 1
        guard elements <= limits.maxElements else { throw JSONError(.tooManyElements, at: i) }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw JSONError(.unexpectedCharacter, at: i)
        }
    }

    private mutating func expectLiteral(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw JSONError(.invalidLiteral, at: i) }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw JSONError(.invalidLiteral, at: i) }
        i += n
    }

    private mutating func expect(_ byte: UInt8) throws(JSONError) {
        guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
        guard bytes[i] == byte else { throw JSONError(.unexpectedCharacter, at: i) }
        i += 1
    }

    private mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= limits.maxDepth else { throw JSONError(.tooDeep, at: i) }
        i += 1
        var members: [(String, JSONValue)] = []
        var index: [String: Int] = [:]
        if depth == 1 {
            // The document's own object (a JWS header, a claims set: a handful of members): room for them up front,
            // instead of growing both by doubling. Nested objects start empty, so no input multiplies its memory.
            members.reserveCapacity(Self.topLevelCapacity)
            index.reserveCapacity(Self.topLevelCapacity)
        }
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "}") { i += 1; return .object(JSONObject(validatedMembers: [], index: [:])) }
        while true {
            // After '{' or ',' only a key may follow: this is what refuses a trailing comma.
            guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
            guard bytes[i] == UInt8(ascii: "\"") else { throw JSONError(.unexpectedCharacter, at: i) }
            let keyOffset = i
            let key = try parseString()
            // Duplicate keys are undefined behaviour in RFC 8259: parsers keep the first, the last or both. Refuse
            // them so no other parser can read a different "alg" or "sub" out of the same bytes.
            guard index.updateValue(members.count, forKey: key) == nil else { throw JSONError(.duplicateKey, at: keyOffset) }
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            members.append((key, try parseValue(depth: depth)))
            skipWhitespace()
            guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
            if bytes[i] == UInt8(ascii: "}") { i += 1; break }
            try expect(UInt8(ascii: ","))
            skipWhitespace()
        }
        return .object(JSONObject(validatedMembers: members, index: index))
    }

    private mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= limits.maxDepth else { throw JSONError(.tooDeep, at: i) }
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < bytes.count && bytes[i] == UInt8(ascii: "]") { i += 1; return .array([]) }
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard i < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
            if bytes[i] == UInt8(ascii: "]") { i += 1; break }
            try expect(UInt8(ascii: ","))
            skipWhitespace()
            // "[1,]": parseValue sees ']' and reports an unexpected character.
        }
        return .array(elements)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` and nothing else: no NaN, Infinity, leading '+',
    /// leading zeros, bare '.' or hexadecimal.
    private mutating func parseNumber() throws(JSONError) -> JSONNumber {
        let start = i
        var isInteger = true
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, isDigit(bytes[i]) else { throw JSONError(.invalidNumber, at: i) }
        if bytes[i] == UInt8(ascii: "0") { i += 1 } else { skipDigits() }
        if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw JSONError(.invalidNumber, at: i) }
            skipDigits()
        }
        if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
            isInteger = false
            i += 1
            if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw JSONError(.invalidNumber, at: i) }
            skipDigits()
        }
        guard i - start <= limits.maxNumberLength else { throw JSONError(.numberTooLong, at: start) }
        return JSONNumber(validatedLiteral: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), isInteger: isInteger)
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while i < bytes.count && isDigit(bytes[i]) { i += 1 }
    }

    /// A string starting at the opening quote. Fast path: plain printable ASCII is copied in one go.
    private mutating func parseString() throws(JSONError) -> String {
        i += 1
        let start = i
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                let s = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                i += 1
                return s
            }
            if b == UInt8(ascii: "\\") || b >= 0x80 { break }
            if b < 0x20 { throw JSONError(.controlCharacterInString, at: i) }
            i += 1
        }
        var out = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<i]))
        try parseStringSlow(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Escapes and non-ASCII: every byte is checked, so the result is valid UTF-8 without replacement characters.
    private mutating func parseStringSlow(into out: inout [UInt8]) throws(JSONError) {
        while i < bytes.count {
            let b = bytes[i]
            switch b {
            case UInt8(ascii: "\""):
                i += 1
                return
            case UInt8(ascii: "\\"):
                try parseEscape(into: &out)
            case 0x00..<0x20:
                throw JSONError(.controlCharacterInString, at: i)
            case 0x20..<0x80:
                out.append(b)
                i += 1
            default:
                let n = try utf8SequenceLength(at: i)
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)]))
                i += n
            }
        }
        throw JSONError(.unexpectedEnd, at: i)
    }

    private mutating func parseEscape(into out: inout [UInt8]) throws(JSONError) {
        let at = i
        guard i + 1 < bytes.count else { throw JSONError(.unexpectedEnd, at: i) }
        let c = bytes[i + 1]
        i += 2
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(c)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4(at: at))
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed at once by an escaped low surrogate.
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw JSONError(.loneSurrogate, at: at)
                }
                i += 2
                let low = UInt32(try hex4(at: at))
                guard (0xDC00...0xDFFF).contains(low) else { throw JSONError(.loneSurrogate, at: at) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw JSONError(.loneSurrogate, at: at)
            }
            // Not a surrogate now, so always a valid scalar.
            out.append(contentsOf: Unicode.Scalar(scalar)!.utf8)
        default:
            throw JSONError(.invalidEscape, at: at)
        }
    }

    /// Four hex digits at `i` (after "\u"), either case.
    private mutating func hex4(at escape: Int) throws(JSONError) -> UInt16 {
        guard i + 4 <= bytes.count else { throw JSONError(.invalidEscape, at: escape) }
        var value: UInt16 = 0
        for k in 0..<4 {
            let c = bytes[i + k]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: throw JSONError(.invalidEscape, at: escape)
            }
            value = value << 4 | UInt16(digit)
        }
        i += 4
        return value
    }

    /// Length of the well-formed UTF-8 sequence at `p` (Unicode Table 3-7): no overlong forms, no encoded
    /// surrogates, nothing above U+10FFFF.
    private func utf8SequenceLength(at p: Int) throws(JSONError) -> Int {
        let b0 = bytes[p]
        let length: Int, secondRange: ClosedRange<UInt8>
        switch b0 {
        case 0xC2...0xDF: length = 2; secondRange = 0x80...0xBF
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3; secondRange = 0x80...0xBF
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4; secondRange = 0x80...0xBF
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: throw JSONError(.invalidUTF8, at: p)
        }
        guard p + length <= bytes.count, secondRange.contains(bytes[p + 1]) else { throw JSONError(.invalidUTF8, at: p) }
        for k in 2..<max(length, 2) where bytes[p + k] & 0xC0 != 0x80 { throw JSONError(.invalidUTF8, at: p) }
        return length
    }
}
