import Foundation
import Testing
@testable import GatewayConfig

/// A minimal file gets every documented default; paths resolve against the file's directory.
@Suite struct DefaultsTests {
    @Test func minimalConfigFillsEveryDefault() throws {
        let config = try ConfigLoader.load(yaml: Fixtures.minimal, fileName: "gateway.yml", baseDirectory: "/srv/gw/")
        #expect(config.listeners == [ListenerConfig(name: "listener-0", address: SocketAddressConfig(host: "127.0.0.1", port: 8080),
                                                    http2: false, tls: nil)])
        #expect(config.admin == nil)
        let limits = config.limits
        #expect(limits.maxHeaderBytes == 32 * 1024)
        #expect(limits.maxHeaders == 100)
        #expect(limits.maxBodyBytes == 10 * 1024 * 1024)
        #expect(limits.headerTimeoutMillis == 10_000)
        #expect(limits.idleTimeoutMillis == 60_000)
        #expect(limits.maxConnections == 10_000)
        #expect(limits.drainTimeoutMillis == 30_000)
        #expect(limits.http2MaxConcurrentStreams == 100)
        #expect(config.state.backend == .sqlite)
        #expect(config.state.path == "/srv/gw/data/state.db")
        #expect(config.state.url == nil)
        #expect(config.state.keyPrefix == "attest-gateway:")
        #expect(config.state.timeoutMillis == 250)
        #expect(config.state.onUnavailable == .reject)
        #expect(config.upstreams == [UpstreamConfig(name: "api", host: "127.0.0.1", port: 3000, basePath: "")])
        #expect(config.upstreams[0].connectTimeoutMillis == 2_000)
        #expect(config.upstreams[0].responseTimeoutMillis == 30_000)
        #expect(config.upstreams[0].maxIdleConnections == 64)
        #expect(config.verifiers.isEmpty)
        let route = config.routes[0]
        #expect(route.name == "route-0")
        #expect(route.match == RouteMatchConfig(path: .prefix("/"), methods: nil, host: nil))
        #expect(route.verify == [] && !route.requireAll && !route.limitedUse && route.maxRiskMetric == nil)
        #expect(route.mode == .enforce && route.stripTokenHeaders && route.maxBodyBytes == nil)
    }

    @Test func verifierDefaultsAreFilledIn() throws {
        let config = try ConfigLoader.load(yaml: minimalPlus("""
        verifiers:
          fb: {type: app_check, project_number: 42}
          ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a.b]}
          dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: /k.p8}
        """), fileName: "g.yml", baseDirectory: "")
        var fb = AppCheckVerifierConfig(projectNumber: "42")
        fb.jwksURL = "https://firebaseappcheck.googleapis.com/v1/jwks"
        #expect(config.verifier(named: "fb")?.kind == .appCheck(fb))
        #expect(config.verifier(named: "ios")?.kind == .appAttest(AppAttestVerifierConfig(teamID: "ABCDE12345", bundleIDs: ["a.b"])))
        #expect(config.verifier(named: "dc")?.kind == .deviceCheck(DeviceCheckVerifierConfig(teamID: "ABCDE12345", keyID: "K1", privateKey: "/k.p8")))
    }

    @Test func upstreamURLFormsAreParsed() throws {
        let config = try ConfigLoader.load(yaml: minimalPlus("""
          v6:
            url: http://[::1]:8081/base/path/
          secure:
            url: https://Example.COM
          plain:
            url: http://backend/
        """).replacingOccurrences(of: "routes:\n  - match: {path_prefix: /}\n    upstream: api\n", with: "") + "\nroutes: []",
            fileName: "g.yml", baseDirectory: "")
        let v6 = try #require(config.upstream(named: "v6"))
        #expect((v6.host, v6.port, v6.basePath, v6.tls) == ("::1", 8081, "/base/path", false))
        let secure = try #require(config.upstream(named: "secure"))
        #expect((secure.host, secure.port, secure.basePath, secure.tls) == ("example.com", 443, "", true))
        let plain = try #require(config.upstream(named: "plain"))
        #expect((plain.port, plain.basePath) == (80, ""))
    }

    @Test func routeMatchNormalizesMethodsAndHost() throws {
        let config = try ConfigLoader.load(yaml: scopedPlus("""
          - name: exact
            match: {path: /exact, methods: [get, Post], host: API.Example.com}
            upstream: api
        """), fileName: "g.yml", baseDirectory: "")
        #expect(config.routes[1].match == RouteMatchConfig(path: .exact("/exact"), methods: ["GET", "POST"], host: "api.example.com"))
    }

    @Test func loadFromFileResolvesPathsAgainstItsDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gwcfg-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("gateway.yml")
        try minimalPlus("state: {path: state/db.sqlite}").write(to: file, atomically: true, encoding: .utf8)
        let config = try ConfigLoader.load(path: file.path)
        #expect(config.state.path == directory.path + "/state/db.sqlite")
    }

    @Test func unreadableFileIsOneError() {
        #expect(throws: ConfigErrors.self) { try ConfigLoader.load(path: "/nonexistent/gateway.yml") }
        do {
            _ = try ConfigLoader.load(path: "/nonexistent/gateway.yml")
        } catch {
            #expect(error.description == "/nonexistent/gateway.yml:1:1: cannot read the configuration file")
        }
    }
}
