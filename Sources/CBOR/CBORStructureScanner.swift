/// A pure-Swift pass over the CBOR item structure, run before libcbor is called.
///
/// Why: libcbor 0.8 allocates an array's or map's storage from the *declared* count, so a five-byte header
/// claiming 2^32 elements would make it try a huge allocation, and it knows no depth or item limits. This scan
/// checks well-formedness, rejects indefinite lengths, and enforces `CBORDecoderLimits` — including that every
/// declared length or count fits in the remaining input — so libcbor only ever sees small, well-formed items.
/// It allocates nothing and returns the encoded length of the first item.
struct CBORStructureScanner {
    private let bytes: UnsafeRawBufferPointer
    private let limits: CBORDecoderLimits
    private var offset = 0
    private var items = 0

    init(bytes: UnsafeRawBufferPointer, limits: CBORDecoderLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// Scans one item at the start of the input; returns its length in bytes.
    static func itemLength(of bytes: UnsafeRawBufferPointer, limits: CBORDecoderLimits) throws(CBORError) -> Int {
        var scanner = CBORStructureScanner(bytes: bytes, limits: limits)
        try scanner.scanItem(depth: 1)
        return scanner.offset
    }

    private var remaining: Int { bytes.count - offset }

    private mutating func readByte() throws(CBORError) -> UInt8 {
        guard offset < bytes.count else { throw CBORError(.truncated, at: offset) }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func readBigEndian(_ width: Int) throws(CBORError) -> UInt64 {
        guard remaining >= width else { throw CBORError(.truncated, at: bytes.count) }
        var value: UInt64 = 0
        for i in 0..<width { value = value << 8 | UInt64(bytes[offset + i]) }
        offset += width
        return value
    }

    /// The argument of a header: the additional information itself or the 1/2/4/8 bytes that follow.
    private mutating func readArgument(_ info: UInt8, headerAt start: Int) throws(CBORError) -> UInt64 {
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return try readBigEndian(1)
        case 25: return try readBigEndian(2)
        case 26: return try readBigEndian(4)
        case 27: return try readBigEndian(8)
        case 31: throw CBORError(.indefiniteLength, at: start)
        default: throw CBORError(.malformed, at: start)  // 28...30 are reserved
        }
    }

    private mutating func scanItem(depth: Int) throws(CBORError) {
        let start = offset
        guard depth <= limits.maxDepth else { throw CBORError(.tooDeep, at: start) }
        items += 1
        guard items <= limits.maxItems else { throw CBORError(.tooManyItems, at: start) }
        let initial = try readByte()
        let major = initial >> 5, info = initial & 0x1f
        if major == 7 {
            try scanSimpleOrFloat(info, headerAt: start)
            return
        }
        let argument = try readArgument(info, headerAt: start)
        switch major {
        case 0, 1:
            return
        case 2, 3:
            guard argument <= UInt64(remaining) else { throw CBORError(.truncated, at: bytes.count) }
            offset += Int(argument)
        case 4:
            // Every element takes at least one byte, so a count beyond the remaining input cannot be honest.
            guard argument <= UInt64(remaining) else { throw CBORError(.truncated, at: bytes.count) }
            for _ in 0..<Int(argument) { try scanItem(depth: depth + 1) }
        case 5:
            guard argument <= UInt64(remaining / 2) else { throw CBORError(.truncated, at: bytes.count) }
            for _ in 0..<(2 * Int(argument)) { try scanItem(depth: depth + 1) }
        default:  // 6: a tag wraps exactly one item
            try scanItem(depth: depth + 1)
        }
    }

    private mutating func scanSimpleOrFloat(_ info: UInt8, headerAt start: Int) throws(CBORError) {
        switch info {
        case 0..<24: return
        case 24:
            // RFC 8949 §3.3: simple values below 32 must use the one-byte form.
            guard try readBigEndian(1) >= 32 else { throw CBORError(.malformed, at: start) }
        case 25: _ = try readBigEndian(2)
        case 26: _ = try readBigEndian(4)
        case 27: _ = try readBigEndian(8)
        default: throw CBORError(.malformed, at: start)  // 28...30 reserved, 31 a break with nothing open
        }
    }
}
