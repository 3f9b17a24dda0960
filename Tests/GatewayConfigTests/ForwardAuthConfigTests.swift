import Testing
@testable import GatewayConfig

/// `forward_auth:` — its path and where the original request comes from (`source`).
@Suite struct ForwardAuthConfigTests {
    func load(_ section: String) throws -> ForwardAuthConfig? {
        try ConfigLoader.load(yaml: minimalPlus(section), fileName: "gateway.yml", baseDirectory: "/etc/gw").forwardAuth
    }

    @Test func sourceDefaultsToAuto() throws {
        #expect(try load("forward_auth:\n  path: /.attest/verify/")?.source == .auto)
        #expect(try load("forward_auth:\n  path: /.attest/verify/")?.path == "/.attest/verify")
        #expect(try load("") == nil)
    }

    @Test func everyNamedSourceIsDecoded() throws {
        for source in [ForwardAuthSource.auto, .nginx, .traefik, .envoy] {
            #expect(try load("forward_auth:\n  path: /v\n  source: \(source.rawValue)")?.source == source)
        }
    }

    @Test func unknownSourceIsRejectedWithTheChoices() {
        #expect(errorLines(minimalPlus("forward_auth:\n  path: /v\n  source: haproxy")) == [
            "gateway.yml:12:11: forward_auth.source: invalid source \"haproxy\" (use auto, nginx, traefik or envoy)",
        ])
    }

    @Test func unknownForwardAuthKeyIsRejected() {
        #expect(errorLines(minimalPlus("forward_auth:\n  path: /v\n  trust: all")).count == 1)
    }
}
