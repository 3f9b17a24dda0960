import Testing
@testable import GatewayConfig
import Foundation

/// `paths:` and the rule that routes' match paths are written canonically (requests are routed on the canonical
/// path, so any other spelling would never match, or match something else than it reads).
@Suite struct PathsConfigTests {
    func load(_ yaml: String) throws -> GatewayConfiguration {
        try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw")
    }

    /// The scoped minimal file with one more route (`routes[1]`, at line 10) matching `match`, and `paths` after it.
    func matchErrors(_ match: String, paths: String = "") -> [String] {
        errorLines(scopedPlus("  - match: \(match)\n    upstream: api" + (paths.isEmpty ? "" : "\n" + paths)))
    }

    @Test func defaultsAreTheSafeChoice() throws {
        let paths = try load(Fixtures.minimal).paths
        #expect(paths == PathsConfig())
        #expect(paths.mergeSlashes && paths.escapedSlashes == .reject && paths.pathParameters == .reject)
    }

    @Test func everyKeyIsDecoded() throws {
        let paths = try load(minimalPlus("paths:\n  merge_slashes: false\n  escaped_slashes: keep\n  path_parameters: keep")).paths
        var expected = PathsConfig()
        expected.mergeSlashes = false
        expected.escapedSlashes = .keep
        expected.pathParameters = .keep
        #expect(paths == expected)
    }

    @Test func badValuesAreReportedAtTheirLines() {
        #expect(errorLines(minimalPlus("paths:\n  merge_slashes: yes\n  escaped_slashes: decode\n  path_parameters: strip")) == [
            "gateway.yml:11:18: paths.merge_slashes: expected a boolean (true or false)",
            "gateway.yml:12:20: paths.escaped_slashes: invalid escaped_slashes \"decode\" (use reject or keep)",
            "gateway.yml:13:20: paths.path_parameters: invalid path_parameters \"strip\" (use reject or keep)",
        ])
    }

    @Test func unknownKeyInPathsIsRejected() {
        #expect(errorLines(minimalPlus("paths:\n  normalize: true")) == [
            "gateway.yml:11:3: paths: unknown key \"normalize\"",
        ])
        #expect(errorLines(minimalPlus("paths: [merge_slashes]")) == [
            "gateway.yml:10:8: paths: expected a mapping, got a list",
        ])
    }

    @Test func dotSegmentInAPrefixNamesTheCanonicalPath() {
        #expect(matchErrors("{path_prefix: /api/./x}") == [
            "gateway.yml:10:26: routes[1].match.path_prefix: path_prefix \"/api/./x\" is not canonical; requests are routed on the canonical path \"/api/x\"",
        ])
    }

    @Test func everyNonCanonicalSpellingIsAnError() {
        // Each would be a hole: the route reads as protecting a path that requests never carry.
        let cases: [(String, String)] = [
            ("/%61pi/", "/api/"),          // an unreserved character encoded
            ("/a/%3a", "/a/%3A"),          // lower-case hex
            ("/api//x", "/api/x"),         // merged slashes
            ("/x/../api/", "/api/"),       // dot-dot
            ("/api/%2E/x", "/api/x"),      // an encoded dot segment
            ("/api/.", "/api/"),
        ]
        for (spelled, canonical) in cases {
            #expect(matchErrors("{path: \"\(spelled)\"}") == [
                "gateway.yml:10:19: routes[1].match.path: path \"\(spelled)\" is not canonical; requests are routed on the canonical path \"\(canonical)\"",
            ], "\(spelled)")
        }
    }

    @Test func refusedSpellingsCanNeverMatch() {
        for spelled in ["/a/%2F/b", "/a;jsessionid=1", "/a/..;/b", "/%00", "/../x", "/a\\\\b"] {
            #expect(matchErrors("{path_prefix: \"\(spelled)\"}") == [
                "gateway.yml:10:26: routes[1].match.path_prefix: path_prefix \"\(spelled.replacingOccurrences(of: "\\\\", with: "\\"))\" can never match: requests with this spelling are refused (ambiguous_path)",
            ], "\(spelled)")
        }
    }

    @Test func theOptionsDecideWhatIsCanonical() {
        // What `paths:` keeps, a route may name; what it merges or refuses, it may not.
        #expect(matchErrors("{path_prefix: \"/a/%2F/\"}", paths: "paths: {escaped_slashes: keep}").isEmpty)
        #expect(matchErrors("{path_prefix: /a;v=1/}", paths: "paths: {path_parameters: keep}").isEmpty)
        #expect(matchErrors("{path_prefix: //a/}", paths: "paths: {merge_slashes: false}").isEmpty)
        #expect(matchErrors("{path_prefix: //a/}") == [
            "gateway.yml:10:26: routes[1].match.path_prefix: path_prefix \"//a/\" is not canonical; requests are routed on the canonical path \"/a/\"",
        ])
        // A kept parameter never makes "..;" a plain segment.
        #expect(matchErrors("{path: \"/a/..;/b\"}", paths: "paths: {path_parameters: keep}") == [
            "gateway.yml:10:19: routes[1].match.path: path \"/a/..;/b\" can never match: requests with this spelling are refused (ambiguous_path)",
        ])
    }

    @Test func canonicalPathsLoadUnchanged() throws {
        let config = try load(scopedPlus("  - match: {path_prefix: \"/api/%3A/\"}\n    upstream: api"))
        #expect(config.routes[1].match.path == .prefix("/api/%3A/"))
    }

    @Test func aQueryInAMatchPathIsAnError() {
        #expect(matchErrors("{path: \"/search?q=1\"}") == [
            "gateway.yml:10:19: routes[1].match.path: path \"/search?q=1\" contains a query (\"?\"); routes match the path only",
        ])
        #expect(matchErrors("{path_prefix: \"/search?\"}") == [
            "gateway.yml:10:26: routes[1].match.path_prefix: path_prefix \"/search?\" contains a query (\"?\"); routes match the path only",
        ])
    }

    @Test func aMalformedEscapeIsNamed() {
        #expect(matchErrors("{path_prefix: \"/a%2\"}") == [
            "gateway.yml:10:26: routes[1].match.path_prefix: path_prefix \"/a%2\" has a malformed %-escape (use %XX with two hex digits)",
        ])
    }

    @Test func charactersRequestsCannotCarryRawAreNamedEncoded() {
        #expect(matchErrors("{path: \"/café\"}") == [
            "gateway.yml:10:19: routes[1].match.path: path \"/café\" can never match: requests carry these characters percent-encoded (write \"/caf%C3%A9\")",
        ])
        #expect(matchErrors("{path: \"/a b\"}") == [
            "gateway.yml:10:19: routes[1].match.path: path \"/a b\" can never match: requests carry these characters percent-encoded (write \"/a%20b\")",
        ])
    }
}
