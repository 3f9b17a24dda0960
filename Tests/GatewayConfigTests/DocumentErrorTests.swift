import Testing
@testable import GatewayConfig
import Foundation

/// Errors about the document as a whole: syntax, shape, version, keys and value types.
@Suite struct DocumentErrorTests {
    @Test func invalidYAMLIsReportedAtTheProblemMark() {
        #expect(errorLines("version: 1\nlisteners: [a\nfoo: : bar\n") == [
            "gateway.yml:3:4: invalid YAML: did not find expected ',' or ']' while parsing a flow sequence",
        ])
    }

    @Test func topLevelMustBeAMapping() {
        #expect(errorLines("- version: 1\n") == ["gateway.yml:1:1: expected a mapping, got a list"])
    }

    @Test func emptyFileIsAnError() {
        #expect(errorLines("# nothing here\n") == [
            "gateway.yml:1:1: the file is empty; expected a mapping with \"version: 1\"",
        ])
    }

    @Test func secondDocumentIsRejected() {
        #expect(errorLines(Fixtures.minimal + "\n---\nversion: 1\n") == [
            "gateway.yml:11:1: expected a single YAML document",
        ])
    }

    @Test func missingVersionIsReportedAtTheDocument() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "version: 1\n", with: "")
        #expect(errorLines(yaml) == ["gateway.yml:1:1: missing required key \"version\""])
    }

    @Test func versionOtherThanOneIsRejected() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "version: 1", with: "version: 2")
        #expect(errorLines(yaml) == ["gateway.yml:1:10: version: unsupported version 2 (expected 1)"])
    }

    @Test func unknownTopLevelKeyIsReportedAtTheKey() {
        #expect(errorLines(minimalPlus("lmits: {}")) == ["gateway.yml:10:1: unknown key \"lmits\""])
    }

    @Test func unknownNestedKeyIsReportedWithItsMappingPath() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "  - address: 127.0.0.1:8080", with: "  - address: 127.0.0.1:8080\n    http3: true")
        #expect(errorLines(yaml) == ["gateway.yml:4:5: listeners[0]: unknown key \"http3\""])
    }

    @Test func duplicateKeyIsReportedAtTheSecondOccurrence() {
        #expect(errorLines(minimalPlus("limits:\n  max_headers: 10\n  max_headers: 20")) == [
            "gateway.yml:12:3: limits: duplicate key \"max_headers\"",
        ])
    }

    @Test func stringWhereBooleanBelongsIsAWrongType() {
        let yaml = Fixtures.minimal.replacingOccurrences(of: "  - address: 127.0.0.1:8080", with: "  - address: 127.0.0.1:8080\n    http2: yes")
        #expect(errorLines(yaml) == ["gateway.yml:4:12: listeners[0].http2: expected a boolean (true or false)"])
    }

    @Test func quotedNumberWhereIntegerBelongsIsAWrongType() {
        #expect(errorLines(minimalPlus("limits: {max_headers: \"100\"}")) == [
            "gateway.yml:10:23: limits.max_headers: expected an integer",
        ])
    }

    @Test func listWhereMappingBelongsIsAWrongType() {
        #expect(errorLines(minimalPlus("limits: [1]")) == ["gateway.yml:10:9: limits: expected a mapping, got a list"])
    }

    @Test func invalidDurationNamesTheAcceptedForms() {
        #expect(errorLines(minimalPlus("limits:\n  idle_timeout: 5 minutes")) == [
            "gateway.yml:11:17: limits.idle_timeout: invalid duration \"5 minutes\" (use 500ms, 30s, 5m, 6h)",
        ])
    }

    @Test func invalidSizeNamesTheAcceptedForms() {
        #expect(errorLines(minimalPlus("limits:\n  max_body_bytes: 10MB")) == [
            "gateway.yml:11:19: limits.max_body_bytes: invalid size \"10MB\" (use 512, 64KiB, 10MiB, 1GiB)",
        ])
    }

    @Test func zeroLimitIsRejected() {
        #expect(errorLines(minimalPlus("limits:\n  max_connections: 0\n  header_timeout: 0s")) == [
            "gateway.yml:11:20: limits.max_connections: must be at least 1",
            "gateway.yml:12:19: limits.header_timeout: must be greater than 0",
        ])
    }

    @Test func http2StreamLimitIsBounded() throws {
        #expect(errorLines(minimalPlus("limits:\n  http2_max_concurrent_streams: 0")) == [
            "gateway.yml:11:33: limits.http2_max_concurrent_streams: must be at least 1",
        ])
        #expect(errorLines(minimalPlus("limits:\n  http2_max_concurrent_streams: 4294967297")) == [
            "gateway.yml:11:33: limits.http2_max_concurrent_streams: must be at most 10000",
        ])
        let config = try ConfigLoader.load(yaml: minimalPlus("limits:\n  http2_max_concurrent_streams: 250"),
                                           fileName: "gateway.yml", baseDirectory: "/")
        #expect(config.limits.http2MaxConcurrentStreams == 250)
    }

    @Test func aliasBombIsRefusedNotExpanded() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...9 {
            yaml += "a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        let lines = errorLines(yaml)
        #expect(lines.count == 1)
        #expect(lines.first?.contains("document too large or too deeply nested") == true)
    }

    @Test func everyErrorInTheFileIsReportedInFileOrder() {
        let yaml = """
        version: 3
        listeners:
          - address: nowhere
        upstreams:
          api: {url: ftp://x}
        routes:
          - match: {path: relative}
            upstream: apii
            mode: loud
        """
        #expect(errorLines(yaml) == [
            "gateway.yml:1:10: version: unsupported version 3 (expected 1)",
            "gateway.yml:3:14: listeners[0].address: invalid address \"nowhere\" (use host:port, or [::1]:port for IPv6)",
            "gateway.yml:5:14: upstreams.api.url: unsupported url scheme \"ftp\" (use http://host[:port][/base-path] or https://…)",
            "gateway.yml:7:19: routes[0].match.path: must start with \"/\"",
            "gateway.yml:8:15: routes[0].upstream: unknown upstream \"apii\"",
            "gateway.yml:9:11: routes[0].mode: invalid mode \"loud\" (use enforce or monitor)",
        ])
    }

    @Test func errorsCarryTheirPartsSeparately() throws {
        do {
            _ = try ConfigLoader.load(yaml: minimalPlus("limits: {max_headers: x}"), fileName: "g.yml", baseDirectory: "")
            Issue.record("expected an error")
        } catch {
            #expect(error.errors == [ConfigError(file: "g.yml", line: 10, column: 23, path: "limits.max_headers",
                                                 message: "expected an integer")])
        }
    }
}

/// Inputs that once could crash or hang a YAML loader.
@Suite struct HostileInputTests {
    @Test func recursiveAliasIsAnErrorNotACrash() {
        #expect(errorLines("a: &x [*x]\n") == [
            "gateway.yml:1:4: document too large or too deeply nested (check aliases)",
        ])
    }

    @Test func nullRequiredValueIsAWrongType() {
        #expect(errorLines(minimalPlus("  - match: {path: /x}\n    upstream:")) == [
            "gateway.yml:11:14: routes[1].upstream: expected a string",
        ])
    }

    @Test func nonScalarKeyIsRejected() {
        #expect(errorLines(minimalPlus("? [a]\n: 1")) == ["gateway.yml:10:3: expected a string key, got a list"])
    }
}
