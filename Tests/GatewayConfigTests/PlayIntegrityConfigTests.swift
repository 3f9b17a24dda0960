import Testing
@testable import GatewayConfig
import Foundation

/// The `play_integrity` verifier type: defaults, every key's value, and its errors at file:line.
@Suite struct PlayIntegrityConfigTests {
    static let digest = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"   // bytes 0…31, base64url
    static let base = "    type: play_integrity\n    package_name: com.example.app\n    certificate_sha256: [\(digest)]\n"
        + "    service_account_file: sa.json\n"

    func load(_ body: String) throws -> PlayIntegrityVerifierConfig? {
        let config = try ConfigLoader.load(yaml: minimalPlus("verifiers:\n  v:\n" + body), fileName: "gateway.yml", baseDirectory: "/etc/gw")
        guard case .playIntegrity(let c)? = config.verifiers.first?.kind else { return nil }
        return c
    }

    func errors(_ body: String) -> [String] { errorLines(minimalPlus("verifiers:\n  v:\n" + body)) }

    @Test func defaults() throws {
        let c = try #require(try load(Self.base))
        #expect(c.packageName == "com.example.app" && c.certificateSHA256 == [Self.digest])
        #expect(c.header == "X-Play-Integrity" && c.binding == .request)
        #expect(c.serviceAccountFile == "/etc/gw/sa.json" && c.decryptionKeyFile == nil && c.verificationKeyFile == nil)
        #expect(c.appRecognition == ["PLAY_RECOGNIZED"] && c.minDeviceIntegrity == "MEETS_DEVICE_INTEGRITY")
        #expect(!c.requireLicensed && c.playProtect == nil && c.maxDeviceActivity == nil)
        #expect(c.maxSkewMillis == 300_000 && c.replayWindowMillis == 86_400_000 && c.registrationPath == nil)
        #expect(c.apiBaseURL == "https://playintegrity.googleapis.com" && c.tokenURL == nil && c.caFile == nil && c.timeoutMillis == 3000)
    }

    @Test func everyKeyHasItsValue() throws {
        let c = try #require(try load("""
            type: play_integrity
            package_name: com.example.app
            certificate_sha256: ["00:01:02:03:04:05:06:07:08:09:0A:0B:0C:0D:0E:0F:10:11:12:13:14:15:16:17:18:19:1A:1B:1C:1D:1E:1F", "\(Self.digest)="]
            header: X-Integrity
            binding: nonce
            decryption_key_file: keys/aes.txt
            verification_key_file: keys/ec.txt
            app_recognition: [PLAY_RECOGNIZED, UNRECOGNIZED_VERSION]
            min_device_integrity: MEETS_STRONG_INTEGRITY
            require_licensed: true
            play_protect: [NO_ISSUES, NO_DATA]
            max_device_activity: LEVEL_3
            max_skew: 2m
            replay_window: 1h
            registration_path: /.attest/android/
            api_base_url: https://127.0.0.1:9443/
            token_url: https://127.0.0.1:9443/token
            ca_file: ca.pem
            timeout: 1s
        """.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")))
        // Hex (as Play Console shows it) and padded base64url both become the verdict's form.
        #expect(c.certificateSHA256 == [Self.digest, Self.digest])
        #expect(c.header == "X-Integrity" && c.binding == .nonce && c.serviceAccountFile == nil)
        #expect(c.decryptionKeyFile == "/etc/gw/keys/aes.txt" && c.verificationKeyFile == "/etc/gw/keys/ec.txt")
        #expect(c.appRecognition == ["PLAY_RECOGNIZED", "UNRECOGNIZED_VERSION"] && c.minDeviceIntegrity == "MEETS_STRONG_INTEGRITY")
        #expect(c.requireLicensed && c.playProtect == ["NO_ISSUES", "NO_DATA"] && c.maxDeviceActivity == 3)
        #expect(c.maxSkewMillis == 120_000 && c.replayWindowMillis == 3_600_000 && c.registrationPath == "/.attest/android")
        #expect(c.apiBaseURL == "https://127.0.0.1:9443" && c.tokenURL == "https://127.0.0.1:9443/token")
        #expect(c.caFile == "/etc/gw/ca.pem" && c.timeoutMillis == 1000)
    }

    @Test func requiredKeysAndAWayToDecode() {
        #expect(errors("    type: play_integrity\n    service_account_file: sa.json") == [
            "gateway.yml:12:5: verifiers.v: missing required key \"package_name\"",
            "gateway.yml:12:5: verifiers.v: missing required key \"certificate_sha256\"",
        ])
        #expect(errors("    type: play_integrity\n    package_name: a.b\n    certificate_sha256: [\(Self.digest)]") == [
            "gateway.yml:12:5: verifiers.v: needs service_account_file (standard tokens, decoded by Google) or decryption_key_file and "
                + "verification_key_file (classic tokens, decoded locally)",
        ])
        #expect(errors("    type: play_integrity\n    package_name: a.b\n    certificate_sha256: [\(Self.digest)]\n    decryption_key_file: k") == [
            "gateway.yml:12:5: verifiers.v: classic tokens need both decryption_key_file and verification_key_file (verification_key_file is missing)",
        ])
    }

    @Test func badValuesAreReportedWithTheirLine() {
        #expect(errors(Self.base + "    min_device_integrity: MEETS_VIRTUAL_INTEGRITY") == [
            "gateway.yml:16:27: verifiers.v.min_device_integrity: invalid min_device_integrity \"MEETS_VIRTUAL_INTEGRITY\" "
                + "(use MEETS_BASIC_INTEGRITY, MEETS_DEVICE_INTEGRITY, MEETS_STRONG_INTEGRITY)",
        ])
        #expect(errors(Self.base + "    app_recognition: [PLAY_RECOGNIZED, SIDELOADED]") == [
            "gateway.yml:16:40: verifiers.v.app_recognition[1]: invalid value \"SIDELOADED\" (use PLAY_RECOGNIZED, UNRECOGNIZED_VERSION, UNEVALUATED)",
        ])
        #expect(errors(Self.base + "    max_device_activity: LEVEL_5").count == 1)
        #expect(errors(Self.base + "    binding: nonce") == [
            "gateway.yml:16:14: verifiers.v.binding: binding: nonce needs registration_path (its challenge endpoint issues the nonces)",
        ])
        #expect(errors(Self.base + "    api_base_url: http://playintegrity.example.com") == [
            "gateway.yml:16:19: verifiers.v.api_base_url: must use https (plain http only for loopback hosts)",
        ])
        #expect(errors(Self.base.replacingOccurrences(of: "com.example.app", with: "com.example/app")) == [
            "gateway.yml:13:19: verifiers.v.package_name: invalid package name \"com.example/app\" (letters, digits, \"_\" and \".\", e.g. com.example.app)",
        ])
        #expect(errors(Self.base + "    registration_rate_limit: {rate: 1/s}").isEmpty)
        #expect(errors(Self.base + "    registration_rate_limit: {rate: fast}") == [
            "gateway.yml:16:37: verifiers.v.registration_rate_limit.rate: invalid rate \"fast\" (use 20/s, 600/m or 1000/h, or 0 to turn it off)",
        ])
        // Bounded, so no window or expiry computed from them can overflow.
        #expect(errors(Self.base + "    max_skew: 25h") == ["gateway.yml:16:15: verifiers.v.max_skew: must be at most 24h"])
        #expect(errors(Self.base + "    replay_window: 721h") == ["gateway.yml:16:20: verifiers.v.replay_window: must be at most 720h"])
        #expect(errors(Self.base + "    timeout: 61s") == ["gateway.yml:16:14: verifiers.v.timeout: must be at most 60s"])
    }

    @Test func certificateDigestsMustBe32Bytes() {
        for bad in ["AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9", "00:01", "not a digest"] {
            #expect(errors(Self.base.replacingOccurrences(of: Self.digest, with: "\"\(bad)\"")) == [
                "gateway.yml:14:26: verifiers.v.certificate_sha256[0]: expected a SHA-256 digest: base64url (as in the verdict) or hex (as Play Console shows it)",
            ], "\(bad)")
        }
    }

    @Test func registrationPathsMustNotCollideWithAppAttest() {
        let yaml = minimalPlus("verifiers:\n  ios:\n    type: app_attest\n    team_id: ABCDE12345\n    bundle_ids: [a.b]\n"
            + "    registration_path: /.attest\n  v:\n" + Self.base + "    registration_path: /.attest")
        #expect(errorLines(yaml) == ["gateway.yml:21:24: verifiers.v.registration_path: registration_path \"/.attest\" is already used by verifier \"ios\""])
    }

    @Test func limitedUseAcceptsAPlayIntegrityVerifier() {
        let file = Fixtures.minimal.replacingOccurrences(of: "routes:\n  - match: {path_prefix: /}\n    upstream: api",
                                                         with: "routes:\n  - match: {path_prefix: /}\n    upstream: api\n    verify: [v]\n    limited_use: true")
        #expect(errorLines(file + "\nverifiers:\n  v:\n" + Self.base) == [])
    }
}
