/// The `play_integrity` verifier type.
extension ConfigLoader {
    static let playAppRecognition = ["PLAY_RECOGNIZED", "UNRECOGNIZED_VERSION", "UNEVALUATED"]
    static let playDeviceIntegrity = ["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"]
    static let playProtectVerdicts = ["NO_ISSUES", "NO_DATA", "POSSIBLE_RISK", "MEDIUM_RISK", "HIGH_RISK", "UNEVALUATED"]
    static let playDeviceActivity = ["LEVEL_1", "LEVEL_2", "LEVEL_3", "LEVEL_4"]

    static func decodePlayIntegrity(_ map: MappingReader) -> PlayIntegrityVerifierConfig? {
        map.rejectUnknownKeys(allowed: ["type", "package_name", "certificate_sha256", "header", "binding",
                                        "service_account_file", "decryption_key_file", "verification_key_file",
                                        "app_recognition", "min_device_integrity", "require_licensed", "play_protect",
                                        "max_device_activity", "max_skew", "replay_window", "registration_path",
                                        "api_base_url", "token_url", "ca_file", "timeout", "registration_rate_limit"])
        var packageName = map.nonEmptyString("package_name", required: true)
        if let name = packageName, !ConfigValue.isPackageName(name) {
            // It is part of Google's URL and reaches the upstream as X-Attest-App-Id.
            map.report("invalid package name \"\(name)\" (letters, digits, \"_\" and \".\", e.g. com.example.app)", key: "package_name")
            packageName = nil
        }
        let digests = certificateDigests(map)
        let header = map.headerName("header")
        let binding = map.oneOf("binding", [PlayIntegrityBindingConfig.request, .nonce])
        let serviceAccount = map.filePath("service_account_file")
        let decryptionKey = map.filePath("decryption_key_file")
        let verificationKey = map.filePath("verification_key_file")
        if (decryptionKey == nil) != (verificationKey == nil), map.contains("decryption_key_file") != map.contains("verification_key_file") {
            let missing = decryptionKey == nil ? "decryption_key_file" : "verification_key_file"
            map.context.report("classic tokens need both decryption_key_file and verification_key_file (\(missing) is missing)",
                               at: map.node, path: map.path)
        }
        if !map.contains("service_account_file") && !map.contains("decryption_key_file") && !map.contains("verification_key_file") {
            map.context.report("needs service_account_file (standard tokens, decoded by Google) or decryption_key_file and "
                               + "verification_key_file (classic tokens, decoded locally)", at: map.node, path: map.path)
        }
        let appRecognition = labels(map, "app_recognition", playAppRecognition)
        let minDevice = label(map, "min_device_integrity", playDeviceIntegrity)
        let requireLicensed = map.bool("require_licensed")
        let playProtect = labels(map, "play_protect", playProtectVerdicts)
        let maxActivity = label(map, "max_device_activity", playDeviceActivity)
        let maxSkew = map.duration("max_skew", max: (86_400_000, "24h"))
        let replayWindow = map.duration("replay_window", max: (30 * 86_400_000, "720h"))
        let registrationPath = self.registrationPath(map)
        if binding == .nonce && !map.contains("registration_path") {
            map.report("binding: nonce needs registration_path (its challenge endpoint issues the nonces)", key: "binding")
        }
        let apiBase = map.string("api_base_url").flatMap { keyServerURL($0, key: "api_base_url", map) }
        let tokenURL = map.string("token_url").flatMap { keyServerURL($0, key: "token_url", map) }
        let caFile = map.filePath("ca_file")
        let timeout = map.duration("timeout", max: (60_000, "60s"))
        let registrationLimit = registrationRateLimit(map)

        guard let packageName, let digests else { return nil }
        var config = PlayIntegrityVerifierConfig(packageName: packageName, certificateSHA256: digests)
        if let header { config.header = header }
        if let binding { config.binding = binding }
        config.serviceAccountFile = serviceAccount
        config.decryptionKeyFile = decryptionKey
        config.verificationKeyFile = verificationKey
        if let appRecognition { config.appRecognition = appRecognition }
        if let minDevice { config.minDeviceIntegrity = minDevice }
        if let requireLicensed { config.requireLicensed = requireLicensed }
        config.playProtect = playProtect
        config.maxDeviceActivity = maxActivity.flatMap { playDeviceActivity.firstIndex(of: $0) }.map { $0 + 1 }
        if let maxSkew { config.maxSkewMillis = maxSkew }
        if let replayWindow { config.replayWindowMillis = replayWindow }
        config.registrationPath = registrationPath
        if let apiBase {
            var base = apiBase
            while base.hasSuffix("/") { base.removeLast() }
            config.apiBaseURL = base
        }
        config.tokenURL = tokenURL
        config.caFile = caFile
        if let timeout { config.timeoutMillis = timeout }
        if let registrationLimit { config.registrationRateLimit = registrationLimit }
        return config
    }

    /// `certificate_sha256`: each a SHA-256 digest, base64url (as the verdict's `certificateSha256Digest` carries it,
    /// padding optional) or hex with or without colons (as Play Console shows the fingerprint).
    /// Kept as base64url without padding (hex is converted), the form the verifier decodes.
    static func certificateDigests(_ map: MappingReader) -> [String]? {
        guard let items = map.stringList("certificate_sha256", nonEmpty: true, required: true),
              let nodes = map.list("certificate_sha256") else { return nil }
        var digests: [String] = []
        for (index, text) in items.enumerated() {
            guard let digest = ConfigValue.sha256Digest(text) else {
                map.context.report("expected a SHA-256 digest: base64url (as in the verdict) or hex (as Play Console shows it)",
                                   at: nodes[index], path: indexPath(map.childPath("certificate_sha256"), index))
                return nil
            }
            digests.append(digest)
        }
        return digests
    }

    /// One of Google's verdict labels, with the list of valid ones in the error.
    static func label(_ map: MappingReader, _ key: String, _ valid: [String]) -> String? {
        guard let text = map.string(key) else { return nil }
        guard valid.contains(text) else {
            map.report("invalid \(key) \"\(text)\" (use \(valid.joined(separator: ", ")))", key: key)
            return nil
        }
        return text
    }

    /// A non-empty list of Google's verdict labels.
    static func labels(_ map: MappingReader, _ key: String, _ valid: [String]) -> [String]? {
        guard let items = map.stringList(key, nonEmpty: true), let nodes = map.list(key) else { return nil }
        for (index, text) in items.enumerated() where !valid.contains(text) {
            map.context.report("invalid value \"\(text)\" (use \(valid.joined(separator: ", ")))", at: nodes[index],
                               path: indexPath(map.childPath(key), index))
            return nil
        }
        return items
    }
}
