import Testing
import HTTP1
import GatewayCore

/// `HTTP1RequestHead.assemble`: an HTTP/2 request's parts checked by the rules a head on the wire is, so a
/// stream cannot carry what an HTTP/1.1 connection would have refused.
@Suite struct RequestHeadAssembleTests {
    /// Builds the parts the way H2RequestHead holds them: every name and value back to back.
    struct Parts {
        var bytes: [UInt8] = []
        var method = 0..<0, path = 0..<0, authority = 0..<0
        var fields: [(name: Range<Int>, value: Range<Int>)] = []

        init(_ method: String, _ path: String, authority: String = "api.example", _ fields: [(String, String)] = []) {
            self.method = put(method)
            self.path = put(path)
            self.authority = put(authority)
            for (n, v) in fields { self.fields.append((put(n), put(v))) }
        }

        private mutating func put(_ s: String) -> Range<Int> {
            let start = bytes.count
            bytes.append(contentsOf: Array(s.utf8))
            return start..<bytes.count
        }

        func assemble(hasBody: Bool = false, limits: HTTP1Limits = HTTP1Limits()) -> Result<HTTP1RequestHead, HTTP1ParseError> {
            HTTP1RequestHead.assemble(bytes: bytes, method: method, target: path, authority: authority, fields: fields,
                                      hasBody: hasBody, limits: limits)
        }
    }

    func head(_ r: Result<HTTP1RequestHead, HTTP1ParseError>) -> HTTP1RequestHead? {
        if case .success(let h) = r { return h }
        return nil
    }

    func code(_ r: Result<HTTP1RequestHead, HTTP1ParseError>) -> HTTP1ParseError.Code? {
        if case .failure(let e) = r { return e.code }
        return nil
    }

    func fields(_ h: HTTP1RequestHead) -> [String] { h.fields.map { "\(h.string($0.name)): \(h.string($0.value))" } }

    @Test func theAuthorityIsTheHostAndComesFirst() throws {
        let h = try #require(head(Parts("GET", "/v1/items?x=1", [("accept", "*/*"), ("host", "other.example")]).assemble()))
        #expect(h.string(h.method) == "GET" && h.string(h.target) == "/v1/items?x=1")
        #expect(fields(h) == ["host: api.example", "accept: */*"])   // the client's own host field is dropped
        #expect(h.host.map { h.string($0) } == "api.example")
        #expect(h.version == .http11 && !h.keepAlive && !h.expectsContinue && h.framing == .none)
    }

    @Test func withoutAnAuthorityOneHostFieldNamesTheHost() throws {
        let h = try #require(head(Parts("GET", "/", authority: "", [("host", "h.example")]).assemble()))
        #expect(h.host.map { h.string($0) } == "h.example")
        #expect(code(Parts("GET", "/", authority: "").assemble()) == .missingHost)
        #expect(code(Parts("GET", "/", authority: "", [("host", "a"), ("host", "b")]).assemble()) == .multipleHost)
        #expect(code(Parts("GET", "/", authority: "a b").assemble()) == .invalidHost)
    }

    @Test func teExpectAndCookiesFollowRFC9113() throws {
        let h = try #require(head(Parts("POST", "/", [("te", "trailers"), ("expect", "100-continue"),
                                                      ("cookie", "a=1"), ("x", "y"), ("cookie", "b=2")]).assemble()))
        #expect(fields(h) == ["host: api.example", "x: y", "cookie: a=1; b=2"])
        #expect(!h.expectsContinue)
    }

    @Test func emptyCookieCrumbsAddNothingAndCrumbsCountAsOneField() throws {
        // Found by the h2-request-head fuzz target: an empty last crumb left "a=1; " where the wire reads "a=1;".
        let h = try #require(head(Parts("GET", "/", [("cookie", "a=1"), ("cookie", " "), ("cookie", "")]).assemble()))
        #expect(fields(h) == ["host: api.example", "cookie: a=1"])
        let crumbs = (0..<150).map { ("cookie", "c\($0)=v") }   // browsers split cookies like this over h2
        let many = try #require(head(Parts("GET", "/", crumbs).assemble()))
        #expect(many.fields.count == 2)
    }

    @Test func aBodyWithoutALengthIsChunkedAndALengthIsKept() throws {
        let chunked = try #require(head(Parts("POST", "/up").assemble(hasBody: true)))
        #expect(chunked.framing == .chunked)
        let sized = try #require(head(Parts("POST", "/up", [("content-length", "5")]).assemble(hasBody: true)))
        #expect(sized.framing == .contentLength(5))
    }

    @Test func framingDoubtsAreRefusedAsOnTheWire() {
        #expect(code(Parts("POST", "/", [("content-length", "5"), ("content-length", "6")]).assemble(hasBody: true))
                == .conflictingContentLength)
        #expect(code(Parts("POST", "/", [("content-length", "+5")]).assemble(hasBody: true)) == .invalidContentLength)
        #expect(code(Parts("POST", "/", [("content-length", "5"), ("transfer-encoding", "chunked")]).assemble(hasBody: true))
                == .contentLengthWithTransferEncoding)
        #expect(code(Parts("POST", "/", [("transfer-encoding", "gzip")]).assemble(hasBody: true))
                == .unsupportedTransferEncoding)
    }

    @Test func bytesTheWireWouldRefuseAreRefused() {
        #expect(code(Parts("GET", "/", [("x", "a\u{01}b")]).assemble()) == .invalidHeaderValue)
        #expect(code(Parts("GET", "/", [("x", "a\rb")]).assemble()) == .bareCR)
        #expect(code(Parts("GET", "/", [("bad name", "v")]).assemble()) == .invalidHeaderName)
        #expect(code(Parts("GET", "/", [("", "v")]).assemble()) == .invalidHeaderName)
        #expect(code(Parts("G(T", "/").assemble()) == .invalidMethod)
        #expect(code(Parts("GET", "/a b").assemble()) == .invalidTarget)
        #expect(code(Parts("GET", "a/b").assemble()) == .invalidTarget)
        #expect(code(Parts("GET", "*").assemble()) == .invalidTarget)   // asterisk-form only for OPTIONS
        #expect(code(Parts("CONNECT", "").assemble()) == .malformedRequestLine)
    }

    @Test func valuesAreTrimmedAsTheParserTrimsThem() throws {
        let h = try #require(head(Parts("GET", "/", [("x", " padded\t")]).assemble()))
        #expect(fields(h).last == "x: padded")
    }

    @Test func theLimitsAreTheHTTP1Limits() {
        var limits = HTTP1Limits()
        limits.maxTargetBytes = 10
        #expect(code(Parts("GET", "/" + String(repeating: "a", count: 10)).assemble(limits: limits)) == .targetTooLong)
        limits = HTTP1Limits(maxHeaderBytes: 200, maxHeaders: 3)
        #expect(code(Parts("GET", "/", [("x", String(repeating: "v", count: 200))]).assemble(limits: limits))
                == .headerTooLarge)
        #expect(code(Parts("GET", "/", [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]).assemble(limits: limits))
                == .tooManyHeaders)
    }
}
