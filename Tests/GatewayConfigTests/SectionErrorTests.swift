import Testing
@testable import GatewayConfig
import Foundation

/// Errors in listeners, admin, state and upstreams.
@Suite struct SectionErrorTests {
    /// The minimal file with its listeners section replaced.
    func withListeners(_ listeners: String) -> String {
        Fixtures.minimal.replacingOccurrences(of: "listeners:\n  - address: 127.0.0.1:8080", with: listeners)
    }

    @Test func missingListenersIsReportedAtTheDocument() {
        #expect(errorLines(withListeners("")) == ["gateway.yml:1:1: missing required key \"listeners\""])
    }

    @Test func emptyListenerListIsRejected() {
        #expect(errorLines(withListeners("listeners: []")) == [
            "gateway.yml:2:12: listeners: at least one listener is required",
        ])
    }

    @Test func invalidListenerAddressIsRejected() {
        #expect(errorLines(withListeners("listeners:\n  - address: 127.0.0.1:70000")) == [
            "gateway.yml:3:14: listeners[0].address: invalid address \"127.0.0.1:70000\" (use host:port, or [::1]:port for IPv6)",
        ])
    }

    @Test func missingListenerAddressIsReportedAtTheListener() {
        #expect(errorLines(withListeners("listeners:\n  - name: a")) == [
            "gateway.yml:3:5: listeners[0]: missing required key \"address\"",
        ])
    }

    @Test func duplicateListenerNamesAreRejected() {
        #expect(errorLines(withListeners("listeners:\n  - {name: web, address: 127.0.0.1:80}\n  - {name: web, address: 127.0.0.1:81}")) == [
            "gateway.yml:4:12: listeners[1].name: duplicate listener name \"web\"",
        ])
    }

    @Test func twoListenersOnOneAddressAreRejected() {
        #expect(errorLines(withListeners("listeners:\n  - address: 127.0.0.1:80\n  - address: 127.0.0.1:80")) == [
            "gateway.yml:4:14: listeners[1].address: address 127.0.0.1:80 is already used by listener \"listener-0\"",
        ])
    }

    @Test func wildcardListenerOverlapsASpecificOne() {
        #expect(errorLines(withListeners("listeners:\n  - address: 0.0.0.0:80\n  - address: '[::1]:80'")) == [
            "gateway.yml:4:14: listeners[1].address: address [::1]:80 is already used by listener \"listener-0\"",
        ])
    }

    @Test func tlsNeedsBothCertificateAndKey() {
        #expect(errorLines(withListeners("listeners:\n  - address: 127.0.0.1:443\n    tls:\n      certificate: a.pem")) == [
            "gateway.yml:5:7: listeners[0].tls: missing required key \"private_key\"",
        ])
    }

    @Test func adminMustNotShareAListenerAddress() {
        #expect(errorLines(minimalPlus("admin:\n  address: 127.0.0.1:8080")) == [
            "gateway.yml:11:12: admin.address: address 127.0.0.1:8080 is already used by listener \"listener-0\"",
        ])
    }

    @Test func unknownStateBackendListsTheChoices() {
        #expect(errorLines(minimalPlus("state: {backend: postgres}")) == [
            "gateway.yml:10:18: state.backend: invalid backend \"postgres\" (use memory, sqlite or redis)",
        ])
    }

    @Test func redisBackendRequiresAURL() {
        #expect(errorLines(minimalPlus("state:\n  backend: redis")) == [
            "gateway.yml:11:3: state: missing required key \"url\"",
        ])
    }

    @Test func invalidRedisURLIsNotEchoed() {
        let lines = errorLines(minimalPlus("state:\n  backend: redis\n  url: http://user:hunter2@cache:6379"))
        #expect(lines == ["gateway.yml:12:8: state.url: invalid redis url (use redis://[user:password@]host:port[/db], rediss:// for TLS)"])
        #expect(!lines.joined().contains("hunter2"))
    }

    @Test func invalidUnavailablePolicyIsRejected() {
        #expect(errorLines(minimalPlus("state: {on_unavailable: ignore}")) == [
            "gateway.yml:10:25: state.on_unavailable: invalid on_unavailable \"ignore\" (use reject or allow)",
        ])
    }

    @Test func upstreamWithoutURLIsReportedAtTheUpstream() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "url: http://127.0.0.1:3000", with: "connect_timeout: 1s")
        #expect(errorLines(yaml) == ["gateway.yml:6:5: upstreams.api: missing required key \"url\""])
    }

    @Test func upstreamWithOtherSchemeIsRejected() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "http://127.0.0.1:3000", with: "unix:///run/app.sock")
        #expect(errorLines(yaml) == [
            "gateway.yml:6:10: upstreams.api.url: unsupported url scheme \"unix\" (use http://host[:port][/base-path] or https://…)",
        ])
    }

    @Test func upstreamURLWithCredentialsIsRejectedWithoutEcho() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "http://127.0.0.1:3000", with: "http://u:s3cret@127.0.0.1:3000")
        let lines = errorLines(yaml)
        #expect(lines == ["gateway.yml:6:10: upstreams.api.url: url must not contain credentials or a query (use http://host[:port][/base-path] or https://…)"])
    }

    @Test func negativeIdleConnectionsAreRejected() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "url: http://127.0.0.1:3000", with: "url: http://127.0.0.1:3000\n    max_idle_connections: -1")
        #expect(errorLines(yaml) == ["gateway.yml:7:27: upstreams.api.max_idle_connections: must be at least 0"])
    }

    @Test func duplicateUpstreamNameIsADuplicateKey() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "routes:", with: "  api:\n    url: http://127.0.0.1:3001\nroutes:")
        #expect(errorLines(yaml) == ["gateway.yml:7:3: upstreams: duplicate key \"api\""])
    }
}
