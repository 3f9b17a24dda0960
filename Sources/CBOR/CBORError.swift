/// Why CBOR input was rejected, and roughly where (a byte offset into the input).
public struct CBORError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed list of CBOR decoding failures.
    public enum Code: Sendable, Equatable {
        /// The input ended inside an item (also: a declared length or count larger than the remaining input).
        case truncated
        /// Reserved additional-information values, a non-canonical simple value, a stray break, or libcbor refused.
        case malformed
        /// An indefinite-length string, array or map. These are rejected, never accepted (see `CBORDecoder`).
        case indefiniteLength
        /// More than `CBORDecoderLimits.maxInputBytes`.
        case inputTooLarge
        /// Deeper than `CBORDecoderLimits.maxDepth`.
        case tooDeep
        /// More than `CBORDecoderLimits.maxItems` items.
        case tooManyItems
        /// A text string that is not valid UTF-8.
        case invalidUTF8
        /// A map with the same key twice.
        case duplicateMapKey
        /// Bytes left over after the item where the whole input had to be one item.
        case trailingBytes
        /// libcbor could not allocate.
        case outOfMemory
    }

    /// What went wrong.
    public let code: Code
    /// Byte offset into the input where the problem was found (approximate for libcbor's own errors).
    public let offset: Int

    public init(_ code: Code, at offset: Int) {
        self.code = code
        self.offset = offset
    }

    public var description: String { "CBORError(\(code) at byte \(offset))" }
}
