public import Attestation
import GatewayConfig
public import GatewayProxy
public import JOSE

/// What `attest-gateway playintegrity verify` needs from the composition root: a verifier built from command-line
/// values exactly as `serve` builds one from gateway.yml (the same key files, the same Google client).
public enum PlayIntegrityTool {
    public static func verifier(package: String, decryptionKey: String?, verificationKey: String?, serviceAccount: String?,
                                apiBaseURL: String?, tokenURL: String?, caFile: String?, timeoutMillis: Int) throws(ProxyRuntime.StartupError)
        -> PlayIntegrityVerifier {
        guard (decryptionKey == nil) == (verificationKey == nil) else {
            throw ProxyRuntime.StartupError(description: "--decryption-key and --verification-key go together")
        }
        guard decryptionKey != nil || serviceAccount != nil else {
            throw ProxyRuntime.StartupError(description: "--decryption-key and --verification-key, or --service-account, are required")
        }
        var c = PlayIntegrityVerifierConfig(packageName: package, certificateSHA256: [])
        c.decryptionKeyFile = decryptionKey
        c.verificationKeyFile = verificationKey
        c.serviceAccountFile = serviceAccount
        if let apiBaseURL { c.apiBaseURL = apiBaseURL }
        c.tokenURL = tokenURL
        c.caFile = caFile
        c.timeoutMillis = timeoutMillis
        return try Verifiers.playIntegrityVerifier("cli", c)
    }

    /// A `certificate_sha256` value in the verdict's form, as gateway.yml reads it.
    public static func certificateDigest(_ text: String) -> String? { ConfigValue.sha256Digest(text) }

    public static func durationMillis(_ text: String) -> Int? { ConfigValue.parseDuration(text) }

    public static func isPackageName(_ text: String) -> Bool { ConfigValue.isPackageName(text) }

    /// The gateway's decision on a decoded payload; `skipCertificate`: no digest was given, so the verdict's own are
    /// taken as allowed (the output says the check did not run).
    public static func decide(_ payload: JSONObject, policy: PlayIntegrityPolicy, skipCertificate: Bool, at: Int64,
                              requestHash: String?, nonce: String?) -> VerificationStatus? {
        guard let verdict = PlayIntegrityVerdict.parse(payload) else { return .malformedToken }
        var policy = policy
        if skipCertificate {
            policy = PlayIntegrityPolicy(packageName: policy.packageName, certificateDigests: verdict.certificateDigests,
                                         appRecognition: policy.appRecognition, minDeviceIntegrity: PlayIntegrityPolicy.deviceLabels[policy.minDeviceIntegrity],
                                         requireLicensed: policy.requireLicensed, playProtect: policy.playProtect,
                                         maxDeviceActivity: policy.maxDeviceActivity, maxSkewMillis: policy.maxSkewMillis)
        }
        if case .failure(let status) = policy.judge(verdict, nowMillis: at * 1000) { return status }
        let trimmed = PlayIntegrityPolicy.unpadded
        if let requestHash, (verdict.requestHash ?? verdict.nonce).map({ trimmed($0) != trimmed(requestHash) }) ?? true { return .badAssertion }
        if let nonce, verdict.nonce.map({ trimmed($0) != trimmed(nonce) }) ?? true { return .badAssertion }
        return nil
    }
}
