/// A header field as offsets into the bytes of the head (or header block) it belongs to.
public struct HeaderField: Sendable, Equatable {
    /// The field name, as received (case preserved).
    public var name: Range<Int>
    /// The field value without leading or trailing spaces/tabs; may be empty.
    public var value: Range<Int>

    /// Creates a field from offsets into a head's bytes.
    public init(name: Range<Int>, value: Range<Int>) {
        self.name = name
        self.value = value
    }
}

/// The header fields of one request as verifiers read them, whichever protocol carried them: the bytes of an
/// HTTP/1.1 head (or of an HTTP/2 header block laid out the same way) and the fields as ranges into them.
/// Valid only while `bytes` is (the caller's `withUnsafeBytes`).
public struct HeaderView {
    public let bytes: UnsafeRawBufferPointer
    public let fields: [HeaderField]

    public init(bytes: UnsafeRawBufferPointer, fields: [HeaderField]) {
        self.bytes = bytes
        self.fields = fields
    }

    /// Where a credential field stands in a request.
    public enum Field {
        case missing
        /// Repeated or empty: ambiguous, so malformed (PROTOCOL.md).
        case malformed
        case value(Range<Int>)
    }

    /// The single field `name` (lower-case ASCII); names compare case-insensitively.
    public func single(_ name: [UInt8]) -> Field {
        var found: Range<Int>? = nil
        for f in fields where f.name.count == name.count {
            var same = true
            for k in 0..<name.count where Self.lower(bytes[f.name.lowerBound + k]) != name[k] { same = false; break }
            guard same else { continue }
            if found != nil { return .malformed }
            found = f.value
        }
        guard let found else { return .missing }
        return found.isEmpty ? .malformed : .value(found)
    }

    /// Whether some field `name` (lower-case) is present, valid or not.
    public func has(_ name: [UInt8]) -> Bool {
        if case .missing = single(name) { return false }
        return true
    }

    /// The bytes of `range` (valid as long as `bytes`).
    public subscript(range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[range]) }

    /// The bytes of `range` as a string (UTF-8, invalid sequences replaced).
    public func string(_ range: Range<Int>) -> String { String(decoding: self[range], as: UTF8.self) }

    @inline(__always) static func lower(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c | 0x20 : c }
}
