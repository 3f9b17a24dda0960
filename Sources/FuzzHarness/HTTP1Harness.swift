import HTTP1

/// The `http1-request` target: both HTTP/1 parsers over the same bytes, each fed whole and cut in two at a point
/// derived from the data, under the default limits and under small ones (so short inputs reach every limit).
///
/// Invariants: the calling contract holds for every event (see ``HTTP1Feeder``); heads satisfy
/// ``FuzzedHTTP1Head``; the outcome does not depend on the split (the parsers promise this, and a split-dependent
/// parser is a request-smuggling risk); and an input that parses without error under the small limits parses the
/// same under the default ones.
enum HTTP1Harness {
    static let defaultLimits = HTTP1Limits()
    static let smallLimits = HTTP1Limits(maxHeaderBytes: 256, maxHeaders: 8, maxTargetBytes: 48, maxChunkLineBytes: 16)

    static func run(_ data: UnsafeRawBufferPointer) {
        let hash = fnv1a(data)
        let split = Int(hash % UInt64(data.count + 1))
        // Up to four pipelined responses are expected; which are to HEAD requests comes from the data too.
        let toHEAD = (0..<4).map { hash >> (32 + $0) & 1 == 1 }

        let small = requests(data, limits: smallLimits, split: split)
        let full = requests(data, limits: defaultLimits, split: split)
        if small.error == nil { fuzzCheck(small == full, "requests parse differently under the small limits") }

        let smallResponses = responses(data, limits: smallLimits, split: split, toHEAD: toHEAD)
        let fullResponses = responses(data, limits: defaultLimits, split: split, toHEAD: toHEAD)
        if smallResponses.error == nil {
            fuzzCheck(smallResponses == fullResponses, "responses parse differently under the small limits")
        }
    }

    /// The request parser's outcome, checked to be the same whole and split at `split`.
    static func requests(_ data: UnsafeRawBufferPointer, limits: HTTP1Limits, split: Int) -> FuzzedHTTP1Outcome<HTTP1RequestHead> {
        let whole = feed(HTTP1RequestParser(limits: limits), limits: limits, data, cuts: [])
        let cut = feed(HTTP1RequestParser(limits: limits), limits: limits, data, cuts: [split])
        checkSame(whole, cut, split: split)
        return whole
    }

    /// The response parser's outcome (EOF after the data), checked to be the same whole and split at `split`.
    static func responses(
        _ data: UnsafeRawBufferPointer, limits: HTTP1Limits, split: Int, toHEAD: [Bool]
    ) -> FuzzedHTTP1Outcome<HTTP1ResponseHead> {
        var parser = HTTP1ResponseParser(limits: limits)
        for head in toHEAD { parser.expectResponse(toHEAD: head) }
        let whole = feed(parser, limits: limits, data, cuts: [], atEOF: { $0.finishOnEOF() })
        let cut = feed(parser, limits: limits, data, cuts: [split], atEOF: { $0.finishOnEOF() })
        checkSame(whole, cut, split: split)
        return whole
    }

    /// Feeds `data` in pieces ending at `cuts`, then reports EOF when the parser has a way to.
    static func feed<Parser: FuzzedHTTP1Parser>(
        _ parser: Parser, limits: HTTP1Limits, _ data: UnsafeRawBufferPointer, cuts: [Int],
        atEOF: ((inout Parser) -> HTTP1ParseEvent<Parser.Head>)? = nil
    ) -> FuzzedHTTP1Outcome<Parser.Head> {
        var feeder = HTTP1Feeder(parser, limits: limits)
        var start = 0
        for end in cuts + [data.count] where end >= start {
            feeder.feed(UnsafeRawBufferPointer(rebasing: data[start..<end]))
            start = end
        }
        if let atEOF { feeder.finish(atEOF(&feeder.parser)) }
        return feeder.outcome
    }

    private static func checkSame<Head>(_ whole: FuzzedHTTP1Outcome<Head>, _ cut: FuzzedHTTP1Outcome<Head>, split: Int) {
        fuzzCheck(whole.messages == cut.messages, "messages differ when split at \(split)")
        fuzzCheck(whole.error == cut.error, "errors differ when split at \(split): \(String(describing: whole.error)) vs \(String(describing: cut.error))")
        if whole.error == nil { fuzzCheck(whole.leftover == cut.leftover, "unconsumed bytes differ when split at \(split)") }
    }

    /// FNV-1a over the input: a split point and flags that follow the data without taking bytes from it.
    static func fnv1a(_ data: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in data { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return h
    }
}
