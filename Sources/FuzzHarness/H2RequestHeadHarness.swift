import GatewayCore
import HTTP1

/// The `h2-request-head` target: `HTTP1RequestHead.assemble`, which turns an HTTP/2 request's parts into the head the
/// exchange forwards, differentially against `HTTP1RequestParser` reading the same head as HTTP/1.1 text.
///
/// Input: byte 0 is a separator, bit 0 of byte 1 says a body follows (`hasBody`); the rest, split at the separator,
/// is the method, `:path`, `:authority` (empty: none), then field names and values in turn (a name without a value
/// gets an empty one). The parts go back to back into one buffer, as `H2RequestHead` holds them. The seeds use
/// 0x00; a mutated separator lets NUL and every other byte into the parts.
///
/// Invariants, for a head `assemble` accepts: every range lies within its bytes; it has no `te` or `expect` field, at
/// most one `host` (the authority's value when there is one) and one `cookie`; it is HTTP/1.1, not keep-alive and
/// expects no 100-continue; written out as HTTP/1.1 text (with `transfer-encoding: chunked` added when `assemble`
/// framed the body chunked without one) the wire parser, under limits too large to matter, accepts it with the same
/// method, target, framing, host and fields, byte for byte; and what the small limits accept, the default ones accept
/// as the same head.
enum H2RequestHeadHarness {
    static let wireLimits = HTTP1Limits(maxHeaderBytes: 1 << 20, maxHeaders: 10_000, maxTargetBytes: 1 << 20, maxChunkLineBytes: 4096)

    struct Parts {
        var bytes: [UInt8] = []
        var method = 0..<0, target = 0..<0, authority = 0..<0
        var fields: [(name: Range<Int>, value: Range<Int>)] = []
        var hasBody = false

        func assemble(_ limits: HTTP1Limits) -> Result<HTTP1RequestHead, HTTP1ParseError> {
            HTTP1RequestHead.assemble(bytes: bytes, method: method, target: target, authority: authority, fields: fields,
                                      hasBody: hasBody, limits: limits)
        }
    }

    static func parts(_ data: UnsafeRawBufferPointer) -> Parts? {
        guard data.count >= 2 else { return nil }
        var parts = Parts()
        parts.hasBody = data[1] & 1 == 1
        parts.bytes.reserveCapacity(data.count)
        var ranges: [Range<Int>] = []
        var start = 0
        for byte in data[2...] {
            if byte == data[0] {
                ranges.append(start..<parts.bytes.count)
                start = parts.bytes.count
            } else {
                parts.bytes.append(byte)
            }
        }
        ranges.append(start..<parts.bytes.count)
        while ranges.count < 3 || ranges.count % 2 == 0 { ranges.append(parts.bytes.count..<parts.bytes.count) }
        (parts.method, parts.target, parts.authority) = (ranges[0], ranges[1], ranges[2])
        parts.fields = stride(from: 3, to: ranges.count, by: 2).map { (ranges[$0], ranges[$0 + 1]) }
        return parts
    }

    static func run(_ data: UnsafeRawBufferPointer) {
        guard let parts = parts(data) else { return }
        let small = parts.assemble(HTTP1Harness.smallLimits)
        let full = parts.assemble(HTTP1Harness.defaultLimits)
        if case .success = small { fuzzCheck(small == full, "the small limits accept a head the default ones assemble differently") }
        if case .success(let head) = full { check(head, parts) }
    }

    static func check(_ head: HTTP1RequestHead, _ parts: Parts) {
        let count = head.bytes.count
        let ranges = [head.method, head.target] + (head.host.map { [$0] } ?? []) + head.fields.flatMap { [$0.name, $0.value] }
        for r in ranges { fuzzCheck(r.lowerBound >= 0 && r.upperBound <= count, "range \(r) outside the head's \(count) bytes") }
        fuzzCheck(head.version == .http11 && !head.keepAlive && !head.expectsContinue,
                  "version \(head.version), keepAlive \(head.keepAlive), expectsContinue \(head.expectsContinue)")
        let names = head.fields.indices
        func number(_ name: StaticString) -> Int { names.filter { head.fieldName($0, equals: name) }.count }
        fuzzCheck(number("te") == 0 && number("expect") == 0, "a te or expect field was carried over")
        fuzzCheck(number("host") <= 1 && number("cookie") <= 1, "\(number("host")) host and \(number("cookie")) cookie fields")
        if !parts.authority.isEmpty {
            fuzzCheck(head.host.map { head.bytes[$0].elementsEqual(parts.bytes[parts.authority]) } == true,
                      "the host is not the authority")
        }
        checkWire(head)
    }

    /// The differential: the head as an HTTP/1.1 client would have sent it, read by the wire parser.
    static func checkWire(_ head: HTTP1RequestHead) {
        var text: [UInt8] = []
        func put(_ r: Range<Int>, _ after: String) {
            text.append(contentsOf: head.bytes[r])
            text.append(contentsOf: after.utf8)
        }
        put(head.method, " ")
        put(head.target, " HTTP/1.1\r\n")
        for f in head.fields {
            put(f.name, ": ")
            put(f.value, "\r\n")
        }
        let addsTE = head.framing == .chunked && head.firstValue(named: "transfer-encoding") == nil
        if addsTE { text.append(contentsOf: "transfer-encoding: chunked\r\n".utf8) }
        text.append(contentsOf: "\r\n".utf8)
        let shown = String(decoding: text, as: UTF8.self).debugDescription
        var parser = HTTP1RequestParser(limits: wireLimits)
        let event = text.withUnsafeBytes { parser.next($0) }
        guard case .head(let wire, let consumed) = event else {
            fuzzCheck(false, "the wire parser gives \(event) for the assembled head \(shown)")
            return
        }
        func same(_ a: Range<Int>?, _ b: Range<Int>?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return head.bytes[a].elementsEqual(wire.bytes[b])
        }
        fuzzCheck(consumed == text.count, "the wire parser took \(consumed) of \(text.count) bytes of \(shown)")
        fuzzCheck(same(head.method, wire.method) && same(head.target, wire.target), "method or target differ on the wire: \(shown)")
        fuzzCheck(head.framing == wire.framing, "framing \(head.framing), on the wire \(wire.framing): \(shown)")
        fuzzCheck(same(head.host, wire.host), "the host differs on the wire: \(shown)")
        fuzzCheck(wire.fields.count == head.fields.count + (addsTE ? 1 : 0), "\(wire.fields.count) fields on the wire: \(shown)")
        for (i, f) in head.fields.enumerated() where i < wire.fields.count {
            fuzzCheck(same(f.name, wire.fields[i].name) && same(f.value, wire.fields[i].value), "field \(i) differs on the wire: \(shown)")
        }
    }
}
