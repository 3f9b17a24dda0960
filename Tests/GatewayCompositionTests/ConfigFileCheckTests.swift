import Foundation
import Testing
import Attestation
import GatewayConfig
import GatewayCrypto
import GatewayComposition
import JOSE

/// `check-config` reads every file a configuration names as `serve` does: each unreadable or wrong file is one
/// problem at the key that names it; good files, `builtin`, and what serve itself never reads pass; nothing is
/// fetched and no state store is opened.
@Suite struct ConfigFileCheckTests {
    /// Good files of every kind, made once per run with the openssl CLI (as TLSSessionTests does).
    static let files: String = {
        let dir = NSTemporaryDirectory() + "gateway-filecheck-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func run(_ args: [String]) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try! p.run()
            p.waitUntilExit()
            precondition(p.terminationStatus == 0, "openssl \(args.joined(separator: " ")) failed")
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        run(["req", "-x509"] + ec + ["-keyout", dir + "/server.key", "-out", dir + "/server.pem", "-days", "2", "-subj", "/CN=localhost"])
        run(["req", "-x509"] + ec + ["-keyout", dir + "/other.key", "-out", dir + "/other.pem", "-days", "2", "-subj", "/CN=other"])
        // An Apple .p8 is a PKCS#8 PEM P-256 key, which is what genpkey writes.
        run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/AuthKey.p8"])
        try! AppAttestRoots.applePEM.write(toFile: dir + "/root.pem", atomically: true, encoding: .utf8)
        let key = try! RSAPrivateKey.generate()
        try! "{\"keys\":[\(key.jwk(kid: "k1"))]}".write(toFile: dir + "/jwks.json", atomically: true, encoding: .utf8)
        try! "not a certificate\n".write(toFile: dir + "/garbage.pem", atomically: true, encoding: .utf8)
        try! "{\"keys\": 3}".write(toFile: dir + "/bad-jwks.json", atomically: true, encoding: .utf8)
        return dir
    }()

    /// A file with `body` appended (top-level sections), relative paths resolved against the good files' directory.
    func problems(_ body: String) throws -> [String] {
        let yaml = """
        version: 1
        listeners:
          - address: 127.0.0.1:8080
        state: {backend: sqlite, path: never-created/state.db}
        upstreams:
          api: {url: "http://127.0.0.1:3000"}
        routes:
          - match: {path_prefix: /}
            upstream: api

        """ + body
        let config = try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: Self.files)
        return ConfigFileCheck.problems(in: config).map(\.description)
    }

    static let everyKind = """
    verifiers:
      fb: {type: app_check, project_number: "1", jwks_file: jwks.json}
      web: {type: app_check, project_number: "2", jwks_url: "http://127.0.0.1:1/jwks"}
      ios:
        type: app_attest
        team_id: ABCDE12345
        bundle_ids: [a]
        root_ca: root.pem
        receipt_root_ca: root.pem
        fraud_metric: {key_id: K1, private_key: AuthKey.p8, ca_file: server.pem}
      builtin: {type: app_attest, team_id: ABCDE12345, bundle_ids: [b], registration_path: /.attest/b}
      dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: AuthKey.p8, ca_file: server.pem}
    """

    @Test func goodFilesOfEveryKindPass() throws {
        #expect(try problems(Self.everyKind).isEmpty)
        let listener = Self.withTLS(certificate: "server.pem", key: "server.key")
        #expect(ConfigFileCheck.problems(in: listener).isEmpty)
    }

    @Test func nothingIsFetchedAndNoStateStoreIsOpened() throws {
        // jwks_url points at a closed port: a fetch would fail, so an empty result means none was tried.
        #expect(try problems(Self.everyKind).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: Self.files + "/never-created"))
    }

    @Test func aMissingRootCAIsReportedAtItsKey() throws {
        #expect(try problems("verifiers:\n  ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a], root_ca: missing.pem}") == [
            "verifiers.ios.root_ca: cannot read a PEM certificate from \(Self.files)/missing.pem",
        ])
        #expect(try problems("verifiers:\n  ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a], root_ca: garbage.pem}") == [
            "verifiers.ios.root_ca: cannot read a PEM certificate from \(Self.files)/garbage.pem",
        ])
    }

    @Test func theReceiptRootIsReadOnlyWithFraudMetric() throws {
        // Without fraud_metric serve never reads it, so check-config does not either.
        #expect(try problems("verifiers:\n  ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a], receipt_root_ca: missing.pem}")
            .isEmpty)
        let yaml = "verifiers:\n  ios: {type: app_attest, team_id: ABCDE12345, bundle_ids: [a], receipt_root_ca: missing.pem, "
            + "fraud_metric: {key_id: K1, private_key: missing.p8, ca_file: missing-ca.pem}}"
        let found = try problems(yaml)
        #expect(found.count == 3)
        #expect(found[0] == "verifiers.ios.receipt_root_ca: cannot read a PEM certificate from \(Self.files)/missing.pem")
        #expect(found[1].hasPrefix("verifiers.ios.fraud_metric.private_key: cannot read an EC private key (.p8) from \(Self.files)/missing.p8"))
        #expect(found[2].hasPrefix("verifiers.ios.fraud_metric.ca_file: cannot read the CA file \(Self.files)/missing-ca.pem"))
    }

    @Test func aBadP8IsReportedAtItsKey() throws {
        let missing = try problems("verifiers:\n  dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: nope.p8}")
        #expect(missing == ["verifiers.dc.private_key: cannot read an EC private key (.p8) from \(Self.files)/nope.p8: "
                            + "cannot open \(Self.files)/nope.p8: No such file or directory"])
        // A certificate is not a key.
        let wrong = try problems("verifiers:\n  dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: server.pem}")
        #expect(wrong.count == 1 && wrong[0].hasPrefix("verifiers.dc.private_key: cannot read an EC private key (.p8) from"))
    }

    @Test func caFilesAreRead() throws {
        let dc = try problems("verifiers:\n  dc: {type: device_check, team_id: ABCDE12345, key_id: K1, private_key: AuthKey.p8, ca_file: garbage.pem}")
        #expect(dc.count == 1 && dc[0].hasPrefix("verifiers.dc.ca_file: cannot read the CA file \(Self.files)/garbage.pem"))
        var config = try ConfigLoader.load(yaml: """
            version: 1
            listeners: [{address: 127.0.0.1:8080}]
            upstreams: {api: {url: "https://127.0.0.1:3443", ca_file: missing.pem}}
            """, fileName: "g.yml", baseDirectory: Self.files)
        #expect(ConfigFileCheck.problems(in: config).map(\.path) == ["upstreams.api.ca_file"])
        config.upstreams[0].caFile = Self.files + "/server.pem"
        #expect(ConfigFileCheck.problems(in: config).isEmpty)
    }

    @Test func aBadJWKSFileIsReportedAndAURLIsNot() throws {
        let found = try problems("verifiers:\n  fb: {type: app_check, project_number: \"1\", jwks_file: bad-jwks.json}")
        #expect(found.count == 1 && found[0].hasPrefix("verifiers.fb.jwks_file: "))
        let missing = try problems("verifiers:\n  fb: {type: app_check, project_number: \"1\", jwks_file: nope.json}")
        #expect(missing.count == 1 && missing[0].contains("nope.json"))
    }

    static func withTLS(certificate: String, key: String) -> GatewayConfiguration {
        try! ConfigLoader.load(yaml: """
            version: 1
            listeners:
              - address: 127.0.0.1:8443
                tls: {certificate: \(certificate), private_key: \(key)}
            """, fileName: "g.yml", baseDirectory: files)
    }

    @Test func listenerTLSProblemsAreReportedAtTheFileAtFault() {
        let paths = { (cert: String, key: String) in ConfigFileCheck.problems(in: Self.withTLS(certificate: cert, key: key)).map(\.path) }
        #expect(paths("missing.pem", "server.key") == ["listeners[0].tls.certificate"])
        #expect(paths("garbage.pem", "server.key") == ["listeners[0].tls.certificate"])
        #expect(paths("server.pem", "missing.key") == ["listeners[0].tls.private_key"])
        // Both files read, but they do not belong together.
        #expect(paths("server.pem", "other.key") == ["listeners[0].tls.private_key"])
        let message = ConfigFileCheck.problems(in: Self.withTLS(certificate: "server.pem", key: "other.key")).first?.message
        #expect(message?.contains("mismatch") == true || message?.contains("does not match") == true, "\(message ?? "")")
    }
}
