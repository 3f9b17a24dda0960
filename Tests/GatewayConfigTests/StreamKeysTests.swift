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

    func clusterFile(_ upstream: String) -> String {
        "version: 1\nlisteners:\n  - address: 127.0.0.1:8080\nupstreams:\n  api:\n" + upstream +
            "routes:\n  - match: {path_prefix: /}\n    upstream: api\n"
    }

    @Test func clusterKeys() throws {
        let u = try load(clusterFile(
            "    endpoints: [\"http://10.0.0.5:3000\", \"http://api-2.internal:3000\"]\n" +
            "    balance: least_request\n" +
            "    health_check: {path: /healthz, interval: 2s, timeout: 500ms, unhealthy_threshold: 4, healthy_threshold: 1}\n" +
            "    outlier: {consecutive_failures: 3, ejection: 10s}\n" +
            "    dns_refresh: 5s\n")).upstreams[0]
        #expect(u.endpoints == [UpstreamEndpointConfig(host: "10.0.0.5", port: 3000), UpstreamEndpointConfig(host: "api-2.internal", port: 3000)])
        #expect(u.host == "10.0.0.5" && u.port == 3000)
        #expect(u.cluster.balance == .leastRequest && u.cluster.outlierFailures == 3 && u.cluster.ejectionMillis == 10_000)
        #expect(u.cluster.healthCheck == {
            var h = HealthCheckConfig(path: "/healthz")
            h.intervalMillis = 2_000; h.timeoutMillis = 500; h.unhealthyThreshold = 4; h.healthyThreshold = 1
            return h
        }())
        #expect(u.cluster.dnsRefreshMillis == 5_000)
        let single = try load(clusterFile("    url: http://127.0.0.1:3000\n")).upstreams[0]
        #expect(single.endpoints == [UpstreamEndpointConfig(host: "127.0.0.1", port: 3000)] && single.cluster == ClusterConfig())
    }

    @Test func clusterErrorsAreAtTheirItems() {
        #expect(errorLines(clusterFile("    endpoints: [\"http://a:1\", \"https://b:2\"]\n")) == [
            "gateway.yml:6:31: upstreams.api.endpoints[1]: every endpoint must have the scheme and base path of the first (http, \"\")"])
        #expect(errorLines(clusterFile("    endpoints: [\"http://a:1\", \"http://a:1\"]\n")) == [
            "gateway.yml:6:31: upstreams.api.endpoints[1]: endpoint http://a:1 is listed twice"])
        #expect(errorLines(clusterFile("    endpoints: [\"ftp://a:1\"]\n")).count == 1)
        #expect(errorLines(clusterFile("    url: http://a:1\n    endpoints: [\"http://b:1\"]\n")).count == 1)
        #expect(errorLines(clusterFile("    url: http://a:1\n    balance: random\n")).count == 1)
        #expect(errorLines(clusterFile("    url: http://a:1\n    health_check: {interval: 1s}\n")).count == 1, "path is required")
        #expect(errorLines(clusterFile("    url: http://a:1\n    outlier: {consecutive: 1}\n")).count == 1)
    }
}
