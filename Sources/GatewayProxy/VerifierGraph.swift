#if canImport(Glibc)
import Glibc
#endif
import Attestation
import GatewayCrypto
import GatewayCore
import GatewayConfig
import JOSE
import KeySetCache
import Observability
import OutboundHTTP

/// The verifiers a configuration names, built once at start-up and shared by every loop.
public struct VerifierGraph: Sendable {
    public let appCheck: [String: AppCheckVerifier]
    public let appAttest: [String: AppAttestVerifier]
    public let deviceCheck: [String: DeviceCheckVerifier]

    /// The verifier `name` as `route` uses it, nil when none is built. App Attest carries the route's risk policy,
    /// the process's key cache and state policy, and tells the fraud-metric refresher which keys are in use.
    func routeVerifier(_ name: String, route: RouteConfig, state: StateService?,
                       fraudMetrics: [String: FraudMetricRefresher]) -> (any CredentialVerifier)? {
        if let v = appCheck[name] { return v }
        if let v = deviceCheck[name] { return v }
        if let v = appAttest[name], let state {
            let refresher = fraudMetrics[name]
            return AppAttestRouteVerifier(v, keys: state.appAttestKeys, maxRiskMetric: route.maxRiskMetric,
                                          allowWhenUnavailable: state.allowWhenUnavailable,
                                          onKeyUse: { keyID in refresher?.noteUse(keyID) })
        }
        return nil
    }

    /// Builds every verifier the gateway supports so far (App Check, App Attest). A `jwks_file` is loaded now, so a bad file
    /// stops start-up with a clear message; a `jwks_url` loads in the background (requests get 503
    /// `jwks_unavailable` until it has).
    ///
    /// `reusing`: the running graph and its configuration (a reload): an App Check verifier whose configuration is
    /// unchanged is taken over as it is, with its warm key set and refresher.
    public static func build(_ config: GatewayConfiguration, reusing previous: (graph: VerifierGraph, config: GatewayConfiguration)? = nil)
        throws(ProxyRuntime.StartupError) -> VerifierGraph {
        var appCheck: [String: AppCheckVerifier] = [:]
        for v in config.verifiers {
            guard case .appCheck(let c) = v.kind else { continue }
            if let previous, let old = previous.graph.appCheck[v.name], previous.config.verifiers.contains(v) {
                appCheck[v.name] = old
                continue
            }
            let name = v.name
            let keys = keySet(c, onEvent: { event in
                switch event {
                case .loaded(let count, let lifetime):
                    ProcessMetrics.shared.jwksRefresh(verifier: name, ok: true, keys: count)
                    Logger.info("jwks loaded", ["verifier": name, "keys": count.map(String.init) ?? "?",
                                                "lifetime_s": String(lifetime)])
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
            appCheck[name] = AppCheckVerifier(name: name, policy: policy, headerName: c.header, keys: keys,
                                              verifiedTokenCacheSize: c.verifiedTokenCacheSize)
        }
        return VerifierGraph(appCheck: appCheck, appAttest: try buildAppAttest(config), deviceCheck: try buildDeviceCheck(config))
    }

    /// The key set of an App Check verifier: from `jwks_file` (read by the first refresh) or `jwks_url` (fetched by
    /// the refresher; nothing is fetched here).
    static func keySet(_ c: AppCheckVerifierConfig, onEvent: (@Sendable (KeySetEvent) -> Void)?) -> KeySetCache<JWKS> {
        let fetch: @Sendable () throws -> KeySetFetch
        if let file = c.jwksFile {
            fetch = KeySetSources.file(path: file)
        } else {
            let url = c.jwksURL ?? "https://firebaseappcheck.googleapis.com/v1/jwks"
            fetch = KeySetSources.adapting(CurlHTTPClient().keySetFetch(url: url, timeoutMillis: 10_000))
        }
        return KeySetCache<JWKS>(
            policy: .init(maxAgeSeconds: c.jwksMaxAgeMillis / 1000),
            clock: { unixSeconds() },
            fetch: fetch,
            parse: { bytes in try JWKS.parse(bytes) },
            onEvent: onEvent,
            countKeys: { $0.keys.count })
    }

    /// App Attest verifiers: the root is Apple's (compiled in) or a PEM file read now, so a bad file stops start-up.
    static func buildAppAttest(_ config: GatewayConfiguration) throws(ProxyRuntime.StartupError) -> [String: AppAttestVerifier] {
        var built: [String: AppAttestVerifier] = [:]
        for v in config.verifiers {
            guard case .appAttest(let c) = v.kind else { continue }
            let root = try certificate(c.rootCA, builtin: AppAttestRoots.apple, key: "verifiers.\(v.name).root_ca")
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
                root: try certificate(c.receiptRootCA, builtin: AppAttestRoots.appleRootG3, key: "verifiers.\(v.name).receipt_root_ca"))
            built[v.name] = AppAttestVerifier(
                name: v.name, teamID: c.teamID, bundleIDs: c.bundleIDs, environment: environment, root: root,
                binding: binding, challengeTTLSeconds: Int64(max(1, c.challengeTTLMillis / 1000)),
                registrationPath: c.registrationPath,
                allowedValidationCategories: c.extensions?.allowedValidationCategories,
                minBundleVersion: c.extensions?.minBundleVersion, receiptVerifier: receiptVerifier)
        }
        return built
    }

    /// DeviceCheck verifiers: the `.p8` key is read now (a bad file stops start-up); calls go to `base_url` (Apple's
    /// by environment) through libcurl, trusting `ca_file` when given, with the configured timeout per call.
    static func buildDeviceCheck(_ config: GatewayConfiguration) throws(ProxyRuntime.StartupError) -> [String: DeviceCheckVerifier] {
        var built: [String: DeviceCheckVerifier] = [:]
        for v in config.verifiers {
            guard case .deviceCheck(let c) = v.kind else { continue }
            let key = try appleKey(c.privateKey, key: "verifiers.\(v.name).private_key")
            let base = c.baseURL ?? (c.environment == .production ? "https://api.devicecheck.apple.com"
                                                                  : "https://api.development.devicecheck.apple.com")
            let client = CurlHTTPClient(caFile: c.caFile)
            let timeout = c.timeoutMillis
            let name = v.name
            built[v.name] = DeviceCheckVerifier(
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
        return built
    }

    /// `builtin`, or a PEM certificate file read now (a bad one stops start-up, naming `key`).
    static func certificate(_ setting: String, builtin: X509Certificate, key: String) throws(ProxyRuntime.StartupError) -> X509Certificate {
        if setting == "builtin" { return builtin }
        guard let bytes = try? KeySetSources.file(path: setting)().body,
              let cert = X509Certificate(pem: String(decoding: bytes, as: UTF8.self)) else {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read a PEM certificate from \(setting)")
        }
        return cert
    }

    /// An Apple `.p8` key (PKCS#8 PEM, EC) read now (a bad one stops start-up, naming `key`).
    static func appleKey(_ path: String, key: String) throws(ProxyRuntime.StartupError) -> ECPrivateKey {
        do {
            let pem = try KeySetSources.file(path: path, maxBytes: 64 * 1024)().body
            return try ECPrivateKey(pem: String(decoding: pem, as: UTF8.self))
        } catch {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read an EC private key (.p8) from \(path): \(error)")
        }
    }

    /// Starts the key-set refreshers (background threads; the request path never fetches) — of every verifier, or
    /// after a reload only of those not taken over from `previous`.
    public func startBackgroundWork(after previous: VerifierGraph? = nil) {
        for (name, v) in appCheck where previous?.appCheck[name] !== v { v.keys.startRefresher() }
    }

    /// Stops the refreshers — of every verifier, or after a reload only of those `next` did not take over.
    public func stopBackgroundWork(keeping next: VerifierGraph? = nil) {
        for (name, v) in appCheck where next?.appCheck[name] !== v { v.keys.stop() }
    }

    /// Loads the key sets of verifiers not taken over from `previous` now (a reload warms them before the swap, so
    /// requests do not see `jwks_unavailable` while a new key set loads); failures are logged and left to the
    /// refresher.
    public func warm(after previous: VerifierGraph) {
        for (name, v) in appCheck where previous.appCheck[name] !== v { _ = v.keys.refreshIfDue(force: true) }
    }
}

@Sendable func unixSeconds() -> Int64 { WallClock.unixSeconds() }
