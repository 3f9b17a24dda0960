/// A JSON number kept as its literal text, so no precision is lost and nothing is rounded behind the caller's back.
///
/// `int64` is offered only for plain integer literals (`-?digits`, no fraction, no exponent) that fit in 64 bits:
/// a claim such as `exp` written as `1.7e9` or `17000000000000000000000` is then simply "not an integer", which
/// a verifier refuses, instead of being silently converted.
public struct JSONNumber: Sendable, Equatable {
    /// The number exactly as written in the document (already checked against the RFC 8259 grammar).
    public let literal: String
    /// The value when `literal` is a plain integer in Int64 range; nil otherwise.
    public let int64: Int64?

    /// A number from an integer.
    public init(_ value: Int64) {
        literal = String(value)
        int64 = value
    }

    /// A number from its literal text; nil unless `literal` is exactly one RFC 8259 number (no surrounding space).
    public init?(validating literal: String) {
        guard let first = literal.utf8.first, first == UInt8(ascii: "-") || (first >= 0x30 && first <= 0x39),
              case .number(let n)? = try? StrictJSON.parse(Array(literal.utf8)), n.literal == literal else { return nil }
        self = n
    }

    /// From a literal the parser has already validated.
    init(validatedLiteral bytes: UnsafeRawBufferPointer, isInteger: Bool) {
        literal = String(decoding: bytes, as: UTF8.self)
        int64 = isInteger ? Self.parseInt64(bytes) : nil
    }

    /// Parses `-?digits` with overflow detection (accumulating negatively so Int64.min is reachable).
    private static func parseInt64(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        var i = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { i = 1 }
        var value: Int64 = 0
        while i < bytes.count {
            let digit = Int64(bytes[i] &- UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.subtractingReportingOverflow(digit)
            if o1 || o2 { return nil }
            value = next
            i += 1
        }
        if negative { return value }
        return value == .min ? nil : -value
    }

    public static func == (a: JSONNumber, b: JSONNumber) -> Bool { a.literal == b.literal }
}
