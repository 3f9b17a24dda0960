#if canImport(Glibc)
import Glibc
#endif
import Attestation
import GatewayCore
import GatewayConfig
import JOSE
import KeySetCache
import Observability
import OutboundHTTP

/// The verifiers a configuration names, built once at start-up and shared by every loop.
public struct VerifierGraph: Sendable {
    public let appCheck: [String: AppCheckVerifier]

    /// Builds every verifier the gateway supports so far (App Check). A `jwks_file` is loaded now, so a bad file
    /// stops start-up with a clear message; a `jwks_url` loads in the background (requests get 503
    /// `jwks_unavailable` until it has).
    public static func build(_ config: GatewayConfiguration) throws(ProxyRuntime.StartupError) -> VerifierGraph {
        var appCheck: [String: AppCheckVerifier] = [:]
        for v in config.verifiers {
            guard case .appCheck(let c) = v.kind else { continue }
            let fetch: @Sendable () throws -> KeySetFetch
            if let file = c.jwksFile {
                fetch = KeySetSources.file(path: file)
            } else {
                let url = c.jwksURL ?? "https://firebaseappcheck.googleapis.com/v1/jwks"
                fetch = KeySetSources.adapting(CurlHTTPClient().keySetFetch(url: url, timeoutMillis: 10_000))
            }
            let name = v.name
            let keys = KeySetCache<JWKS>(
                policy: .init(maxAgeSeconds: c.jwksMaxAgeMillis / 1000),
                clock: { unixSeconds() },
                fetch: fetch,
                parse: { bytes in try JWKS.parse(bytes) },
                onEvent: { event in
                    switch event {
                    case .loaded(let count, let lifetime):
                        Logger.info("jwks loaded", ["verifier": name, "keys": count.map(String.init) ?? "?",
                                                    "lifetime_s": String(lifetime)])
                    case .failed(let why):
                        Logger.warn("jwks refresh failed", ["verifier": name, "error": why])
                    case .notDue:
                        break
                    }
                },
                countKeys: { $0.keys.count })
            if c.jwksFile != nil, case .failed(let why) = keys.refreshIfDue(force: true) {
                throw ProxyRuntime.StartupError(description: "verifiers.\(name).jwks_file: \(why)")
            }
            let policy = AppCheckPolicy(projectNumber: c.projectNumber, projectID: c.projectID, appIDs: c.appIDs,
                                        clockSkewSeconds: Int64(c.clockSkewMillis / 1000))
            appCheck[name] = AppCheckVerifier(name: name, policy: policy, headerName: c.header, keys: keys,
                                              verifiedTokenCacheSize: c.verifiedTokenCacheSize)
        }
        return VerifierGraph(appCheck: appCheck)
    }

    /// Starts the key-set refreshers (background threads; the request path never fetches).
    public func startBackgroundWork() {
        for v in appCheck.values { v.keys.startRefresher() }
    }

    public func stopBackgroundWork() {
        for v in appCheck.values { v.keys.stop() }
    }
}

@Sendable func unixSeconds() -> Int64 { WallClock.unixSeconds() }
