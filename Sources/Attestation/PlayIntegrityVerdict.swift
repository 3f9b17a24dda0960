public import JOSE

/// The fields of a Play Integrity verdict (`tokenPayloadExternal` from Google, or a classic token's JWS payload)
/// the policy reads. Everything in it is the attacker's until the token has been decrypted and its signature
/// checked (classic) or Google has decoded it (standard).
public struct PlayIntegrityVerdict: Sendable, Equatable {
    public let requestPackageName: String
    public let timestampMillis: Int64
    /// Classic requests: the nonce the app passed.
    public let nonce: String?
    /// Standard requests: the request hash the app passed.
    public let requestHash: String?
    public let appRecognition: String
    public let appPackageName: String?
    /// `certificateSha256Digest`, base64url as Google writes it.
    public let certificateDigests: [String]
    public let deviceLabels: [String]
    /// `recentDeviceActivity.deviceActivityLevel` (`LEVEL_1` … `LEVEL_4`, `UNEVALUATED`), when Google sent it.
    public let deviceActivity: String?
    /// `accountDetails.appLicensingVerdict`.
    public let licensing: String?
    /// `environmentDetails.playProtectVerdict`, when the app opted in.
    public let playProtect: String?

    /// The verdict in `payload`; nil when a field the policy needs is missing or of the wrong type (the token is
    /// then `malformed_token`: nothing about it can be judged).
    public static func parse(_ payload: JSONObject) -> PlayIntegrityVerdict? {
        guard let request = payload["requestDetails"]?.objectValue,
              let package = request["requestPackageName"]?.stringValue,
              let timestamp = millis(request["timestampMillis"]),
              let app = payload["appIntegrity"]?.objectValue,
              let recognition = app["appRecognitionVerdict"]?.stringValue,
              let device = payload["deviceIntegrity"]?.objectValue else { return nil }
        guard let nonce = optionalString(request["nonce"]), let requestHash = optionalString(request["requestHash"]),
              let appPackage = optionalString(app["packageName"]) else { return nil }
        guard let digests = stringList(app["certificateSha256Digest"]), let labels = stringList(device["deviceRecognitionVerdict"]) else {
            return nil
        }
        var activity: String? = nil
        if let raw = device["recentDeviceActivity"] {
            guard let object = raw.objectValue, let level = optionalString(object["deviceActivityLevel"]) else { return nil }
            activity = level
        }
        var licensing: String? = nil
        if let raw = payload["accountDetails"] {
            guard let object = raw.objectValue, let value = optionalString(object["appLicensingVerdict"]) else { return nil }
            licensing = value
        }
        var playProtect: String? = nil
        if let raw = payload["environmentDetails"] {
            guard let object = raw.objectValue, let value = optionalString(object["playProtectVerdict"]) else { return nil }
            playProtect = value
        }
        return PlayIntegrityVerdict(requestPackageName: package, timestampMillis: timestamp, nonce: nonce ?? nil,
                                    requestHash: requestHash ?? nil, appRecognition: recognition, appPackageName: appPackage ?? nil,
                                    certificateDigests: digests, deviceLabels: labels, deviceActivity: activity ?? nil,
                                    licensing: licensing ?? nil, playProtect: playProtect ?? nil)
    }

    /// An array of strings (empty when absent); nil for any other type or a non-string item.
    private static func stringList(_ value: JSONValue?) -> [String]? {
        guard let value else { return [] }
        guard let items = value.arrayValue else { return nil }
        var out: [String] = []
        for item in items {
            guard let text = item.stringValue else { return nil }
            out.append(text)
        }
        return out
    }

    /// `.some(nil)` when absent, `.some(text)` for a string, nil for any other type.
    private static func optionalString(_ value: JSONValue?) -> String?? {
        guard let value else { return .some(nil) }
        guard let text = value.stringValue else { return nil }
        return .some(text)
    }

    /// Year 5138: later timestamps are not a clock's.
    static let maxTimestampMillis: Int64 = 100_000_000_000_000

    /// Google writes `timestampMillis` as a decimal string (int64 in proto3 JSON); a JSON integer is read too.
    private static func millis(_ value: JSONValue?) -> Int64? {
        switch value {
        case .string(let text)?:
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let v = Int64(text), v <= maxTimestampMillis else { return nil }
            return v
        case .number(let n)?:
            guard let v = n.int64, v >= 0, v <= maxTimestampMillis else { return nil }
            return v
        default:
            return nil
        }
    }
}

/// A `play_integrity` verifier's policy on a verdict (PROTOCOL.md Additions), in a fixed order: the first failing
/// check decides the reason.
public struct PlayIntegrityPolicy: Sendable {
    public static let deviceLabels = ["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"]
    public static let activityLevels = ["LEVEL_1", "LEVEL_2", "LEVEL_3", "LEVEL_4"]

    public let packageName: String
    /// Allowed signing-certificate digests (base64url without padding).
    public let certificateDigests: [String]
    public let appRecognition: [String]
    /// Index into `deviceLabels` of the weakest label accepted.
    public let minDeviceIntegrity: Int
    public let requireLicensed: Bool
    public let playProtect: [String]?
    /// 1 … 4 (`LEVEL_1` … `LEVEL_4`).
    public let maxDeviceActivity: Int?
    public let maxSkewMillis: Int64

    public init(packageName: String, certificateDigests: [String], appRecognition: [String] = ["PLAY_RECOGNIZED"],
                minDeviceIntegrity: String = "MEETS_DEVICE_INTEGRITY", requireLicensed: Bool = false, playProtect: [String]? = nil,
                maxDeviceActivity: Int? = nil, maxSkewMillis: Int64 = 300_000) {
        self.packageName = packageName
        self.certificateDigests = certificateDigests.map(Self.unpadded)
        self.appRecognition = appRecognition
        self.minDeviceIntegrity = Self.deviceLabels.firstIndex(of: minDeviceIntegrity) ?? 1
        self.requireLicensed = requireLicensed
        self.playProtect = playProtect
        self.maxDeviceActivity = maxDeviceActivity
        self.maxSkewMillis = maxSkewMillis
    }

    /// What a passing verdict tells the upstream.
    public struct Judged: Sendable, Equatable {
        /// The strongest device label present (`X-Attest-Device-Integrity`).
        public let deviceIntegrity: String
        public let appRecognition: String
    }

    /// Package, freshness, app recognition (package and signing certificate), device integrity, licensing, Play
    /// Protect, device activity.
    public func judge(_ v: PlayIntegrityVerdict, nowMillis: Int64) -> Result<Judged, VerificationStatus> {
        // Every comparison is byte for byte: Unicode equivalence plays no part in matching Google's labels.
        guard Self.same(v.requestPackageName, packageName) else { return .failure(.wrongPackage) }
        guard abs(nowMillis - v.timestampMillis) <= maxSkewMillis else { return .failure(.staleTimestamp) }
        guard Self.listed(v.appRecognition, appRecognition) else { return .failure(.appNotRecognized) }
        if let appPackage = v.appPackageName, !Self.same(appPackage, packageName) { return .failure(.wrongPackage) }
        // A recognised (or unrecognised-version) app comes with its signing certificate: one must be ours. Only an
        // UNEVALUATED verdict, which an operator must allow explicitly, carries none.
        if !Self.same(v.appRecognition, "UNEVALUATED") || !v.certificateDigests.isEmpty {
            guard v.certificateDigests.contains(where: { Self.listed(Self.unpadded($0), certificateDigests) }) else {
                return .failure(.appNotRecognized)
            }
        }
        let ranks = v.deviceLabels.compactMap { label in Self.deviceLabels.firstIndex { Self.same($0, label) } }
        guard let strongest = ranks.max(), strongest >= minDeviceIntegrity else { return .failure(.deviceIntegrityTooLow) }
        if requireLicensed, !(v.licensing.map { Self.same($0, "LICENSED") } ?? false) { return .failure(.notLicensed) }
        // An allow-list or a ceiling the verdict does not speak to fails closed: the operator asked for that signal.
        if let playProtect, !(v.playProtect.map { Self.listed($0, playProtect) } ?? false) { return .failure(.environmentRisk) }
        if let maxDeviceActivity {
            let level = v.deviceActivity.flatMap { activity in Self.activityLevels.firstIndex { Self.same($0, activity) } }
            guard let level, level + 1 <= maxDeviceActivity else { return .failure(.deviceActivityTooHigh) }
        }
        return .success(Judged(deviceIntegrity: Self.deviceLabels[strongest], appRecognition: v.appRecognition))
    }

    static func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
    static func listed(_ value: String, _ list: [String]) -> Bool { list.contains { same($0, value) } }

    /// base64url without `=` padding (Google's digests and nonces may carry it).
    public static func unpadded(_ text: String) -> String {
        var t = Substring(text)
        while t.hasSuffix("=") { t.removeLast() }
        return String(t)
    }
}
