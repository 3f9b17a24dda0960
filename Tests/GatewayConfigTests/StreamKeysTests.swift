import Testing
@testable import GatewayConfig

/// The keys of the protocols issue: upstream `protocol`, route `websocket`, `cors_preflight`, `stream_idle_timeout`,
/// App Check `token_query_parameter`; their defaults and their errors at file:line:col.
@Suite struct StreamKeysTests {
    func load(_ yaml: String) throws -> GatewayConfiguration {
        try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw")
    }

    /// Lines 1-5 fixed; the upstream's extra keys start at line 6, the route at the line after them.
    func file(upstream: String = "", route: String = "", verifiers: String = "") -> String {
        var y = "version: 1\nlisteners:\n  - address: 127.0.0.1:8080\nupstreams:\n  api:\n"
        y += "    url: \(upstream.contains("https") ? "https://api.internal" : "http://127.0.0.1:3000")\n"
        for line in upstream.split(separator: "\n") where !line.contains("url:") { y += "    \(line)\n" }
        y += "routes:\n  - match: {path_prefix: /}\n    upstream: api\n"
        for line in route.split(separator: "\n") { y += "    \(line)\n" }
        if !verifiers.isEmpty { y += verifiers + "\n" }
        return y
    }

    @Test func defaults() throws {
        let c = try load(file())
        #expect(c.upstreams[0].protocolVersion == .http1)
        #expect(!c.routes[0].webSocket)
        #expect(c.routes[0].corsPreflight == .verify)
        #expect(c.routes[0].streamIdleTimeoutMillis == 300_000)
    }

    @Test func protocolValues() throws {
        #expect(try load(file(upstream: "protocol: h2c")).upstreams[0].protocolVersion == .h2c)
        #expect(try load(file(upstream: "url: https\nprotocol: h2")).upstreams[0].protocolVersion == .h2)
        #expect(try load(file(upstream: "protocol: http1")).upstreams[0].protocolVersion == .http1)
    }

    @Test func protocolErrorsAreAtTheKey() {
        #expect(errorLines(file(upstream: "protocol: http3")) == [
            "gateway.yml:7:15: upstreams.api.protocol: invalid protocol \"http3\" (use http1, h2c or h2)"])
        #expect(errorLines(file(upstream: "protocol: h2")) == [
            "gateway.yml:7:15: upstreams.api.protocol: protocol h2 needs an https:// url (use h2c for http://)"])
        #expect(errorLines(file(upstream: "url: https\nprotocol: h2c")) == [
            "gateway.yml:7:15: upstreams.api.protocol: protocol h2c needs an http:// url (use h2 for https://)"])
    }

    @Test func websocketNeedsAnHTTP1Upstream() {
        #expect(errorLines(file(upstream: "protocol: h2c", route: "websocket: true")) == [
            "gateway.yml:11:16: routes[0].websocket: websocket needs an http1 upstream (\"api\" is HTTP/2; RFC 8441 is not offered)"])
        #expect(errorLines(file(upstream: "protocol: h2c", route: "websocket: false")).isEmpty)
    }

    @Test func routeStreamKeys() throws {
        let r = try load(file(route: "websocket: true\ncors_preflight: forward\nstream_idle_timeout: 90s")).routes[0]
        #expect(r.webSocket && r.corsPreflight == .forward && r.streamIdleTimeoutMillis == 90_000)
        #expect(errorLines(file(route: "cors_preflight: allow")) == [
            "gateway.yml:10:21: routes[0].cors_preflight: invalid cors_preflight \"allow\" (use verify or forward)"])
        #expect(errorLines(file(route: "websocket: yes please")).count == 1)
    }

    @Test func tokenQueryParameterIsUnreservedCharactersOnly() throws {
        let ok = "verifiers:\n  fb: {type: app_check, project_number: 1, token_query_parameter: ac_token}"
        #expect(errorLines(file(verifiers: ok)).isEmpty)
        let bad = "verifiers:\n  fb: {type: app_check, project_number: 1, token_query_parameter: \"a&b\"}"
        #expect(errorLines(file(verifiers: bad)).count == 1)
    }

    @Test func verdictTokenKeys() throws {
        let base = file()
        #expect(try load(base).verdictToken == nil)
        let v = try #require(try load(base + "verdict_token: {}\n").verdictToken)
        #expect(v.header == "X-Attest-Assertion" && v.ttlMillis == 60_000 && v.keyFile == nil && v.jwksPath == nil)
        let w = try #require(try load(base + "verdict_token: {header: X-Verdict, key_file: keys/v.pem, ttl: 2m, jwks_path: /.well-known/jwks}\n").verdictToken)
        #expect(w.header == "X-Verdict" && w.keyFile == "/etc/gw/keys/v.pem" && w.ttlMillis == 120_000 && w.jwksPath == "/.well-known/jwks")
        #expect(errorLines(base + "verdict_token: {header: Content-Length}\n").count == 1)
        #expect(errorLines(base + "verdict_token: {ttl: 0s}\n").count == 1)
        #expect(errorLines(base + "verdict_token: {jwks_path: jwks}\n").count == 1)
        #expect(errorLines(base + "verdict_token: {signing: hs256}\n").count == 1, "unknown keys are refused")
    }
}
