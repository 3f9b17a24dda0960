import GatewayCore
import Testing
@testable import GatewayConfig
import Foundation

/// The keys of the enforcement-boundary issue: `listeners[].trusted_proxies`, `limits.max_held_body_bytes`,
/// `verifiers.<device_check>.replay_window`, and how `match.host` is normalised.
@Suite struct BoundaryKeysTests {
    func load(_ yaml: String) throws -> GatewayConfiguration {
        try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw")
    }

    /// The minimal file with its listener (line 3) given `extra` lines (from line 4).
    func withListener(_ extra: String) -> String {
        Fixtures.minimal.replacingOccurrences(of: "  - address: 127.0.0.1:8080", with: "  - address: 127.0.0.1:8080\n" + extra)
    }

    // MARK: trusted_proxies

    @Test func trustedProxiesDefaultToNone() throws {
        #expect(try load(Fixtures.minimal).listeners[0].trustedProxies.isEmpty)
    }

    @Test func trustedProxiesAreCIDRBlocksAndABareAddressIsOneHost() throws {
        let listener = try load(withListener("    trusted_proxies: [10.0.0.0/8, 127.0.0.1/32, \"::1/128\", 192.168.1.7, \"fd00::/8\"]"))
            .listeners[0]
        #expect(listener.trustedProxies == [CIDRBlock("10.0.0.0/8")!, CIDRBlock("127.0.0.1/32")!, CIDRBlock("::1/128")!,
                                            CIDRBlock("192.168.1.7/32")!, CIDRBlock("fd00::/8")!])
        #expect(listener.trustedProxies[3].prefixLength == 32)
    }

    @Test func unquotedIPv6ItemsInABlockListLoad() throws {
        let listener = try load(withListener("    trusted_proxies:\n      - ::1/128\n      - 2001:db8::/32")).listeners[0]
        #expect(listener.trustedProxies == [CIDRBlock("::1/128")!, CIDRBlock("2001:db8::/32")!])
    }

    @Test func everyBadItemIsReportedAtItsOwnLine() {
        let yaml = withListener("""
            trusted_proxies:
              - 10.0.0.0/8
              - 10.0.0.1/8
              - 10.0.0.0/33
              - 300.1.2.3
              - {cidr: 10.0.0.0/8}
              - example.com
        """)
        #expect(errorLines(yaml) == [
            "gateway.yml:6:9: listeners[0].trusted_proxies[1]: invalid CIDR \"10.0.0.1/8\" (the address has bits set past the /8 prefix; give the network address)",
            "gateway.yml:7:9: listeners[0].trusted_proxies[2]: invalid CIDR \"10.0.0.0/33\" (use an address or address/prefix: 10.0.0.0/8, 127.0.0.1/32, ::1/128)",
            "gateway.yml:8:9: listeners[0].trusted_proxies[3]: invalid CIDR \"300.1.2.3\" (use an address or address/prefix: 10.0.0.0/8, 127.0.0.1/32, ::1/128)",
            "gateway.yml:9:9: listeners[0].trusted_proxies[4]: expected a CIDR block such as 10.0.0.0/8, got a mapping",
            "gateway.yml:10:9: listeners[0].trusted_proxies[5]: invalid CIDR \"example.com\" (use an address or address/prefix: 10.0.0.0/8, 127.0.0.1/32, ::1/128)",
        ])
    }

    @Test func trustedProxiesMustBeAList() {
        #expect(errorLines(withListener("    trusted_proxies: 10.0.0.0/8")) == [
            "gateway.yml:4:22: listeners[0].trusted_proxies: expected a list, got a scalar",
        ])
    }

    @Test func trustedProxiesAreOnListenersOnly() {
        #expect(errorLines(minimalPlus("admin: {address: 127.0.0.1:9901, trusted_proxies: [10.0.0.0/8]}")) == [
            "gateway.yml:10:34: admin: unknown key \"trusted_proxies\"",
        ])
    }

    // MARK: limits.max_held_body_bytes

    @Test func maxHeldBodyBytesDefaultsTo64MiB() throws {
        #expect(try load(Fixtures.minimal).limits.maxHeldBodyBytes == 64 * 1024 * 1024)
        #expect(try load(minimalPlus("limits: {max_held_body_bytes: 1MiB}")).limits.maxHeldBodyBytes == 1 << 20)
    }

    @Test func maxHeldBodyBytesMustBeAPositiveSize() {
        #expect(errorLines(minimalPlus("limits: {max_held_body_bytes: 0}")) == [
            "gateway.yml:10:31: limits.max_held_body_bytes: must be greater than 0",
        ])
        #expect(errorLines(minimalPlus("limits: {max_held_body_bytes: 64MB}")) == [
            "gateway.yml:10:31: limits.max_held_body_bytes: invalid size \"64MB\" (use 512, 64KiB, 10MiB, 1GiB)",
        ])
    }

    // MARK: device_check replay_window

    static let deviceCheck = "verifiers:\n  dc:\n    type: device_check\n    team_id: ABCDE12345\n    key_id: K1\n    private_key: k.p8\n"

    @Test func replayWindowDefaultsTo24Hours() throws {
        guard case .deviceCheck(let dc)? = try load(minimalPlus(Self.deviceCheck)).verifier(named: "dc")?.kind else {
            Issue.record("no device_check verifier")
            return
        }
        #expect(dc.replayWindowMillis == 24 * 3_600_000)
    }

    @Test func replayWindowIsDecoded() throws {
        guard case .deviceCheck(let dc)? = try load(minimalPlus(Self.deviceCheck + "    replay_window: 90m")).verifier(named: "dc")?.kind else {
            Issue.record("no device_check verifier")
            return
        }
        #expect(dc.replayWindowMillis == 90 * 60_000)
    }

    @Test func replayWindowMustBeAPositiveDuration() {
        #expect(errorLines(minimalPlus(Self.deviceCheck + "    replay_window: 0s")) == [
            "gateway.yml:16:20: verifiers.dc.replay_window: must be greater than 0",
        ])
        #expect(errorLines(minimalPlus(Self.deviceCheck + "    replay_window: 1d")) == [
            "gateway.yml:16:20: verifiers.dc.replay_window: invalid duration \"1d\" (use 500ms, 30s, 5m, 6h)",
        ])
    }

    @Test func replayWindowIsOnlyADeviceCheckKey() {
        #expect(errorLines(minimalPlus("verifiers:\n  ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a], replay_window: 1h}")) == [
            "gateway.yml:11:65: verifiers.ios: unknown key \"replay_window\"",
        ])
    }

    // MARK: match.host

    func host(_ text: String) throws -> String? {
        try load(scopedPlus("  - match: {path: /h, host: \"\(text)\"}\n    upstream: api")).routes[1].match.host
    }

    @Test func hostIsLowerCasedWithoutItsTrailingDot() throws {
        #expect(try host("API.example.com.") == "api.example.com")
        #expect(try host("Api.Example.Com") == "api.example.com")
        #expect(try host("api.example.com.:8443") == "api.example.com:8443")
        #expect(try host("API.example.com:8443") == "api.example.com:8443")
        #expect(try host("[::1]:8080") == "[::1]:8080")
        #expect(try host("[::1]") == "[::1]")
        #expect(try host("10.0.0.1") == "10.0.0.1")
    }

    @Test func malformedHostsAreRejected() {
        for bad in ["api.example.com..", ".", "api.example.com:99999", "api.example.com:", "api:x", "a b", "user@api", "[::1]x", "api/x"] {
            #expect(errorLines(scopedPlus("  - match: {path: /h, host: \"\(bad)\"}\n    upstream: api")) == [
                "gateway.yml:10:29: routes[1].match.host: invalid host \"\(bad)\"",
            ], "\(bad)")
        }
    }

    @Test func internationalisedHostMustBeInItsASCIIForm() {
        #expect(errorLines(scopedPlus("  - match: {path: /h, host: bücher.example}\n    upstream: api")) == [
            "gateway.yml:10:29: routes[1].match.host: invalid host \"bücher.example\" (write an internationalised name in its ASCII xn-- form)",
        ])
    }
}
