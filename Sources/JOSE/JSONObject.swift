/// A JSON object: members in document order, keys unique, with lookup by key.
///
/// Keys are compared as Swift strings, i.e. by Unicode canonical equivalence. The parser rejects two keys that are
/// equal under that comparison (which includes byte-identical keys, however escaped), so a lookup can never pick
/// one of two conflicting members.
public struct JSONObject: Sendable, Equatable {
    /// Members in document order.
    public let members: [(String, JSONValue)]
    private let index: [String: Int]

    /// nil when two members have the same key.
    public init?(members: [(String, JSONValue)]) {
        var index = [String: Int](minimumCapacity: members.count)
        for (position, member) in members.enumerated() {
            if index.updateValue(position, forKey: member.0) != nil { return nil }
        }
        self.members = members
        self.index = index
    }

    /// Programmatic construction (minting); traps on a duplicate key, as `Dictionary(uniqueKeysWithValues:)` does.
    public init(_ members: [(String, JSONValue)]) {
        guard let object = JSONObject(members: members) else { preconditionFailure("duplicate key in JSONObject") }
        self = object
    }

    /// From the parser, which has already built the index while rejecting duplicates.
    init(validatedMembers members: [(String, JSONValue)], index: [String: Int]) {
        self.members = members
        self.index = index
    }

    /// The value for `key`, nil when absent.
    public subscript(key: String) -> JSONValue? {
        guard let position = index[key] else { return nil }
        return members[position].1
    }

    /// Number of members.
    public var count: Int { members.count }

    /// Keys in document order.
    public var keys: [String] { members.map(\.0) }

    /// Equal when both have the same keys with equal values; member order does not matter (RFC 8259 §4).
    public static func == (a: JSONObject, b: JSONObject) -> Bool {
        guard a.members.count == b.members.count else { return false }
        for (key, value) in a.members {
            guard let other = b[key], other == value else { return false }
        }
        return true
    }
}
