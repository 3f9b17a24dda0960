import Testing
@testable import GatewayProxy
import GatewayCore
import HTTP1

@Suite struct HeaderFilterTests {
    func parseRequest(_ text: String) -> HTTP1RequestHead? {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> HTTP1RequestHead? in
            if case .head(let h, _) = parser.next(raw) { return h }
            return nil
        }
    }

    func upstreamHead(_ text: String, basePath: String = "") -> String {
        guard let head = parseRequest(text) else { return "<parse failed>" }
        let out = ByteBuffer(capacity: 256)
        HeaderFilter.appendUpstreamRequestHead(head, basePath: Array(basePath.utf8), clientAddress: Array("10.0.0.7".utf8), to: out)
        return String(decoding: out.readable, as: UTF8.self)
    }

    func clientHead(_ response: String, chunked: Bool) -> String {
        var parser = HTTP1ResponseParser(limits: HTTP1Limits())
        parser.expectResponse(toHEAD: false)
        let bytes = Array(response.utf8)
        let head: HTTP1ResponseHead? = bytes.withUnsafeBytes { raw in
            if case .head(let h, _) = parser.next(raw) { return h }
            return nil
        }
        guard let head else { return "<parse failed>" }
        let out = ByteBuffer(capacity: 128)
        HeaderFilter.appendClientResponseHead(head, keepFraming: false, chunked: chunked, connection: nil, to: out)
        return String(decoding: out.readable, as: UTF8.self)
    }

    @Test func hopByHopAndAttestHeadersAreRemoved() {
        let s = upstreamHead("GET /a?b=1 HTTP/1.1\r\nHost: api\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n" +
                             "Keep-Alive: 5\r\nTE: trailers\r\nUpgrade: websocket\r\nProxy-Authorization: x\r\n" +
                             "X-Attest-Verdict: verified\r\nx-attest-app-id: forged\r\nAccept: */*\r\n\r\n")
        #expect(s == "GET /a?b=1 HTTP/1.1\r\nHost: api\r\nAccept: */*\r\nX-Forwarded-For: 10.0.0.7\r\n" +
                     "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api\r\n\r\n")
    }

    @Test func forwardedForIsAppendedAndProtoHostAreReplaced() {
        let s = upstreamHead("GET / HTTP/1.1\r\nHost: api\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\n" +
                             "X-Forwarded-Host: evil\r\n\r\n")
        #expect(s.contains("X-Forwarded-For: 1.2.3.4, 10.0.0.7\r\n"))
        #expect(s.contains("X-Forwarded-Proto: http\r\n"))
        #expect(!s.contains("evil"))
        #expect(!s.contains("https"))
    }

    @Test func chunkedBodiesAreReframedAndExpectIsAnsweredByTheGateway() {
        let s = upstreamHead("POST /u HTTP/1.1\r\nHost: api\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
        #expect(s.hasSuffix("Transfer-Encoding: chunked\r\n\r\n"))
        #expect(!s.lowercased().contains("expect"))
    }

    @Test func basePathIsPrefixedAndAbsoluteFormBecomesOriginForm() {
        #expect(upstreamHead("GET /x HTTP/1.1\r\nHost: a\r\n\r\n", basePath: "/v1").hasPrefix("GET /v1/x HTTP/1.1\r\n"))
        #expect(upstreamHead("GET http://a.example/p?q=1 HTTP/1.1\r\nHost: a.example\r\n\r\n").hasPrefix("GET /p?q=1 HTTP/1.1\r\n"))
        #expect(upstreamHead("GET http://a.example HTTP/1.1\r\nHost: a.example\r\n\r\n").hasPrefix("GET / HTTP/1.1\r\n"))
    }

    @Test func connectionCannotDropContentLengthOrHost() {
        // Dropping Content-Length while forwarding the body would hand the upstream the body as a second request.
        let s = upstreamHead("POST /p HTTP/1.1\r\nHost: api\r\nConnection: content-length, Host, X-Gone\r\n" +
                             "X-Gone: 1\r\nContent-Length: 12\r\n\r\n")
        #expect(s == "POST /p HTTP/1.1\r\nHost: api\r\nContent-Length: 12\r\nX-Forwarded-For: 10.0.0.7\r\n" +
                     "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api\r\n\r\n")
    }

    @Test func contentLengthIsForwardedOnceInCanonicalForm() {
        let s = upstreamHead("POST /p HTTP/1.1\r\nHost: api\r\ncontent-length: 010\r\nX-A: 1\r\nContent-Length: 10\r\n\r\n")
        #expect(s.hasPrefix("POST /p HTTP/1.1\r\nHost: api\r\ncontent-length: 10\r\nX-A: 1\r\nX-Forwarded-For: "))
        #expect(upstreamHead("POST /p HTTP/1.1\r\nHost: api\r\nContent-Length: 5, 5\r\n\r\n").contains("\r\nContent-Length: 5\r\nX-"))
        #expect(upstreamHead("POST /p HTTP/1.1\r\nHost: api\r\nContent-Length: 00\r\n\r\n").contains("\r\nContent-Length: 0\r\nX-"))
        #expect(!upstreamHead("GET /p HTTP/1.1\r\nHost: api\r\n\r\n").lowercased().contains("content-length"))
    }

    @Test func underscoreSpellingsOfDroppedOrGatewaySetFieldsAreDropped() {
        let s = upstreamHead("GET /p HTTP/1.1\r\nHost: api\r\nX_Attest_Verdict: verified\r\nx-attest_app-id: forged\r\n" +
                             "Transfer_Encoding: chunked\r\nContent_Length: 40\r\nKeep_Alive: 1\r\nProxy_Authorization: x\r\n" +
                             "X_Forwarded_For: 6.6.6.6\r\nX_Forwarded_Host: evil\r\nX_Request_Id: r\r\nX_Custom: kept\r\n\r\n")
        #expect(s.hasPrefix("GET /p HTTP/1.1\r\nHost: api\r\nX_Custom: kept\r\nX-Forwarded-For: 10.0.0.7\r\n" +
                            "X-Forwarded-Proto: http\r\nX-Forwarded-Host: api\r\n"))
        #expect(!s.contains("6.6.6.6") && !s.contains("evil") && !s.contains("verified") && !s.contains("forged"))
    }

    @Test func pathExcludesTheQuery() {
        let t = Array("/a/b?token=secret".utf8)
        let p = t.withUnsafeBytes { String(decoding: HeaderFilter.path(of: $0), as: UTF8.self) }
        #expect(p == "/a/b")
    }

    @Test func responseHeadDropsHopByHopAndReframes() {
        #expect(clientHead("HTTP/1.1 200 OK\r\nConnection: close, X-Internal\r\nX-Internal: 1\r\nTransfer-Encoding: chunked\r\n" +
                           "Content-Type: text/plain\r\n\r\n", chunked: true) ==
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
    }

    @Test func responseConnectionCannotDropContentLength() {
        #expect(clientHead("HTTP/1.1 200 OK\r\nConnection: content-length\r\nContent-Length: 2\r\n\r\nok", chunked: false) ==
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
    }

    @Test func localResponsesAreJSON() {
        let out = ByteBuffer(capacity: 64)
        LocalResponse.notFound().append(to: out, close: false)
        #expect(String(decoding: out.readable, as: UTF8.self) ==
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"error\":\"not_found\"}")
    }
}
