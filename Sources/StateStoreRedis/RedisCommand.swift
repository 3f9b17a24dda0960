/// One Redis command's arguments, laid out in a single byte array so they can be handed to `redisCommandArgv`
/// without an allocation per argument. Binary-safe: arguments are byte strings with explicit lengths.
struct RedisCommand: Sendable {
    /// The command name for error messages (never the arguments: they may hold tokens or keys).
    let name: String
    /// All arguments back to back (never empty: the command name comes first).
    private(set) var bytes: [UInt8] = []
    /// Each argument's length in `bytes`, in order.
    private(set) var lengths: [Int] = []

    init(_ name: String, capacity: Int = 128) {
        self.name = name
        bytes.reserveCapacity(capacity)
        lengths.reserveCapacity(8)
        append(name)
    }

    init(_ name: String, _ arguments: String...) {
        self.init(name)
        for a in arguments { append(a) }
    }

    mutating func append(_ argument: String) {
        var s = argument
        s.withUTF8 { bytes.append(contentsOf: $0) }
        lengths.append(s.utf8.count)
    }

    mutating func append(_ argument: [UInt8]) {
        bytes.append(contentsOf: argument)
        lengths.append(argument.count)
    }

    mutating func append(_ argument: Int64) {
        append(String(argument))
    }

    /// The argument at `index` (0: the command name), or nil past the last.
    func argument(at index: Int) -> ArraySlice<UInt8>? {
        guard index < lengths.count else { return nil }
        let start = lengths[..<index].reduce(0, +)
        return bytes[start..<start + lengths[index]]
    }

    /// Calls `body` with the C argv/argvlen arrays, valid only during the call.
    func withArgv<R>(_ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        bytes.withUnsafeBufferPointer { raw in
            let base = UnsafeRawPointer(raw.baseAddress!).assumingMemoryBound(to: CChar.self)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(lengths.count)
            var offset = 0
            for n in lengths {
                pointers.append(base + offset)
                offset += n
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    body(Int32(argv.count), argv.baseAddress!, argvlen.baseAddress!)
                }
            }
        }
    }
}
