import Testing
@testable import GatewayProxy
import GatewayConfig

@Suite struct RouteTableTests {
    func table(_ routes: [RouteConfig]) -> RouteTable {
        var config = GatewayConfiguration(
            version: 1,
            listeners: [ListenerConfig(name: "l", address: SocketAddressConfig(host: "127.0.0.1", port: 0))],
            admin: nil, limits: LimitsConfig(), state: StateConfig(),
            upstreams: [UpstreamConfig(name: "a", host: "127.0.0.1", port: 1), UpstreamConfig(name: "b", host: "127.0.0.1", port: 2)],
            verifiers: [], routes: routes)
        config.limits.maxBodyBytes = 1000
        return RouteTable(config: config)
    }

    func match(_ t: RouteTable, _ method: String, _ host: String?, _ path: String) -> Int? {
        let m = Array(method.utf8), p = Array(path.utf8), h = host.map { Array($0.utf8) }
        return m.withUnsafeBytes { mb in
            p.withUnsafeBytes { pb in
                if let h { return h.withUnsafeBytes { hb in t.match(method: mb, host: hb, path: pb) } }
                return t.match(method: mb, host: nil, path: pb)
            }
        }
    }

    @Test func firstMatchingRouteWins() {
        var a = RouteConfig(name: "pay", match: RouteMatchConfig(path: .prefix("/api/pay"), methods: ["POST"]), upstream: "b")
        a.maxBodyBytes = 10
        let b = RouteConfig(name: "all", match: RouteMatchConfig(path: .prefix("/")), upstream: "a")
        let t = table([a, b])
        #expect(match(t, "POST", "x", "/api/payments") == 0)
        #expect(match(t, "GET", "x", "/api/payments") == 1)
        #expect(t.routes[0].upstreamIndex == 1)
        #expect(t.routes[0].maxBodyBytes == 10)
        #expect(t.routes[1].maxBodyBytes == 1000)
    }

    @Test func exactPathMatchesOnlyItself() {
        let t = table([RouteConfig(name: "x", match: RouteMatchConfig(path: .exact("/health")), upstream: "a")])
        #expect(match(t, "GET", nil, "/health") == 0)
        #expect(match(t, "GET", nil, "/health/x") == nil)
        #expect(match(t, "GET", nil, "/healt") == nil)
    }

    @Test func hostMatchIgnoresCaseAndPortUnlessConfigured() {
        let t = table([
            RouteConfig(name: "h", match: RouteMatchConfig(path: .prefix("/"), host: "api.example.com"), upstream: "a"),
            RouteConfig(name: "p", match: RouteMatchConfig(path: .prefix("/"), host: "other.example.com:8443"), upstream: "a"),
        ])
        #expect(match(t, "GET", "API.Example.com", "/") == 0)
        #expect(match(t, "GET", "api.example.com:8080", "/") == 0)
        #expect(match(t, "GET", "api.example.org", "/") == nil)
        #expect(match(t, "GET", nil, "/") == nil)
        #expect(match(t, "GET", "other.example.com:8443", "/") == 1)
        #expect(match(t, "GET", "other.example.com:9000", "/") == nil)
    }

    @Test func noRouteMeansNil() {
        let t = table([RouteConfig(name: "x", match: RouteMatchConfig(path: .prefix("/api")), upstream: "a")])
        #expect(match(t, "GET", nil, "/other") == nil)
    }

    @Test func routesNamingVerifiersRequireVerification() {
        var r = RouteConfig(name: "v", match: RouteMatchConfig(path: .prefix("/")), upstream: "a")
        r.verify = ["firebase"]
        #expect(table([r]).routes[0].requiresVerification)
    }
}
