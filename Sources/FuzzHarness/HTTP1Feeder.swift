import HTTP1

/// The request and response parsers behind one face, so one feeder drives either.
protocol FuzzedHTTP1Parser {
    associatedtype Head: FuzzedHTTP1Head
    mutating func next(_ input: UnsafeRawBufferPointer) -> HTTP1ParseEvent<Head>
}

extension HTTP1RequestParser: FuzzedHTTP1Parser {}
extension HTTP1ResponseParser: FuzzedHTTP1Parser {}

/// One message as the caller saw it: the head, the concatenated body bytes, and whether `.end` came.
struct FuzzedHTTP1Message<Head: Equatable>: Equatable {
    var head: Head
    var body: [UInt8] = []
    var complete = false
}

/// Everything observable from feeding some bytes; equal for every split of the same bytes.
struct FuzzedHTTP1Outcome<Head: Equatable>: Equatable {
    var messages: [FuzzedHTTP1Message<Head>] = []
    var error: HTTP1ParseError?
    /// Bytes the parser left unconsumed (not compared after an error: how much was buffered then depends on the split).
    var leftover = 0
}

/// Plays the caller of the parsers' calling contract — drop `consumed` bytes after each event, call again, add more
/// bytes after `.needMore` — and checks every event against that contract as it goes.
///
/// The first piece is parsed in place (for the whole-input feed that is libFuzzer's own buffer, whose end
/// AddressSanitizer guards); only unconsumed bytes are copied, into `pending`, to be joined with the next piece.
struct HTTP1Feeder<Parser: FuzzedHTTP1Parser> {
    var parser: Parser
    let limits: HTTP1Limits
    private var pending: [UInt8] = []
    private(set) var outcome = FuzzedHTTP1Outcome<Parser.Head>()

    init(_ parser: Parser, limits: HTTP1Limits) {
        self.parser = parser
        self.limits = limits
    }

    /// Feeds one piece of input and runs the parser until it needs more (or fails).
    mutating func feed(_ piece: UnsafeRawBufferPointer) {
        guard outcome.error == nil else { return }
        if pending.isEmpty {
            let used = drain(piece)
            pending = Array(piece[used...])
        } else {
            pending.append(contentsOf: piece)
            let used = pending.withUnsafeBytes { drain($0) }
            pending.removeFirst(used)
        }
        if outcome.error == nil { outcome.leftover = pending.count }
    }

    /// Runs the parser over `buffer` until `.needMore` or `.error`; returns how many bytes it consumed.
    private mutating func drain(_ buffer: UnsafeRawBufferPointer) -> Int {
        var offset = 0
        // Every event but `.end` and `.needMore` consumes at least one byte, and `.end` follows a message: a
        // parser that keeps answering without consuming is stuck.
        var budget = 4 * buffer.count + 16
        while true {
            budget -= 1
            fuzzCheck(budget >= 0, "the parser made no progress over \(buffer.count) bytes")
            let input = UnsafeRawBufferPointer(rebasing: buffer[offset...])
            let event = parser.next(input)
            switch event {
            case .needMore(let consumed):
                fuzzCheck(consumed >= 0 && consumed <= input.count, "needMore consumed \(consumed) of \(input.count)")
                return offset + consumed
            case .head(let head, let consumed):
                fuzzCheck(consumed > 0 && consumed <= input.count, "head consumed \(consumed) of \(input.count)")
                head.checkInvariants(limits: limits)
                // The head's bytes are exactly the input's, ending where the event says (after any ignored empty line).
                fuzzCheck(head.bytes.count <= consumed && head.bytes.elementsEqual(input[(consumed - head.bytes.count)..<consumed]),
                          "head bytes are not the input's")
                outcome.messages.append(FuzzedHTTP1Message(head: head))
                offset += consumed
            case .body(let range, let consumed):
                fuzzCheck(!range.isEmpty && range.lowerBound >= 0 && range.upperBound <= consumed && consumed <= input.count,
                          "body \(range), consumed \(consumed) of \(input.count)")
                fuzzCheck(!outcome.messages.isEmpty && !outcome.messages[outcome.messages.count - 1].complete,
                          "body outside a message")
                outcome.messages[outcome.messages.count - 1].body.append(contentsOf: input[range])
                offset += consumed
            case .end(let consumed):
                fuzzCheck(consumed >= 0 && consumed <= input.count, "end consumed \(consumed) of \(input.count)")
                endMessage()
                offset += consumed
            case .error(let error):
                outcome.error = error
                return offset
            }
        }
    }

    /// Marks the current message complete, checking its body against the framing its head announced.
    mutating func endMessage() {
        fuzzCheck(!outcome.messages.isEmpty && !outcome.messages[outcome.messages.count - 1].complete, "end outside a message")
        let message = outcome.messages[outcome.messages.count - 1]
        switch message.head.framing {
        case .none: fuzzCheck(message.body.isEmpty, "body bytes on a message without a body")
        case .contentLength(let n): fuzzCheck(message.body.count == n, "Content-Length \(n) but \(message.body.count) bytes")
        case .chunked, .untilClose: break
        }
        outcome.messages[outcome.messages.count - 1].complete = true
    }

    /// Records the outcome of `finishOnEOF()` (response parser): an `.end` completes the current message.
    mutating func finish(_ event: HTTP1ParseEvent<Parser.Head>) {
        guard outcome.error == nil else { return }
        switch event {
        case .end(let consumed):
            fuzzCheck(consumed == 0, "end at EOF consumed \(consumed)")
            endMessage()
        case .error(let error):
            outcome.error = error
        case .needMore(let consumed):
            fuzzCheck(consumed == 0, "needMore at EOF consumed \(consumed)")
        case .head, .body:
            fuzzCheck(false, "a head or body at EOF")
        }
    }
}
