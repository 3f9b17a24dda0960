import Foundation
import OutboundHTTP
import Testing

/// Each test starts its own server on 127.0.0.1 and kills it before returning.
@Suite struct CurlHTTPClientTests {
    let client = CurlHTTPClient(userAgent: "attest-gateway-test")

    func withServer(_ body: (TestServer) throws -> Void) throws {
        let directory = try TempDirectory()
        defer { directory.cleanUp() }
        let server = try TestServer(directory: directory)
        defer { server.stop() }
        try body(server)
    }

    @Test func getReturnsStatusHeadersAndBody() throws {
        try withServer { server in
            let response = try client.get(server.base + "/jwks", headers: [("X-Req", "hello")], timeoutMillis: 5_000,
                                          maxBodyBytes: 1_000).get()
            #expect(response.status == 200)
            #expect(response.body == Array(#"{"keys":[]}"#.utf8))
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("CACHE-CONTROL") == "public, max-age=120")
            #expect(response.header("X-Echo") == "hello")
            #expect(response.header("X-Echo-Agent") == "attest-gateway-test")
            #expect(response.header("X-Absent") == nil)
        }
    }

    @Test func notFoundIsAResponseNotAnError() throws {
        try withServer { server in
            let response = try client.get(server.base + "/nope", headers: [], timeoutMillis: 5_000,
                                          maxBodyBytes: 1_000).get()
            #expect(response.status == 404)
            #expect(response.body == Array("not found".utf8))
        }
    }

    @Test func redirectsAreNotFollowed() throws {
        try withServer { server in
            let response = try client.get(server.base + "/redirect", headers: [], timeoutMillis: 5_000,
                                          maxBodyBytes: 1_000).get()
            #expect(response.status == 302)
            #expect(response.header("Location") == "/jwks")
        }
    }

    @Test func postSendsTheBody() throws {
        try withServer { server in
            let body = (0..<5_000).map { UInt8(truncatingIfNeeded: $0) }
            let response = try client.post(server.base + "/echo", headers: [("Content-Type", "application/octet-stream")],
                                           body: body, timeoutMillis: 5_000, maxBodyBytes: 10_000).get()
            #expect(response.status == 200)
            #expect(response.body == body)
            #expect(response.header("X-Expect") == "none")
        }
    }

    @Test func bodyOverTheLimitFails() throws {
        try withServer { server in
            for path in ["/big", "/stream-big"] {
                let result = client.get(server.base + path, headers: [], timeoutMillis: 5_000, maxBodyBytes: 50_000)
                #expect(throws: HTTPClientError.self) { try result.get() }
                if case .failure(let error) = result { #expect(error.kind == .bodyTooLarge, "\(path): \(error)") }
            }
            let exact = client.get(server.base + "/big", headers: [], timeoutMillis: 5_000, maxBodyBytes: 100_000)
            let exactBody = try exact.get().body
            #expect(exactBody.count == 100_000)
        }
    }

    @Test func connectionRefusedIsAConnectError() throws {
        let port = try refusedPort()
        let result = client.get("http://127.0.0.1:\(port)/", headers: [], timeoutMillis: 2_000, maxBodyBytes: 100)
        guard case .failure(let error) = result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .connect, "\(error)")
    }

    @Test func silentServerTimesOut() throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let start = Date()
        let result = client.get("http://127.0.0.1:\(listener.port)/", headers: [], timeoutMillis: 500, maxBodyBytes: 100)
        let elapsed = Date().timeIntervalSince(start)
        guard case .failure(let error) = result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .timeout, "\(error)")
        #expect(elapsed >= 0.4 && elapsed < 3, "took \(elapsed) s")
    }

    @Test func onlyHTTPAndHTTPSSchemes() {
        let result = client.get("file:///etc/hostname", headers: [], timeoutMillis: 1_000, maxBodyBytes: 100)
        guard case .failure(let error) = result else { Issue.record("expected a failure"); return }
        #expect(error.kind == .invalidRequest, "\(error)")
    }

    @Test func httpsVerifiesAgainstTheGivenCAFile() throws {
        let directory = try TempDirectory()
        defer { directory.cleanUp() }
        let tls = try makeSelfSignedCertificate(in: directory)
        let server = try TestServer(directory: directory, tls: tls)
        defer { server.stop() }

        let trusting = CurlHTTPClient(caFile: tls.cert)
        let response = try trusting.get(server.tlsBase + "/jwks", headers: [], timeoutMillis: 5_000,
                                        maxBodyBytes: 1_000).get()
        #expect(response.status == 200)
        #expect(response.body == Array(#"{"keys":[]}"#.utf8))

        let systemStore = CurlHTTPClient()
        let result = systemStore.get(server.tlsBase + "/jwks", headers: [], timeoutMillis: 5_000, maxBodyBytes: 1_000)
        guard case .failure(let error) = result else { Issue.record("an unknown CA must be rejected"); return }
        #expect(error.kind == .tls, "\(error)")
    }

    @Test func keySetFetchReturnsBodyAndCacheControl() throws {
        try withServer { server in
            let fetched = try client.keySetFetch(url: server.base + "/jwks", timeoutMillis: 5_000)()
            #expect(fetched.body == Array(#"{"keys":[]}"#.utf8))
            #expect(fetched.cacheControl == "public, max-age=120")
        }
    }

    @Test func keySetFetchRejectsANon200Status() throws {
        try withServer { server in
            #expect {
                try client.keySetFetch(url: server.base + "/missing", timeoutMillis: 5_000)()
            } throws: { error in
                (error as? HTTPClientError)?.kind == .unexpectedStatus(404)
            }
        }
    }
}
