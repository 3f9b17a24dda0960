/// One decoded CBOR data item (RFC 8949), detached from libcbor: plain Swift values, safe to keep and share.
///
/// Integers keep CBOR's own split into major types 0 and 1, so every encodable integer is representable:
/// `.negative(n)` stands for the integer `-1 - n`. Map entries keep their wire order; the decoder has already
/// rejected maps with duplicate keys.
public indirect enum CBORValue: Sendable {
    /// Major type 0: an unsigned integer.
    case unsigned(UInt64)
    /// Major type 1: the integer `-1 - n`.
    case negative(UInt64)
    /// Major type 2: a definite-length byte string.
    case bytes([UInt8])
    /// Major type 3: a definite-length UTF-8 text string (validated).
    case text(String)
    /// Major type 4: an array.
    case array([CBORValue])
    /// Major type 5: a map, entries in wire order.
    case map([(CBORValue, CBORValue)])
    /// Major type 6: a tag number and the tagged item.
    case tag(UInt64, CBORValue)
    /// Major type 7: `false` (20) / `true` (21).
    case bool(Bool)
    /// Major type 7: `null` (22).
    case null
    /// Major type 7: `undefined` (23).
    case undefined
    /// Major type 7: any other simple value.
    case simple(UInt8)
    /// Major type 7: a half, single or double precision float, widened to `Double`.
    case float(Double)
}

extension CBORValue {
    /// The value as a signed integer, if it is an integer that fits in `Int64`.
    public var int64Value: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    /// The bytes of a byte string, else `nil`.
    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    /// The text of a text string, else `nil`.
    public var textValue: String? {
        if case .text(let s) = self { return s }
        return nil
    }

    /// The entries of a map, else `nil`.
    public var mapValue: [(CBORValue, CBORValue)]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// The elements of an array, else `nil`.
    public var arrayValue: [CBORValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The value stored under the text key `key` of a map, or `nil` (also when `self` is not a map).
    public subscript(textKey key: String) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first(where: { $0.0 == .text(key) })?.1
    }

    /// The value stored under the integer key `key` of a map (COSE uses integer labels).
    public subscript(intKey key: Int64) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first(where: { $0.0.int64Value == key })?.1
    }
}

extension CBORValue: Equatable {
    /// Structural equality. Floats compare as `Double` (so NaN never equals NaN).
    public static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): return a == b
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.text(let a), .text(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.tag(let ta, let a), .tag(let tb, let b)): return ta == tb && a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null), (.undefined, .undefined): return true
        case (.simple(let a), .simple(let b)): return a == b
        case (.float(let a), .float(let b)): return a == b
        default: return false
        }
    }
}
