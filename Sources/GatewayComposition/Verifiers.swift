import Attestation
import GatewayConfig
import GatewayProxy
import JOSE
import KeySetCache
import Observability
import OutboundHTTP

/// Every verifier a configuration names, built by type. A new verifier type is one case here (its builder beside
/// the others), after its configuration decoding (GatewayConfig) and its type (Attestation).
enum Verifiers {
    /// Files a verifier names are read now, so a bad one stops start-up (or the reload) naming its key; a
    /// `jwks_url` loads in the background (requests get 503 `jwks_unavailable` until it has).
    ///
    /// `reusing`: the running graph and its configuration (a reload): an App Check verifier whose configuration is
    /// unchanged is taken over as it is, with its warm key set and refresher.
    static func graph(_ config: GatewayConfiguration, reusing previous: (graph: VerifierGraph, config: GatewayConfiguration)?)
        throws(ProxyRuntime.StartupError) -> VerifierGraph {
        var shared: [String: any CredentialVerifier] = [:]
        var appAttest: [String: AppAttestVerifier] = [:]
        var keySets: [String: KeySetCache<JWKS>] = [:]
        for v in config.verifiers {
            switch v.kind {
            case .appCheck(let c):
                if let previous, let old = previous.graph.shared[v.name] as? AppCheckVerifier, previous.config.verifiers.contains(v) {
                    shared[v.name] = old
                    keySets[v.name] = old.keys
                    continue
                }
                let built = try appCheckVerifier(v.name, c)
                shared[v.name] = built
                keySets[v.name] = built.keys
            case .appAttest(let c):
                appAttest[v.name] = try appAttestVerifier(v.name, c)
            case .deviceCheck(let c):
                shared[v.name] = try deviceCheckVerifier(v.name, c)
            case .playIntegrity(let c):
                shared[v.name] = try playIntegrityVerifier(v.name, c)
            }
        }
        return VerifierGraph(shared: shared, appAttest: appAttest, keySets: keySets)
    }

    /// App Check: a `jwks_file` is loaded now; refresh events go to the metrics and the log.
    static func appCheckVerifier(_ name: String, _ c: AppCheckVerifierConfig) throws(ProxyRuntime.StartupError) -> AppCheckVerifier {
        let keys = ConfigFiles.keySet(c, onEvent: { event in
            switch event {
            case .loaded(let count, let lifetime):
                ProcessMetrics.shared.jwksRefresh(verifier: name, ok: true, keys: count)
                if let count {
                    Logger.info("jwks loaded", ["verifier": name], numbers: ["keys": Int64(count), "lifetime_s": Int64(lifetime)])
                } else {
                    Logger.info("jwks loaded", ["verifier": name], numbers: ["lifetime_s": Int64(lifetime)])
                }
            case .failed(let why):
                ProcessMetrics.shared.jwksRefresh(verifier: name, ok: false, keys: nil)
                Logger.warn("jwks refresh failed", ["verifier": name, "error": why])
            case .notDue:
                break
            }
        })
        if c.jwksFile != nil, case .failed(let why) = keys.refreshIfDue(force: true) {
            throw ProxyRuntime.StartupError(key: "verifiers.\(name).jwks_file", message: why)
        }
        let policy = AppCheckPolicy(projectNumber: c.projectNumber, projectID: c.projectID, appIDs: c.appIDs,
                                    clockSkewSeconds: Int64(c.clockSkewMillis / 1000))
        return AppCheckVerifier(name: name, policy: policy, headerName: c.header, keys: keys, verifiedTokenCacheSize: c.verifiedTokenCacheSize)
    }

    /// App Attest: the root is Apple's (compiled in) or a PEM file read now.
    static func appAttestVerifier(_ name: String, _ c: AppAttestVerifierConfig) throws(ProxyRuntime.StartupError) -> AppAttestVerifier {
        let root = try ConfigFiles.certificate(c.rootCA, builtin: AppAttestRoots.apple, key: "verifiers.\(name).root_ca")
        let environment: AppAttestEnvironmentPolicy = switch c.environment {
        case .production: .production
        case .development: .development
        case .any: .any
        }
        let binding: AppAttestClientDataBinding = switch c.binding {
        case .request: .request(maxSkewSeconds: Int64(c.maxSkewMillis / 1000))
        case .challenge: .challenge
        }
        let receiptVerifier = c.fraudMetric == nil ? nil : AppAttestReceiptVerifier(
            root: try ConfigFiles.certificate(c.receiptRootCA, builtin: AppAttestRoots.appleRootG3, key: "verifiers.\(name).receipt_root_ca"))
        return AppAttestVerifier(
            name: name, teamID: c.teamID, bundleIDs: c.bundleIDs, environment: environment, root: root,
            binding: binding, challengeTTLSeconds: Int64(max(1, c.challengeTTLMillis / 1000)),
            registrationPath: c.registrationPath,
            allowedValidationCategories: c.extensions?.allowedValidationCategories,
            minBundleVersion: c.extensions?.minBundleVersion, receiptVerifier: receiptVerifier)
    }

    /// DeviceCheck: the `.p8` key is read now; calls go to `base_url` (Apple's by environment) through libcurl,
    /// trusting `ca_file` when given, with the configured timeout per call.
    static func deviceCheckVerifier(_ name: String, _ c: DeviceCheckVerifierConfig) throws(ProxyRuntime.StartupError) -> DeviceCheckVerifier {
        let key = try ConfigFiles.appleKey(c.privateKey, key: "verifiers.\(name).private_key")
        let base = c.baseURL ?? (c.environment == .production ? "https://api.devicecheck.apple.com"
                                                              : "https://api.development.devicecheck.apple.com")
        let client = CurlHTTPClient(caFile: c.caFile)
        let timeout = c.timeoutMillis
        return DeviceCheckVerifier(
            name: name, teamID: c.teamID, headerName: c.header, subjectHeader: c.subjectBinding?.header,
            auth: AppleAuthToken(teamID: c.teamID, keyID: c.keyID, key: key),
            replayWindowSeconds: Int64(c.replayWindowMillis / 1000),
            post: { path, authorization, body in
                let result = client.post(base + path, headers: [("Authorization", authorization), ("Content-Type", "application/json")],
                                         body: body, timeoutMillis: timeout, maxBodyBytes: 64 * 1024)
                switch result {
                case .success(let r): return AppleResponse(status: r.status, body: r.body)
                case .failure(let e):
                    Logger.warn("devicecheck call failed", ["verifier": name, "path": path, "error": e.description])
                    return nil
                }
            })
    }

    /// Play Integrity: the classic keys and the service account are read now; Google is called through libcurl
    /// (trusting `ca_file` when given) with the configured timeout per call.
    static func playIntegrityVerifier(_ name: String, _ c: PlayIntegrityVerifierConfig) throws(ProxyRuntime.StartupError) -> PlayIntegrityVerifier {
        let base = "verifiers.\(name)"
        let classic = try ConfigFiles.playIntegrityKeys(c, base: base)
        var google: PlayIntegrityGoogle? = nil
        if let file = c.serviceAccountFile {
            let account = try ConfigFiles.serviceAccount(file, key: base + ".service_account_file", usesTokenURI: c.tokenURL == nil)
            let client = CurlHTTPClient(caFile: c.caFile)
            let timeout = c.timeoutMillis
            google = PlayIntegrityGoogle(account: account, packageName: c.packageName, apiBaseURL: c.apiBaseURL, tokenURL: c.tokenURL,
                                         post: { url, headers, body in
                switch client.post(url, headers: headers, body: body, timeoutMillis: timeout, maxBodyBytes: 256 * 1024) {
                case .success(let r): return (r.status, r.body)
                case .failure(let e):
                    Logger.warn("play integrity call failed", ["verifier": name, "url": url, "error": e.description])
                    return nil
                }
            })
        }
        let policy = PlayIntegrityPolicy(packageName: c.packageName, certificateDigests: c.certificateSHA256,
                                         appRecognition: c.appRecognition, minDeviceIntegrity: c.minDeviceIntegrity,
                                         requireLicensed: c.requireLicensed, playProtect: c.playProtect,
                                         maxDeviceActivity: c.maxDeviceActivity, maxSkewMillis: Int64(c.maxSkewMillis))
        let binding: PlayIntegrityBinding = c.binding == .nonce ? .nonce : .request
        return PlayIntegrityVerifier(name: name, policy: policy, headerName: c.header, binding: binding, classic: classic, google: google,
                                     registrationPath: c.registrationPath, replayWindowSeconds: Int64((c.replayWindowMillis + 999) / 1000))
    }
}
