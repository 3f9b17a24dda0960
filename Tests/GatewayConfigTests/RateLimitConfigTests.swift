import Testing
@testable import GatewayConfig
import Foundation

/// `rate_limit` on routes and `registration_rate_limit` on verifiers with registration endpoints.
@Suite struct RateLimitConfigTests {
    static let appAttest = "verifiers:\n  ios:\n    type: app_attest\n    team_id: ABCDE12345\n    bundle_ids: [a.b]\n"

    func route(_ limit: String) throws -> RouteConfig {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "    upstream: api", with: "    upstream: api\n    rate_limit: \(limit)")
        return try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw").routes[0]
    }

    func routeErrors(_ limit: String) -> [String] {
        errorLines(Fixtures.minimal.replacingOccurrences(of: "    upstream: api", with: "    upstream: api\n    rate_limit: \(limit)"))
    }

    @Test func ratesPerSecondMinuteAndHour() throws {
        #expect(try route("{rate: 20/s, burst: 40}").rateLimit == RateLimitConfig(key: .clientAddress, ratePerSecond: 20, burst: 40))
        #expect(try route("{key: app_id, rate: 600/m}").rateLimit == RateLimitConfig(key: .appID, ratePerSecond: 10, burst: 10))
        #expect(try route("{key: key_id, rate: 36/h, burst: 3}").rateLimit == RateLimitConfig(key: .keyID, ratePerSecond: 0.01, burst: 3))
        #expect(try route("{rate: 1/h}").rateLimit?.burst == 1)
    }

    @Test func badRateLimitsAreReportedAtTheirLine() {
        #expect(routeErrors("{rate: 0}") == ["gateway.yml:10:24: routes[0].rate_limit.rate: must be greater than 0"])
        #expect(routeErrors("{rate: 5/d}") == ["gateway.yml:10:24: routes[0].rate_limit.rate: invalid rate \"5/d\" (use 20/s, 600/m or 1000/h)"])
        #expect(routeErrors("{rate: 5/s, burst: 0}") == ["gateway.yml:10:36: routes[0].rate_limit.burst: must be at least 1"])
        #expect(routeErrors("{key: user, rate: 5/s}").count == 1)
        #expect(routeErrors("{burst: 5}") == ["gateway.yml:10:17: routes[0].rate_limit: missing required key \"rate\""])
    }

    @Test func registrationLimitsDefaultOnAndTurnOff() throws {
        func ios(_ extra: String) throws -> AppAttestVerifierConfig? {
            let c = try ConfigLoader.load(yaml: minimalPlus(Self.appAttest + extra), fileName: "gateway.yml", baseDirectory: "/etc/gw")
            guard case .appAttest(let v)? = c.verifiers.first?.kind else { return nil }
            return v
        }
        #expect(try ios("")?.registrationRateLimit == RateLimitConfig(ratePerSecond: 10, burst: 20))
        #expect(try ios("    registration_rate_limit: {rate: 0}\n")?.registrationRateLimit == nil)
        #expect(try ios("    registration_rate_limit: {rate: 2/s, burst: 5}\n")?.registrationRateLimit == RateLimitConfig(ratePerSecond: 2, burst: 5))
        #expect(errorLines(minimalPlus(Self.appAttest + "    registration_rate_limit: {key: app_id, rate: 2/s}\n")).count == 1)
    }
}
