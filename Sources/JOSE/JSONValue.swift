/// A JSON value (RFC 8259) as produced by `StrictJSON.parse`: strings fully unescaped, numbers kept as their
/// literal text, objects with unique keys in document order.
///
/// Not `indirect`: arrays and objects already hold their elements in heap buffers, so the recursion needs no box,
/// and a box per value was one allocation per claim on the request path (11 of an RS256 token's 62).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer, when this is a number written as a plain integer that fits in 64 bits.
    public var int64Value: Int64? {
        if case .number(let n) = self { return n.int64 }
        return nil
    }

    /// The Boolean, when this is `true` or `false`.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements, when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The object, when this is an object.
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }
}

// Literals, so dev tools and tests can write claims as `["iss": "…", "exp": 1700000000]`.

extension JSONValue: ExpressibleByNilLiteral {
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension JSONValue: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Traps on a duplicate key, as a dictionary literal does.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        guard let object = JSONObject(members: elements) else { preconditionFailure("duplicate key in JSON object literal") }
        self = .object(object)
    }
}
