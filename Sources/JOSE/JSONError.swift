/// Why a document is not strict JSON, and the byte offset where the parser noticed.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed list of reasons.
    public enum Reason: String, Sendable {
        case tooLarge, tooDeep, tooManyElements
        case unexpectedEnd, unexpectedCharacter, trailingData
        case invalidLiteral, invalidNumber, numberTooLong
        case controlCharacterInString, invalidEscape, loneSurrogate, invalidUTF8
        case duplicateKey
    }

    public let reason: Reason
    /// Byte offset into the input.
    public let offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String { "invalid JSON: \(reason.rawValue) at byte \(offset)" }
}
