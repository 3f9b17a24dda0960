import HTTP1
import Testing
import GatewayCore

/// Behaviour of the request parser beyond the corpus: head contents, helpers, the calling contract, limits.
@Suite("Request parser")
struct RequestParserTests {
    private func single(_ s: String, limits: HTTP1Limits = HTTP1Limits()) throws -> ParsedMessage<HTTP1RequestHead> {
        let o = parseRequests(bytes(s), limits: limits)
        #expect(o.error == nil)
        return try #require(o.messages.first)
    }

    private func errorCode(_ s: String, limits: HTTP1Limits = HTTP1Limits()) -> HTTP1ParseError.Code? {
        var codes: Set<String> = []
        var first: HTTP1ParseError.Code?
        for split in Split.allCases {
            let code = parseRequests(bytes(s), split: split, limits: limits).error?.code
            codes.insert(code?.rawValue ?? "none")
            first = code
        }
        #expect(codes.count == 1, "splits disagree: \(codes)")
        return first
    }

    @Test func headRangesPointAtMethodTargetAndFields() throws {
        let m = try single("GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-Trim: \t padded \t\r\n\r\n")
        let h = m.head
        #expect(h.string(h.method) == "GET")
        #expect(h.methodIs("GET") && !h.methodIs("get"))
        #expect(h.string(h.target) == "/a?b=1")
        #expect(h.version == .http11)
        #expect(h.fields.count == 2)
        #expect(h.fieldName(0, equals: "host") && h.fieldName(1, equals: "x-trim"))
        #expect(h.string(h.fields[1].value) == "padded")
        #expect(h.host.map(h.string) == "example.com")
        #expect(h.firstValue(named: "x-trim").map(h.string) == "padded")
        #expect(h.bytes == bytes("GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-Trim: \t padded \t\r\n\r\n"))
    }

    @Test func ignoredLeadingEmptyLineIsConsumedButNotInBytes() throws {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let input = bytes("\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
        let event = input.withUnsafeBytes { parser.next($0) }
        guard case .head(let head, let consumed) = event else { Issue.record("\(event)"); return }
        #expect(consumed == input.count)
        #expect(head.bytes == Array(input.dropFirst(2)))
        #expect(head.string(head.method) == "GET")
    }

    @Test func headWithoutBodyIsFollowedByEndConsumingNothing() {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let input = bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET")
        input.withUnsafeBytes { p in
            guard case .head(_, let consumed) = parser.next(p) else { Issue.record("no head"); return }
            #expect(consumed == input.count - 3)
            guard case .end(let c) = parser.next(UnsafeRawBufferPointer(rebasing: p[consumed...])) else {
                Issue.record("no end"); return
            }
            #expect(c == 0)
        }
    }

    @Test func chunkSizeLineIsConsumedAndBodyRangeSkipsIt() {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let head = bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
        _ = head.withUnsafeBytes { parser.next($0) }
        let sizeOnly = bytes("5;x=y\r\n")
        let e1 = sizeOnly.withUnsafeBytes { parser.next($0) }
        guard case .needMore(let c1) = e1 else { Issue.record("\(e1)"); return }
        #expect(c1 == sizeOnly.count)
        let e2 = bytes("hel").withUnsafeBytes { parser.next($0) }
        guard case .body(let r2, let c2) = e2 else { Issue.record("\(e2)"); return }
        #expect(r2 == 0..<3 && c2 == 3)
        let e3 = bytes("lo\r\n3\r\nabc\r\n0\r\n\r\n").withUnsafeBytes { parser.next($0) }
        guard case .body(let r3, let c3) = e3 else { Issue.record("\(e3)"); return }
        #expect(r3 == 0..<2 && c3 == 2)
        let e4 = bytes("\r\n3\r\nabc\r\n0\r\n\r\n").withUnsafeBytes { parser.next($0) }
        guard case .body(let r4, let c4) = e4 else { Issue.record("\(e4)"); return }
        #expect(r4 == 5..<8 && c4 == 8)
        let e5 = bytes("\r\n0\r\n\r\n").withUnsafeBytes { parser.next($0) }
        guard case .end(let c5) = e5 else { Issue.record("\(e5)"); return }
        #expect(c5 == 7)
    }

    @Test func pipelinedRequestsAreParsedInOrder() {
        let s = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
            + "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n"
        for split in Split.allCases {
            let o = parseRequests(bytes(s), split: split)
            #expect(o.messages.map { $0.head.string($0.head.target) } == ["/1", "/2", "/3"])
            #expect(o.messages.map { String(decoding: $0.body, as: UTF8.self) } == ["", "abc", ""])
            #expect(o.messages.allSatisfy(\.complete) && o.leftover == 0)
        }
    }

    @Test func obsFoldIsRejected() {
        #expect(errorCode("GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n") == .obsFold)
    }

    @Test func contentLengthWithTransferEncodingIsRejected() {
        let s = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n"
        #expect(errorCode(s) == .contentLengthWithTransferEncoding)
    }

    @Test func transferEncodingOnHTTP10IsRejectedWith400() {
        let e = parseRequests(bytes("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")).error
        #expect(e?.code == .transferEncodingOnHTTP10 && e?.status == 400)
    }

    @Test func gzipTransferEncodingIsNotImplemented() {
        let e = parseRequests(bytes("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")).error
        #expect(e?.code == .unsupportedTransferEncoding && e?.status == 501)
    }

    @Test func expectContinueIsReportedOnlyForHTTP11() throws {
        #expect(try single("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n").head.expectsContinue)
        #expect(try !single("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").head.expectsContinue)
        #expect(try !single("PUT / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n").head.expectsContinue)
    }

    @Test func connectionTokensAreLowercasedAcrossFields() throws {
        let h = try single("GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, X-Foo\r\nConnection: ,TE\r\n\r\n").head
        #expect(h.connectionTokens() == ["keep-alive", "x-foo", "te"])
        #expect(h.keepAlive)
    }

    @Test func longTargetIs414BeforeTheHeadLimit() {
        let limits = HTTP1Limits(maxHeaderBytes: 1024, maxTargetBytes: 100)
        #expect(errorCode("GET /" + String(repeating: "a", count: 2000), limits: limits) == .targetTooLong)
        #expect(errorCode("GET /" + String(repeating: "a", count: 100) + " HTTP/1.1\r\n", limits: limits) == .targetTooLong)
        #expect(errorCode("GET /" + String(repeating: "a", count: 99) + " HTTP/1.1\r\nHost: a\r\n\r\n", limits: limits) == nil)
    }

    @Test func unfinishedHeadIsRejectedAsSoonAsItExceedsTheLimit() {
        var parser = HTTP1RequestParser(limits: HTTP1Limits(maxHeaderBytes: 64))
        let head = bytes("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "v", count: 36))
        #expect(head.count == 64)
        let early = head.dropLast().withUnsafeBytes { parser.next($0) }
        guard case .needMore(0) = early else { Issue.record("\(early)"); return }
        let event = head.withUnsafeBytes { parser.next($0) }
        guard case .error(let e) = event else { Issue.record("\(event)"); return }
        #expect(e.code == .headerTooLarge && e.status == 431)
    }

    @Test func customLimitsApply() {
        let few = HTTP1Limits(maxHeaders: 2)
        #expect(errorCode("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n\r\n", limits: few) == nil)
        #expect(errorCode("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", limits: few) == .tooManyHeaders)
        let shortChunkLines = HTTP1Limits(maxChunkLineBytes: 8)
        let ok = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;ab=cde\r\nx\r\n0\r\n\r\n"
        #expect(errorCode(ok, limits: shortChunkLines) == nil)
        let long = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;ab=cdef\r\nx\r\n0\r\n\r\n"
        #expect(errorCode(long, limits: shortChunkLines) == .badChunkSize)
    }

    @Test func errorIsTerminal() {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let bad = bytes("GET / HTTP/1.1\r\nHost : a\r\n\r\n")
        let first = bad.withUnsafeBytes { parser.next($0) }
        let again = bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n").withUnsafeBytes { parser.next($0) }
        guard case .error(let a) = first, case .error(let b) = again else { Issue.record("not terminal"); return }
        #expect(a == b && a.code == .whitespaceBeforeColon)
    }

    @Test func errorCodesMapToStatusesAndReasonCodes() {
        #expect(HTTP1ParseError(.unsupportedVersion).status == 505)
        #expect(HTTP1ParseError(.targetTooLong).status == 414)
        #expect(HTTP1ParseError(.tooManyHeaders).status == 431)
        #expect(HTTP1ParseError(.bareCR).status == 400)
        #expect(HTTP1ParseError(.obsFold).description == "obs_fold (400)")
    }
}
