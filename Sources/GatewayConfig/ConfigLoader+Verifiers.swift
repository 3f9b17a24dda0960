/// The `verifiers` section: a mapping from name to settings, whose `type` decides which keys are allowed.
extension ConfigLoader {
    static let googleJWKSURL = "https://firebaseappcheck.googleapis.com/v1/jwks"
    static let verifierTypes = ["app_check", "app_attest", "device_check", "play_integrity"]

    /// Valid verifiers, and every declared name with its `type` (nil when unreadable), so routes can be checked
    /// against names even when a verifier's settings are broken.
    struct DecodedVerifiers {
        var configs: [VerifierConfig] = []
        var declared: [String: String?] = [:]
    }

    static func decodeVerifiers(_ top: MappingReader) -> DecodedVerifiers {
        var result = DecodedVerifiers()
        guard let section = top.mapping("verifiers") else { return result }
        var registrationPaths: [String: String] = [:]
        for (name, pair) in section.pairs {
            result.declared[name] = .some(nil)
            guard let map = MappingReader(pair.value, path: section.childPath(name), context: top.context) else { continue }
            guard let type = map.string("type", required: true) else { continue }
            guard verifierTypes.contains(type) else {
                map.report("invalid type \"\(type)\" (use app_check, app_attest, device_check or play_integrity)", key: "type")
                continue
            }
            result.declared[name] = type
            let kind: VerifierKind?
            switch type {
            case "app_check": kind = decodeAppCheck(map).map(VerifierKind.appCheck)
            case "app_attest":
                let config = decodeAppAttest(map)
                if let config { claimRegistrationPath(config.registrationPath, by: name, map, &registrationPaths) }
                kind = config.map(VerifierKind.appAttest)
            case "play_integrity":
                let config = decodePlayIntegrity(map)
                if let path = config?.registrationPath { claimRegistrationPath(path, by: name, map, &registrationPaths) }
                kind = config.map(VerifierKind.playIntegrity)
            default: kind = decodeDeviceCheck(map).map(VerifierKind.deviceCheck)
            }
            if let kind { result.configs.append(VerifierConfig(name: name, kind: kind)) }
        }
        return result
    }

    /// Two verifiers on one registration path would race for the same challenge/attest endpoints.
    static func claimRegistrationPath(_ path: String, by name: String, _ map: MappingReader, _ paths: inout [String: String]) {
        guard let other = paths[path] else {
            paths[path] = name
            return
        }
        let message = "registration_path \"\(path)\" is already used by verifier \"\(other)\""
        if map.contains("registration_path") {
            map.report(message, key: "registration_path")
        } else {
            map.context.report(message, at: map.node, path: map.path)
        }
    }

    static func decodeAppCheck(_ map: MappingReader) -> AppCheckVerifierConfig? {
        map.rejectUnknownKeys(allowed: ["type", "project_number", "project_id", "app_ids", "jwks_url", "jwks_file",
                                        "jwks_max_age", "clock_skew", "header", "verified_token_cache_size",
                                        "token_query_parameter"])
        var projectNumber = map.string("project_number", required: true)
        if let number = projectNumber, ConfigValue.decimal(Substring(number)) == nil {
            map.report("must be a string of digits", key: "project_number")
            projectNumber = nil
        }
        let projectID = map.nonEmptyString("project_id")
        let appIDs = map.stringList("app_ids", nonEmpty: true)
        let jwksURL = map.string("jwks_url").flatMap { keyServerURL($0, key: "jwks_url", map) }
        let jwksFile = map.filePath("jwks_file")
        if map.contains("jwks_url") && map.contains("jwks_file") {
            map.report("jwks_url and jwks_file are mutually exclusive", key: "jwks_file")
        }
        let maxAge = map.duration("jwks_max_age", max: (6 * 3_600_000, "6h"))
        let skew = map.duration("clock_skew", positive: false)
        let header = map.headerName("header")
        let cacheSize = map.int("verified_token_cache_size", min: 0)
        var queryParameter = map.nonEmptyString("token_query_parameter")
        if let name = queryParameter, !name.utf8.allSatisfy(ConfigValue.isQueryNameByte) {
            // Compared byte for byte with the query as sent: a name that needs percent-encoding would never match.
            map.report("invalid query parameter name \"\(name)\" (letters, digits, \"-._~\")", key: "token_query_parameter")
            queryParameter = nil
        }

        guard let projectNumber else { return nil }
        var config = AppCheckVerifierConfig(projectNumber: projectNumber)
        if let cacheSize { config.verifiedTokenCacheSize = cacheSize }
        config.projectID = projectID
        config.appIDs = appIDs
        config.jwksFile = jwksFile
        config.jwksURL = jwksFile == nil ? (jwksURL ?? googleJWKSURL) : nil
        if let maxAge { config.jwksMaxAgeMillis = maxAge }
        if let skew { config.clockSkewMillis = skew }
        if let header { config.header = header }
        config.tokenQueryParameter = queryParameter
        return config
    }

    static func decodeDeviceCheck(_ map: MappingReader) -> DeviceCheckVerifierConfig? {
        map.rejectUnknownKeys(allowed: ["type", "team_id", "key_id", "private_key", "environment", "base_url",
                                        "ca_file", "timeout", "header", "subject_binding", "replay_window"])
        let teamID = self.teamID(map)
        let keyID = map.nonEmptyString("key_id", required: true)
        let privateKey = map.filePath("private_key", required: true)
        let environment = map.oneOf("environment", [DeviceCheckEnvironment.production, .development])
        let baseURL = map.string("base_url").flatMap { keyServerURL($0, key: "base_url", map) }
        let caFile = map.filePath("ca_file")
        let timeout = map.duration("timeout")
        let header = map.headerName("header")
        let replayWindow = map.duration("replay_window")
        var subjectBinding: SubjectBindingConfig?
        if let binding = map.mapping("subject_binding") {
            binding.rejectUnknownKeys(allowed: ["header"])
            subjectBinding = binding.headerName("header", required: true).map(SubjectBindingConfig.init)
        }

        guard let teamID, let keyID, let privateKey else { return nil }
        var config = DeviceCheckVerifierConfig(teamID: teamID, keyID: keyID, privateKey: privateKey)
        if let environment { config.environment = environment }
        config.baseURL = baseURL
        config.caFile = caFile
        if let timeout { config.timeoutMillis = timeout }
        if let header { config.header = header }
        config.subjectBinding = subjectBinding
        if let replayWindow { config.replayWindowMillis = replayWindow }
        return config
    }

    /// An Apple team ID: exactly 10 upper-case letters and digits.
    static func teamID(_ map: MappingReader) -> String? {
        guard let text = map.string("team_id", required: true) else { return nil }
        let valid = text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }
        guard valid else {
            map.report("must be 10 upper-case letters or digits", key: "team_id")
            return nil
        }
        return text
    }

    /// A URL keys or verdicts are fetched from: https, except plain http to a loopback host (tests, sidecars).
    /// Anywhere else plain http would let a network attacker substitute keys and forge every token.
    static func keyServerURL(_ text: String, key: String, _ map: MappingReader) -> String? {
        guard let url = ConfigURL(text), !url.hasUserInfo else {
            map.report("invalid url (use https://host[:port]/path)", key: key)
            return nil
        }
        guard ConfigValue.isKeyServerURL(text) else {
            map.report("must use https (plain http only for loopback hosts)", key: key)
            return nil
        }
        return text
    }
}
