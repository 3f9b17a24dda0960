import Testing
@testable import GatewayConfig

/// Errors in the `routes` section. The added route is `routes[1]`, starting at line 10 (after a catch-all bound to
/// another host, which does not shadow it).
@Suite struct RouteErrorTests {
    func route(_ body: String, verifiers: String = "") -> [String] {
        errorLines(scopedPlus(body) + (verifiers.isEmpty ? "" : "\n" + verifiers))
    }

    static let verifiers = """
    verifiers:
      ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a]}
      fb: {type: app_check, project_number: 1}
    """

    @Test func unknownUpstreamIsReportedWithLineAndColumn() {
        #expect(route("  - match: {path: /x}\n    upstream: apii") == [
            "gateway.yml:11:15: routes[1].upstream: unknown upstream \"apii\"",
        ])
    }

    @Test func missingUpstreamIsReportedAtTheRoute() {
        #expect(route("  - match: {path: /x}") == ["gateway.yml:10:5: routes[1]: missing required key \"upstream\""])
    }

    @Test func missingMatchIsReportedAtTheRoute() {
        #expect(route("  - upstream: api") == ["gateway.yml:10:5: routes[1]: missing required key \"match\""])
    }

    @Test func unknownVerifierIsReportedAtTheListItem() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    verify: [ios, x]", verifiers: Self.verifiers) == [
            "gateway.yml:12:19: routes[1].verify[1]: unknown verifier \"x\"",
        ])
    }

    @Test func pathAndPathPrefixAreMutuallyExclusive() {
        #expect(route("  - match: {path: /x, path_prefix: /y}\n    upstream: api") == [
            "gateway.yml:10:36: routes[1].match.path_prefix: path and path_prefix are mutually exclusive",
        ])
    }

    @Test func matchNeedsAPath() {
        #expect(route("  - match: {methods: [GET]}\n    upstream: api") == [
            "gateway.yml:10:12: routes[1].match: missing required key \"path\" or \"path_prefix\"",
        ])
    }

    @Test func pathPrefixMustBeAbsolute() {
        #expect(route("  - match: {path_prefix: api}\n    upstream: api") == [
            "gateway.yml:10:26: routes[1].match.path_prefix: must start with \"/\"",
        ])
    }

    @Test func invalidMethodIsRejected() {
        #expect(route("  - match: {path: /x, methods: [\"GE T\"]}\n    upstream: api") == [
            "gateway.yml:10:32: routes[1].match.methods: invalid method \"GE T\"",
        ])
    }

    @Test func limitedUseNeedsAReplayCapableVerifier() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    verify: [ios]\n    limited_use: true", verifiers: Self.verifiers) == [
            "gateway.yml:13:18: routes[1].limited_use: limited_use needs an app_check, device_check or play_integrity verifier in verify",
        ])
        #expect(route("  - match: {path: /x}\n    upstream: api\n    verify: [ios, fb]\n    limited_use: true", verifiers: Self.verifiers).isEmpty)
        #expect(route("  - match: {path: /x}\n    upstream: api\n    limited_use: true") == [
            "gateway.yml:12:18: routes[1].limited_use: limited_use needs an app_check, device_check or play_integrity verifier in verify",
        ])
    }

    @Test func negativeMaxRiskMetricIsRejected() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    max_risk_metric: -1") == [
            "gateway.yml:12:22: routes[1].max_risk_metric: must be at least 0",
        ])
    }

    @Test func unknownModeListsTheChoices() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    mode: audit") == [
            "gateway.yml:12:11: routes[1].mode: invalid mode \"audit\" (use enforce or monitor)",
        ])
    }

    @Test func duplicateRouteNamesAreRejected() {
        #expect(route("  - name: route-0\n    match: {path: /x}\n    upstream: api") == [
            "gateway.yml:10:11: routes[1].name: duplicate route name \"route-0\"",
        ])
    }

    @Test func routeBodyLimitMayOnlyLowerTheGlobalOne() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    max_body_bytes: 20MiB") == [
            "gateway.yml:12:21: routes[1].max_body_bytes: must not exceed limits.max_body_bytes (10485760 bytes)",
        ])
    }

    @Test func stringWhereBooleanBelongsInARouteIsAWrongType() {
        #expect(route("  - match: {path: /x}\n    upstream: api\n    require_all: \"true\"") == [
            "gateway.yml:12:18: routes[1].require_all: expected a boolean (true or false)",
        ])
    }
}
