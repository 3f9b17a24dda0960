import HTTP1
import Testing

/// The two parsers behind one face, so the driver can feed either.
protocol EventParser {
    associatedtype Head: Sendable & Equatable
    mutating func next(_ input: UnsafeRawBufferPointer) -> HTTP1ParseEvent<Head>
}

extension HTTP1RequestParser: EventParser {}
extension HTTP1ResponseParser: EventParser {}

/// One message as the caller saw it: the head and the concatenated body bytes.
struct ParsedMessage<Head: Equatable>: Equatable {
    var head: Head
    var body: [UInt8] = []
    var complete = false
}

/// Everything observable from feeding some bytes: messages in order, the terminal error, and bytes left unconsumed.
struct ParseOutcome<Head: Equatable>: Equatable {
    var messages: [ParsedMessage<Head>] = []
    var error: HTTP1ParseError?
    /// Bytes never consumed (-1 after an error).
    var leftover = 0
    /// Calling-contract violations noticed by the driver (must stay empty).
    var violations: [String] = []
}

/// Plays the caller of the calling contract: keeps unconsumed bytes, drops `consumed` after each event, and reads
/// the next piece after `.needMore`.
struct ParserDriver<Parser: EventParser> {
    var parser: Parser
    var buffer: [UInt8] = []
    var outcome = ParseOutcome<Parser.Head>()

    init(_ parser: Parser) { self.parser = parser }

    /// Feeds one piece of input and runs the parser until it needs more (or fails).
    mutating func feed(_ piece: some Collection<UInt8>) {
        guard outcome.error == nil else { return }
        buffer.append(contentsOf: piece)
        var steps = 0
        while outcome.error == nil {
            steps += 1
            if steps > 1_000_000 {
                outcome.violations.append("no progress")
                return
            }
            let event = buffer.withUnsafeBytes { parser.next($0) }
            if !apply(event) { return }
        }
    }

    /// Applies one event; false when the parser wants more input.
    mutating func apply(_ event: HTTP1ParseEvent<Parser.Head>) -> Bool {
        switch event {
        case .needMore(let consumed):
            drop(consumed)
            return false
        case .head(let head, let consumed):
            outcome.messages.append(ParsedMessage(head: head))
            drop(consumed)
        case .body(let range, let consumed):
            if range.upperBound > consumed || range.isEmpty { outcome.violations.append("body \(range) / \(consumed)") }
            if outcome.messages.isEmpty { outcome.violations.append("body before head") }
            outcome.messages[outcome.messages.count - 1].body.append(contentsOf: buffer[range])
            drop(consumed)
        case .end(let consumed):
            if outcome.messages.isEmpty { outcome.violations.append("end before head") }
            outcome.messages[outcome.messages.count - 1].complete = true
            drop(consumed)
        case .error(let error):
            outcome.error = error
            outcome.leftover = -1  // how much was buffered at the error depends on the split
        }
        return true
    }

    private mutating func drop(_ n: Int) {
        if n < 0 || n > buffer.count {
            outcome.violations.append("consumed \(n) of \(buffer.count)")
            buffer.removeAll()
        } else {
            buffer.removeFirst(n)
        }
        outcome.leftover = buffer.count
    }
}

/// SplitMix64: a fixed-seed generator so "random" splits are the same on every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The ways the same bytes are cut into reads.
enum Split: CaseIterable, CustomStringConvertible {
    case whole, byteByByte, random

    var description: String {
        switch self {
        case .whole: "whole"
        case .byteByByte: "byte-by-byte"
        case .random: "random"
        }
    }

    func pieces(_ bytes: [UInt8], seed: UInt64 = 0x5EED) -> [ArraySlice<UInt8>] {
        switch self {
        case .whole:
            return [bytes[...]]
        case .byteByByte:
            return bytes.indices.map { bytes[$0..<($0 + 1)] }
        case .random:
            var rng = SeededGenerator(seed: seed &+ UInt64(bytes.count))
            var out: [ArraySlice<UInt8>] = []
            var i = 0
            while i < bytes.count {
                let n = Int.random(in: 1...64, using: &rng)
                out.append(bytes[i..<min(bytes.count, i + n)])
                i += n
            }
            return out
        }
    }
}

/// Runs the request parser over `bytes` cut as `split`.
func parseRequests(
    _ bytes: [UInt8], split: Split = .whole, limits: HTTP1Limits = HTTP1Limits()
) -> ParseOutcome<HTTP1RequestHead> {
    var driver = ParserDriver(HTTP1RequestParser(limits: limits))
    for piece in split.pieces(bytes) { driver.feed(piece) }
    return driver.outcome
}

/// `s` as bytes (the tests write CRLF explicitly).
func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
