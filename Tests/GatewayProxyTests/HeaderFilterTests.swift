import Testing
@testable import GatewayProxy
import GatewayCore
import HTTP1
import Attestation

@Suite struct HeaderFilterTests {
    func parseRequest(_ text: String) -> HTTP1RequestHead? {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> HTTP1RequestHead? in
            if case .head(let h, _) = parser.next(raw) { return h }
            return nil
        }
    }

    func upstreamHead(_ text: String, basePath: String = "", trusted: Bool = false, target: String? = nil,
                      authority: Bool = false) -> String {
        guard let head = parseRequest(text) else { return "<parse failed>" }
        let out = ByteBuffer(capacity: 256)
        var authorityRange: Range<Int>? = nil
        if authority {
            authorityRange = head.bytes.withUnsafeBytes { raw in
                RequestTarget.absoluteFormAuthority(UnsafeRawBufferPointer(rebasing: raw[head.target]))
                    .map { ($0.lowerBound + head.target.lowerBound)..<($0.upperBound + head.target.lowerBound) }
            }
        }
        HeaderFilter.appendUpstreamRequestHead(head, basePath: Array(basePath.utf8), clientAddress: Array("10.0.0.7".utf8),
                                               target: target.map { Array($0.utf8) }, authority: authorityRange,
                                               trustedPeer: trusted, to: out)
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

    @Test func untrustedClientsForwardingHeadersAreReplacedOrDropped() {
        let s = upstreamHead("GET / HTTP/1.1\r\nHost: api\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\n" +
                             "X-Forwarded-Host: evil\r\nForwarded: for=6.6.6.6;proto=https\r\nX-Real-IP: 6.6.6.6\r\n" +
                             "X-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /admin\r\nX_Real_IP: 6.6.6.6\r\n\r\n")
        #expect(s.contains("X-Forwarded-For: 10.0.0.7\r\n"))
        #expect(s.contains("X-Forwarded-Proto: http\r\n"))
        #expect(s.contains("X-Forwarded-Host: api\r\n"))
        for gone in ["evil", "https", "1.2.3.4", "6.6.6.6", "443", "/admin", "Forwarded:"] { #expect(!s.contains(gone)) }
    }

    @Test func trustedProxysForwardingHeadersAreKeptAndAppendedTo() {
        let s = upstreamHead("GET / HTTP/1.1\r\nHost: api\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-For: 5.6.7.8\r\n" +
                             "X-Forwarded-Proto: https\r\nX-Forwarded-Host: public.example\r\nX-Real-IP: 1.2.3.4\r\n" +
                             "Forwarded: for=1.2.3.4\r\n\r\n", trusted: true)
        #expect(s.contains("X-Forwarded-For: 1.2.3.4, 5.6.7.8, 10.0.0.7\r\n"))
        #expect(s.contains("X-Forwarded-Proto: https\r\n"))
        #expect(!s.contains("X-Forwarded-Proto: http\r\n"))
        #expect(s.contains("X-Forwarded-Host: public.example\r\n"))
        #expect(!s.contains("X-Forwarded-Host: api"))
        #expect(s.contains("X-Real-IP: 1.2.3.4\r\n") && s.contains("Forwarded: for=1.2.3.4\r\n"))
    }

    @Test func theCanonicalTargetIsWhatTheUpstreamGets() {
        let s = upstreamHead("GET /%61pi//users/./x?q=%2F.. HTTP/1.1\r\nHost: api\r\n\r\n", basePath: "/base",
                             target: "/api/users/x?q=%2F..")
        #expect(s.hasPrefix("GET /base/api/users/x?q=%2F.. HTTP/1.1\r\n"))
    }

    @Test func anAbsoluteFormAuthorityReplacesHost() {
        let s = upstreamHead("GET http://api.example.com/x HTTP/1.1\r\nHost: public.example\r\n\r\n", authority: true)
        #expect(s.hasPrefix("GET /x HTTP/1.1\r\nHost: api.example.com\r\n"))
        #expect(!s.contains("public.example"))
        #expect(s.contains("X-Forwarded-Host: api.example.com\r\n"))
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
        LocalResponse.notFound().append(to: out, close: false, date: HTTPDate.format(784_111_777))
        #expect(String(decoding: out.readable, as: UTF8.self) ==
                "HTTP/1.1 404 Not Found\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: application/json\r\n" +
                "Content-Length: 21\r\n\r\n{\"error\":\"not_found\"}")
    }

    @Test func rejectionBodiesAndChallengesSayWhatTheyAre() {
        let forbidden = LocalResponse.rejected(.appNotAllowed)
        #expect(forbidden.error.description == "forbidden" && forbidden.extraHeaders.isEmpty)
        #expect(LocalResponse.rejected(.stateUnavailable).error.description == "unavailable")
        let attest = LocalResponse.rejected(.counterNotIncreasing, schemes: ["AppAttest"])
        #expect(attest.error.description == "unauthorized")
        #expect(attest.extraHeaders == "WWW-Authenticate: AppAttest realm=\"attest-gateway\", error=\"counter_not_increasing\"\r\n")
        let both = LocalResponse.rejected(.missingToken, schemes: ["AppCheck", "DeviceCheck"])
        #expect(both.extraHeaders.contains("AppCheck realm") && both.extraHeaders.contains(", DeviceCheck realm"))
        #expect(LocalResponse.registrationRejected(.appNotAllowed).error.description == "forbidden")
    }
}
