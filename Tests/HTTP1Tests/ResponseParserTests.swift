import HTTP1
import Testing

/// Runs the response parser over `s` cut as `split`, announcing `expected` responses (HEAD flags) first and
/// signalling EOF at the end when `eof`.
private func parseResponses(
    _ s: String, split: Split = .whole, expected: [Bool] = [false], eof: Bool = false
) -> ParseOutcome<HTTP1ResponseHead> {
    var driver = ParserDriver(HTTP1ResponseParser(limits: HTTP1Limits()))
    for toHEAD in expected { driver.parser.expectResponse(toHEAD: toHEAD) }
    for piece in split.pieces(bytes(s)) { driver.feed(piece) }
    if eof, driver.outcome.error == nil { _ = driver.apply(driver.parser.finishOnEOF()) }
    return driver.outcome
}

/// The same outcome for every split, which is returned.
private func responses(_ s: String, expected: [Bool] = [false], eof: Bool = false) -> ParseOutcome<HTTP1ResponseHead> {
    let whole = parseResponses(s, expected: expected, eof: eof)
    for split in [Split.byteByByte, .random] {
        #expect(parseResponses(s, split: split, expected: expected, eof: eof) == whole, "\(split)")
    }
    #expect(whole.violations.isEmpty)
    return whole
}

private func text(_ m: ParsedMessage<HTTP1ResponseHead>) -> String { String(decoding: m.body, as: UTF8.self) }

@Suite("Response parser")
struct ResponseParserTests {
    @Test func contentLengthBodyIsDelimited() {
        let o = responses("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        #expect(o.error == nil && o.messages.count == 1 && o.messages[0].complete)
        #expect(o.messages[0].head.framing == .contentLength(5) && text(o.messages[0]) == "hello")
        #expect(o.messages[0].head.status == 200 && o.messages[0].head.string(o.messages[0].head.reason) == "OK")
        #expect(o.messages[0].head.keepAlive)
    }

    @Test func chunkedBodyIsDecoded() {
        let o = responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;e=1\r\nde\r\n0\r\nT: x\r\n\r\n")
        #expect(o.error == nil && o.messages.count == 1 && o.messages[0].complete)
        #expect(o.messages[0].head.framing == .chunked && text(o.messages[0]) == "abcde")
    }

    @Test func keptTrailersAreTakenOncePerMessageAndNeverInTheHead() {
        let input = bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-Sum: 1 \r\nX-B:2\r\n\r\n" +
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        for keeps in [true, false] {
            var parser = HTTP1ResponseParser(limits: HTTP1Limits())
            parser.keepsTrailers = keeps
            parser.expectResponse(toHEAD: false)
            parser.expectResponse(toHEAD: false)
            var taken: [String] = []
            var heads: [HTTP1ResponseHead] = []
            input.withUnsafeBytes { raw in
                var at = 0
                loop: while true {
                    let event = parser.next(UnsafeRawBufferPointer(rebasing: raw[at...]))
                    switch event {
                    case .head(let h, let c): heads.append(h); at += c
                    case .body(_, let c): at += c
                    case .end(let c):
                        at += c
                        taken.append(String(decoding: parser.takeTrailers(), as: UTF8.self))
                        if heads.count == 2 { break loop }
                    case .needMore(let c): at += c; if c == 0 { break loop }
                    case .error: Issue.record("parse error"); break loop
                    }
                }
            }
            #expect(taken == (keeps ? ["X-Sum: 1 \r\nX-B:2\r\n", ""] : ["", ""]))
            #expect(heads.map(\.fields.count) == [1, 1], "trailers never join the head")
        }
    }

    @Test func gzipThenChunkedIsChunkedOnResponses() {
        let o = responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n")
        #expect(o.messages.first?.head.framing == .chunked && o.messages.first?.complete == true)
    }

    @Test func bodyWithoutFramingRunsUntilClose() {
        let o = responses("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this", eof: true)
        #expect(o.error == nil && o.messages.count == 1 && o.messages[0].complete)
        #expect(o.messages[0].head.framing == .untilClose && !o.messages[0].head.keepAlive)
        #expect(text(o.messages[0]) == "all of this")
    }

    @Test func nonChunkedTransferEncodingRunsUntilClose() {
        let o = responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz", eof: true)
        #expect(o.messages.first?.head.framing == .untilClose && o.messages.first?.complete == true)
    }

    @Test func truncatedContentLengthBodyIsAnErrorOnEOF() {
        let o = responses("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", eof: true)
        #expect(o.error?.code == .truncatedMessage && o.messages.first?.complete == false)
    }

    @Test func truncatedChunkedBodyAndHeadAreErrorsOnEOF() {
        #expect(responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", eof: true).error?.code == .truncatedMessage)
        #expect(responses("HTTP/1.1 200 OK\r\nContent-Le", eof: true).error?.code == .truncatedMessage)
    }

    @Test func eofWhileWaitingForAResponseIsNotAnError() {
        var parser = HTTP1ResponseParser(limits: HTTP1Limits())
        guard case .needMore(0) = parser.finishOnEOF() else { Issue.record("idle EOF"); return }
        parser.expectResponse(toHEAD: false)
        guard case .needMore(0) = parser.finishOnEOF() else { Issue.record("nothing received"); return }
    }

    @Test func interimResponseIsFollowedByTheFinalOne() {
        let o = responses("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(o.error == nil)
        #expect(o.messages.map(\.head.status) == [100, 103, 200])
        #expect(o.messages.allSatisfy(\.complete) && text(o.messages[2]) == "ok")
    }

    @Test func noBodyFor204And304AndHEADWhateverContentLengthSays() {
        let twoResponses = "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"
        let o = responses(twoResponses, expected: [false, false])
        #expect(o.error == nil && o.messages.count == 2 && o.messages.allSatisfy { $0.complete && $0.body.isEmpty })
        #expect(o.messages.allSatisfy { $0.head.framing == HTTP1BodyFraming.none })
        let head = responses("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", expected: [true])
        #expect(head.error == nil && head.messages.first?.complete == true && head.messages.first?.head.framing == HTTP1BodyFraming.none)
        let headChunked = responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", expected: [true])
        #expect(headChunked.messages.first?.complete == true && headChunked.leftover == 0)
    }

    @Test func keepAliveFollowsVersionConnectionAndFraming() {
        func keepAlive(_ s: String) -> Bool? { responses(s, eof: true).messages.first?.head.keepAlive }
        #expect(keepAlive("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == true)
        #expect(keepAlive("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n") == false)
        #expect(keepAlive("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n") == false)
        #expect(keepAlive("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n") == true)
        #expect(keepAlive("HTTP/1.1 200 OK\r\n\r\n") == false)
        #expect(keepAlive("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n") == false)
    }

    @Test func statusLineWithoutReasonIsAccepted() {
        let o = responses("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n")
        #expect(o.error == nil && o.messages.first?.head.reason.isEmpty == true)
    }

    @Test func malformedStatusLinesAreRejected() {
        #expect(responses("HTTP/1.1 20 OK\r\n\r\n").error?.code == .malformedStatusLine)
        #expect(responses("HTTP/1.1 099 X\r\n\r\n").error?.code == .malformedStatusLine)
        #expect(responses("HTTP/1.1 200OK\r\n\r\n").error?.code == .malformedStatusLine)
        #expect(responses("http/1.1 200 OK\r\n\r\n").error?.code == .malformedStatusLine)
        #expect(responses("HTTP/2.0 200 OK\r\n\r\n").error?.code == .unsupportedVersion)
        #expect(responses("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n").error?.code == .bareLF)
    }

    @Test func ambiguousResponseFramingIsRejected() {
        #expect(responses("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").error?.code
            == .contentLengthWithTransferEncoding)
        #expect(responses("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n").error?.code
            == .conflictingContentLength)
        #expect(responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n").error?.code
            == .unsupportedTransferEncoding)
        #expect(responses("HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n").error?.code == .obsFold)
    }

    @Test func unsolicitedBytesAreRejected() {
        let o = responses("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")
        #expect(o.messages.count == 1 && o.error?.code == .unsolicitedResponse)
        #expect(responses("HTTP/1.1 200 OK\r\n\r\n", expected: []).error?.code == .unsolicitedResponse)
    }

    @Test func queuedExpectationsServePipelinedResponsesInOrder() {
        let s = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
        let o = responses(s, expected: [true, false])
        #expect(o.error == nil && o.messages.count == 2)
        #expect(o.messages.map(text) == ["", "hi"])
    }
}
