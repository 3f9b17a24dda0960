import Testing
@testable import GatewayConfig
import Foundation

/// `${NAME}` / `${NAME:-default}` in scalar values: expanded before decoding, errors at their line, expanded values
/// never in a message.
@Suite struct ExpansionTests {
    static let environment: [String: String] = ["PORT": "8181", "UP_HOST": "10.0.0.5", "SECRET": "s3cr3t-Value",
                                                "EMPTY": "", "FLAG": "true"]

    func load(_ yaml: String) throws(ConfigErrors) -> LoadedConfiguration {
        try ConfigLoader.loadDetailed(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw",
                                      environment: { Self.environment[$0] })
    }

    func errors(_ yaml: String) -> [String] {
        do {
            _ = try load(yaml)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    static let file = """
    version: 1
    listeners:
      - address: 127.0.0.1:${PORT}
    upstreams:
      api:
        url: "http://${UP_HOST}:${UP_PORT:-3000}/base"
    routes:
      - match: {path_prefix: /}
        upstream: api
    """

    @Test func referencesAndDefaultsExpandBeforeDecoding() throws {
        let c = try load(Self.file).configuration
        #expect(c.listeners[0].address.port == 8181)
        #expect(c.upstreams[0].host == "10.0.0.5" && c.upstreams[0].port == 3000 && c.upstreams[0].basePath == "/base")
    }

    @Test func anExpandedPlainScalarKeepsItsType() throws {
        let yaml = Self.file.replacingOccurrences(of: "    upstream: api", with: "    upstream: api\n    strip_token_headers: ${OFF:-false}")
        #expect(yaml != Self.file)
        #expect(try load(yaml).configuration.routes[0].stripTokenHeaders == false)
    }

    @Test func literalsAndLoneDollars() {
        let env: ConfigExpansion.Environment = { Self.environment[$0] }
        #expect(ConfigExpansion.expand("a$$b $${PORT} $x ${PORT}$", environment: env) == .success("a$$b ${PORT} $x 8181$"))
        #expect(ConfigExpansion.expand("${EMPTY:-d}${EMPTY}", environment: env) == .success(""))   // set, even if empty
        #expect(ConfigExpansion.expand("${NOPE:-}x", environment: env) == .success("x"))
        #expect(ConfigExpansion.expand("${NOPE:-a:-b}", environment: env) == .success("a:-b"))
    }

    @Test func anUnsetVariableIsAnErrorAtItsLine() {
        #expect(errors(Self.file.replacingOccurrences(of: "${PORT}", with: "${GW_PORT}")) == [
            "gateway.yml:3:14: listeners[0].address: environment variable GW_PORT is not set (use ${GW_PORT:-default} for a default)",
        ])
    }

    @Test func malformedReferencesAreErrors() {
        for (bad, message) in [("${PORT", "unterminated ${ (use ${NAME} or ${NAME:-default}; $${ for a literal ${)"),
                               ("${1PORT}", "invalid reference ${1PORT} (use ${NAME} or ${NAME:-default}: letters, digits and _, not starting with a digit)"),
                               ("${}", "invalid reference ${} (use ${NAME} or ${NAME:-default}: letters, digits and _, not starting with a digit)"),
                               ("${A-B}", "invalid reference ${A-B} (use ${NAME} or ${NAME:-default}: letters, digits and _, not starting with a digit)")] {
            #expect(errors(Self.file.replacingOccurrences(of: "${PORT}", with: bad)) == ["gateway.yml:3:14: listeners[0].address: \(message)"], "\(bad)")
        }
    }

    @Test func keysAreNotExpanded() {
        let lines = errors(Self.file + "\n${SECRET}: 1")
        #expect(lines.count == 1 && lines[0].hasPrefix("gateway.yml:10:1: ") && lines[0].contains("${SECRET}") && !lines[0].contains("s3cr3t"),
                "\(lines)")
    }

    @Test func anExpandedValueIsNeverQuotedInAnError() {
        // An invalid value that came from the environment: the message names the reference, not the value.
        let bad = Self.file.replacingOccurrences(of: "127.0.0.1:${PORT}", with: "${SECRET}")
        let lines = errors(bad)
        #expect(lines.count == 1)
        #expect(lines.allSatisfy { !$0.contains("s3cr3t") && $0.contains("${SECRET}") }, "\(lines)")
        // Even in a message about another key.
        let other = Self.file.replacingOccurrences(of: "    upstream: api", with: "    upstream: ${SECRET}")
        #expect(errors(other).allSatisfy { !$0.contains("s3cr3t") } && !errors(other).isEmpty, "\(errors(other))")
    }
}
