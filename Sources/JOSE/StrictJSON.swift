/// A strict RFC 8259 JSON parser for untrusted input (token headers and claims, key sets).
///
/// Strict on purpose: whatever two JSON parsers disagree on (duplicate keys, trailing data, lone surrogates,
/// invalid UTF-8, a BOM, NaN) is a way to make the gateway and the token issuer or an upstream read the same bytes
/// differently. So everything outside the RFC grammar is an error, as are duplicate keys, which the RFC leaves
/// undefined. Only the four RFC whitespace characters are skipped. No Foundation.
public enum StrictJSON {
    /// Resource limits, so a hostile document costs bounded time, memory and stack.
    public struct Limits: Sendable {
        /// Largest document in bytes.
        public var maxBytes: Int
        /// Deepest nesting of arrays and objects; the outermost container is depth 1. Parsing recurses, so this
        /// also bounds stack use.
        public var maxDepth: Int
        /// Most values (of any kind, containers included) in one document.
        public var maxElements: Int
        /// Longest number literal; real claims and keys never come close.
        public var maxNumberLength: Int

        public init(maxBytes: Int = 1 << 20, maxDepth: Int = 32, maxElements: Int = 100_000, maxNumberLength: Int = 64) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
            self.maxElements = maxElements
            self.maxNumberLength = maxNumberLength
        }

        /// 1 MiB, depth 32, 100 000 values, 64-character numbers.
        public static let `default` = Limits()
    }

    /// Parses one complete document; any byte after the value other than whitespace is an error.
    public static func parse(_ bytes: UnsafeRawBufferPointer, limits: Limits = .default) throws(JSONError) -> JSONValue {
        var parser = StrictJSONParser(bytes: bytes, limits: limits)
        return try parser.parseDocument()
    }

    /// Array convenience for `parse(_: UnsafeRawBufferPointer, limits:)`.
    public static func parse(_ bytes: [UInt8], limits: Limits = .default) throws(JSONError) -> JSONValue {
        let result = bytes.withUnsafeBytes { (raw) -> Result<JSONValue, JSONError> in
            do throws(JSONError) { return .success(try parse(raw, limits: limits)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
