/// The `app_attest` verifier type.
extension ConfigLoader {
    static func decodeAppAttest(_ map: MappingReader) -> AppAttestVerifierConfig? {
        map.rejectUnknownKeys(allowed: ["type", "team_id", "bundle_ids", "environment", "root_ca", "binding",
                                        "max_skew", "challenge_ttl", "registration_path", "extensions",
                                        "receipt_root_ca", "fraud_metric", "registration_rate_limit"])
        let teamID = self.teamID(map)
        let bundleIDs = map.stringList("bundle_ids", nonEmpty: true, required: true)
        let environment = map.oneOf("environment", [AppAttestEnvironment.production, .development, .any])
        let rootCA = map.builtinOrPath("root_ca")
        let binding = map.oneOf("binding", [AppAttestBinding.request, .challenge])
        let maxSkew = map.duration("max_skew", positive: false)
        let challengeTTL = map.duration("challenge_ttl")
        let registrationPath = self.registrationPath(map)
        let extensions = map.mapping("extensions").map(decodeExtensions)
        let receiptRootCA = map.builtinOrPath("receipt_root_ca")
        let fraudMetric = map.mapping("fraud_metric").flatMap(decodeFraudMetric)
        let registrationLimit = registrationRateLimit(map)

        guard let teamID, let bundleIDs else { return nil }
        var config = AppAttestVerifierConfig(teamID: teamID, bundleIDs: bundleIDs)
        if let environment { config.environment = environment }
        if let rootCA { config.rootCA = rootCA }
        if let binding { config.binding = binding }
        if let maxSkew { config.maxSkewMillis = maxSkew }
        if let challengeTTL { config.challengeTTLMillis = challengeTTL }
        if let registrationPath { config.registrationPath = registrationPath }
        config.extensions = extensions
        if let receiptRootCA { config.receiptRootCA = receiptRootCA }
        config.fraudMetric = fraudMetric
        if let registrationLimit { config.registrationRateLimit = registrationLimit }
        return config
    }

    /// An absolute path without query; a trailing slash is dropped (`/.attest/ios/` → `/.attest/ios`).
    static func registrationPath(_ map: MappingReader) -> String? {
        guard let text = map.string("registration_path") else { return nil }
        guard text.hasPrefix("/"), text.count > 1, !text.contains("?"), !text.contains("#"), !text.contains(" ") else {
            map.report("must start with \"/\" and name a path (e.g. /.attest/ios)", key: "registration_path")
            return nil
        }
        var path = text
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }

    static func decodeExtensions(_ map: MappingReader) -> AppAttestExtensionsPolicy {
        map.rejectUnknownKeys(allowed: ["allowed_validation_categories", "min_bundle_version"])
        var policy = AppAttestExtensionsPolicy()
        if let items = map.list("allowed_validation_categories") {
            var categories: [Int] = []
            for (index, item) in items.enumerated() {
                guard let value = item.intValue, value >= 0 else {
                    map.context.report("expected a non-negative integer", at: item,
                                       path: indexPath(map.childPath("allowed_validation_categories"), index))
                    continue
                }
                categories.append(value)
            }
            policy.allowedValidationCategories = categories
        }
        policy.minBundleVersion = map.nonEmptyString("min_bundle_version")
        return policy
    }

    static func decodeFraudMetric(_ map: MappingReader) -> FraudMetricConfig? {
        map.rejectUnknownKeys(allowed: ["key_id", "private_key", "base_url", "ca_file", "refresh_interval", "timeout"])
        let keyID = map.nonEmptyString("key_id", required: true)
        let privateKey = map.filePath("private_key", required: true)
        let baseURL = map.string("base_url").flatMap { keyServerURL($0, key: "base_url", map) }
        let caFile = map.filePath("ca_file")
        let refresh = map.duration("refresh_interval")
        let timeout = map.duration("timeout")
        guard let keyID, let privateKey else { return nil }
        var config = FraudMetricConfig(keyID: keyID, privateKey: privateKey)
        config.baseURL = baseURL
        config.caFile = caFile
        if let refresh { config.refreshIntervalMillis = refresh }
        if let timeout { config.timeoutMillis = timeout }
        return config
    }
}
