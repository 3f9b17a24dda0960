import Testing
@testable import GatewayConfig

/// First match wins: a route that an earlier one shadows can never match, and that is an error (its verifiers would
/// silently never run). Each protection is also tried from the other side: what only looks like shadowing must load.
@Suite struct RouteOrderTests {
    /// Errors of a file whose routes start at line 8, one per line.
    func routes(_ lines: String...) -> [String] {
        errorLines(Fixtures.withRoutes(lines.map { "  - " + $0 }.joined(separator: "\n")))
    }

    func shadowed(_ later: String, by earlier: String, index: Int = 1, line: Int = 9, earlierLine: Int = 8) -> String {
        "gateway.yml:\(line):5: routes[\(index)]: route \"\(later)\" can never match: route \"\(earlier)\" (line \(earlierLine)) "
            + "catches every request it would (order routes from specific to general)"
    }

    @Test func catchAllAboveASpecificRouteIsAnError() {
        #expect(routes("{name: public, match: {path_prefix: /}, upstream: api}",
                       "{name: payments, match: {path_prefix: /api/payments/}, upstream: api, verify: []}")
            == [shadowed("payments", by: "public")])
    }

    @Test func theMessageNamesBothRoutesAndBothLines() {
        let yaml = Fixtures.withRoutes("""
          - name: api
            match: {path_prefix: /api/}
            upstream: api
          - name: health
            match: {path: /health}
            upstream: api
          - name: payments
            match:
              path_prefix: /api/payments/
              methods: [POST]
            upstream: api
        """)
        #expect(errorLines(yaml) == [shadowed("payments", by: "api", index: 2, line: 14, earlierLine: 8)])
    }

    @Test func prefixCoversLongerPrefixesAndExactPathsUnderIt() {
        #expect(routes("{name: a, match: {path_prefix: /api/}, upstream: api}",
                       "{name: b, match: {path: /api/users}, upstream: api}") == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path_prefix: /api/}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/users/}, upstream: api}") == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path_prefix: /api/}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/}, upstream: api}") == [shadowed("b", by: "a")])
        // Prefixes compare bytes: "/api" takes "/api2/…" too.
        #expect(routes("{name: a, match: {path_prefix: /api}, upstream: api}",
                       "{name: b, match: {path_prefix: /api2/}, upstream: api}") == [shadowed("b", by: "a")])
    }

    @Test func anExactPathCoversOnlyItself() {
        #expect(routes("{name: a, match: {path: /x}, upstream: api}", "{name: b, match: {path: /x}, upstream: api}")
            == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path: /api/}, upstream: api}", "{name: b, match: {path_prefix: /api/}, upstream: api}").isEmpty)
        #expect(routes("{name: a, match: {path: /x}, upstream: api}", "{name: b, match: {path: /x/}, upstream: api}").isEmpty)
    }

    @Test func specificBeforeGeneralIsFine() {
        #expect(routes("{name: a, match: {path: /api/users}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/users/}, upstream: api}",
                       "{name: c, match: {path_prefix: /api/}, upstream: api}",
                       "{name: d, match: {path_prefix: /}, upstream: api}").isEmpty)
        // "/api/" does not cover "/api" (the exact path without its slash).
        #expect(routes("{name: a, match: {path_prefix: /api/}, upstream: api}", "{name: b, match: {path: /api}, upstream: api}").isEmpty)
        #expect(routes("{name: a, match: {path_prefix: /api/x/}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/}, upstream: api}").isEmpty)
    }

    @Test func methodsShadowOnlyWhenTheyAreASuperset() {
        // Any method covers a listed one; a superset covers a subset (names are compared upper-cased).
        #expect(routes("{name: a, match: {path_prefix: /api/}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/x/, methods: [POST]}, upstream: api}") == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path_prefix: /api/, methods: [GET, POST]}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/x/, methods: [post]}, upstream: api}") == [shadowed("b", by: "a")])
        // Requests the earlier route leaves alone still reach the later one.
        #expect(routes("{name: a, match: {path_prefix: /api/, methods: [GET]}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/x/, methods: [GET, POST]}, upstream: api}").isEmpty)
        #expect(routes("{name: a, match: {path_prefix: /api/, methods: [GET]}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/x/}, upstream: api}").isEmpty)
        #expect(routes("{name: a, match: {path_prefix: /api/, methods: [GET]}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/x/, methods: [PUT]}, upstream: api}").isEmpty)
    }

    @Test func hostsShadowOnlyTheSameHost() {
        // No host covers every host; the same host covers itself however it is spelled.
        #expect(routes("{name: a, match: {path_prefix: /}, upstream: api}",
                       "{name: b, match: {path_prefix: /x/, host: api.example.com}, upstream: api}") == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path_prefix: /, host: api.example.com}, upstream: api}",
                       "{name: b, match: {path_prefix: /x/, host: API.Example.COM.}, upstream: api}") == [shadowed("b", by: "a")])
        // A host without a port matches it on any port.
        #expect(routes("{name: a, match: {path_prefix: /, host: api.example.com}, upstream: api}",
                       "{name: b, match: {path_prefix: /x/, host: \"api.example.com:8443\"}, upstream: api}") == [shadowed("b", by: "a")])
        #expect(routes("{name: a, match: {path_prefix: /, host: \"api.example.com:8443\"}, upstream: api}",
                       "{name: b, match: {path_prefix: /x/, host: \"API.example.com.:8443\"}, upstream: api}") == [shadowed("b", by: "a")])
    }

    @Test func otherHostsAndPortsAreNotShadowed() {
        for (earlier, later) in [("api.example.com", "www.example.com"), ("api.example.com:8443", "api.example.com"),
                                 ("api.example.com:8443", "api.example.com:9443"), ("api.example.com", "api.example.com.evil.test"),
                                 ("example.com", "api.example.com")] {
            #expect(routes("{name: a, match: {path_prefix: /, host: \"\(earlier)\"}, upstream: api}",
                           "{name: b, match: {path_prefix: /x/, host: \"\(later)\"}, upstream: api}").isEmpty, "\(earlier) / \(later)")
        }
        // A route bound to a host leaves requests for every other host to a later route without one.
        #expect(routes("{name: a, match: {path_prefix: /, host: api.example.com}, upstream: api}",
                       "{name: b, match: {path_prefix: /x/}, upstream: api}").isEmpty)
    }

    @Test func onlyTheFirstShadowingRouteIsNamedAndEveryShadowedRouteIsReported() {
        #expect(routes("{name: a, match: {path_prefix: /}, upstream: api}",
                       "{name: b, match: {path_prefix: /api/}, upstream: api}",
                       "{name: c, match: {path: /api/x}, upstream: api}") == [
            shadowed("b", by: "a"), shadowed("c", by: "a", index: 2, line: 10),
        ])
    }

    @Test func routesWithOtherErrorsAreLeftOutOfTheComparison() {
        // An earlier route that did not load cannot be blamed for shadowing.
        #expect(routes("{name: a, match: {path_prefix: /}, upstream: nope}",
                       "{name: b, match: {path_prefix: /api/}, upstream: api}") == [
            "gateway.yml:8:50: routes[0].upstream: unknown upstream \"nope\"",
        ])
    }

    // MARK: prefix warning

    func warnings(_ yaml: String) -> [String] {
        let lines = diagnosticLines(yaml)
        #expect(lines.errors.isEmpty)
        return lines.warnings
    }

    @Test func aPrefixWithoutTrailingSlashWarnsAtItsValue() {
        #expect(warnings(Fixtures.withRoutes("  - {name: payments, match: {path_prefix: /api/payments}, upstream: api}")) == [
            "gateway.yml:8:43: routes[0].match.path_prefix: warning: path_prefix \"/api/payments\" also matches longer segments "
                + "(\"/api/paymentsX\"); end it with \"/\" (\"/api/payments/\"), or use an exact path \"/api/payments\" and a path_prefix \"/api/payments/\"",
        ])
    }

    @Test func prefixesEndingInASlashAndExactPathsDoNotWarn() {
        #expect(warnings(Fixtures.withRoutes("""
          - {match: {path: /api/payments}, upstream: api}
          - {match: {path_prefix: /api/payments/}, upstream: api}
          - {match: {path_prefix: /}, upstream: api}
        """)).isEmpty)
    }

    @Test func warningsDoNotFailTheLoad() throws {
        let loaded = try ConfigLoader.loadDetailed(yaml: Fixtures.withRoutes("  - {match: {path_prefix: /api}, upstream: api}"),
                                                   fileName: "gateway.yml", baseDirectory: "")
        #expect(loaded.warnings.count == 1)
        #expect(loaded.warnings.first?.path == "routes[0].match.path_prefix")
        // Warnings stay out of the configuration itself, so reload comparisons see only what is configured.
        #expect(loaded.configuration == (try ConfigLoader.load(yaml: Fixtures.withRoutes("  - {match: {path_prefix: /api}, upstream: api}"),
                                                               fileName: "gateway.yml", baseDirectory: "")))
    }

    @Test func warningsComeOutWithTheErrorsOfAFileThatFails() {
        let lines = diagnosticLines(Fixtures.withRoutes("  - {match: {path_prefix: /api}, upstream: nope}"))
        #expect(lines.errors == ["gateway.yml:8:44: routes[0].upstream: unknown upstream \"nope\""])
        #expect(lines.warnings.count == 1)
        #expect(lines.warnings.first?.hasPrefix("gateway.yml:8:27: routes[0].match.path_prefix: warning: ") == true)
    }

    @Test func theReferenceExampleLoadsWithOneWarning() throws {
        let loaded = try ConfigLoader.loadDetailed(yaml: Fixtures.fullExample, fileName: "gateway.yml", baseDirectory: "/etc/gw")
        #expect(loaded.warnings.map(\.path) == ["routes[0].match.path_prefix"])
    }

    // MARK: limited_use (an existing protection, tried from both sides)

    static let verifiers = """
    verifiers:
      ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a]}
      fb: {type: app_check, project_number: 1}
      dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: k.p8}
    """

    @Test func limitedUseNeedsAVerifierThatCanHonourIt() {
        let route = { (verify: String, extra: String) in
            errorLines(Fixtures.withRoutes("  - {match: {path_prefix: /x/}, upstream: api, verify: \(verify), limited_use: true\(extra)}\n")
                       + Self.verifiers)
        }
        #expect(route("[ios]", "") == [
            "gateway.yml:8:76: routes[0].limited_use: limited_use needs an app_check, device_check or play_integrity verifier in verify",
        ])
        #expect(route("[]", "") == [
            "gateway.yml:8:73: routes[0].limited_use: limited_use needs an app_check, device_check or play_integrity verifier in verify",
        ])
        // require_all does not turn an App Attest verifier into one that can consume tokens.
        #expect(route("[ios]", ", require_all: true").count == 1)
        #expect(route("[dc]", "").isEmpty)
        #expect(route("[fb]", "").isEmpty)
        #expect(route("[ios, dc]", "").isEmpty)
    }
}
