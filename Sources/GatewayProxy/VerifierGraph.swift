public import Attestation
import GatewayConfig
public import JOSE
public import KeySetCache
/// The verifiers a configuration names, as the composition root (GatewayComposition) built them; shared by every
/// loop, read-only.
public struct VerifierGraph: Sendable {
    /// Verifiers routes use as they are, by name (App Check, DeviceCheck).
    public let shared: [String: any CredentialVerifier]
    /// App Attest verifiers by name: their registration endpoints, and one route verifier per route (the route's
    /// risk policy, the process's key cache).
    public let appAttest: [String: AppAttestVerifier]
    /// Key sets refreshed in the background, by verifier name (App Check's JWKS); `/readyz` waits for them.
    public let keySets: [String: KeySetCache<JWKS>]

    public init(shared: [String: any CredentialVerifier], appAttest: [String: AppAttestVerifier], keySets: [String: KeySetCache<JWKS>]) {
        self.shared = shared
        self.appAttest = appAttest
        self.keySets = keySets
    }

    /// The verifier `name` as `route` uses it, nil when none is built. App Attest carries the route's risk policy,
    /// the process's key cache and state policy, and tells the fraud-metric refresher which keys are in use.
    func routeVerifier(_ name: String, route: RouteConfig, state: StateService?,
                       fraudMetrics: [String: FraudMetricRefresher]) -> (any CredentialVerifier)? {
        if let v = shared[name] { return v }
        if let v = appAttest[name], let state {
            let refresher = fraudMetrics[name]
            return AppAttestRouteVerifier(v, keys: state.appAttestKeys, maxRiskMetric: route.maxRiskMetric,
                                          allowWhenUnavailable: state.allowWhenUnavailable,
                                          onKeyUse: { keyID in refresher?.noteUse(keyID) })
        }
        return nil
    }

    /// The names of key sets not yet usable (`/readyz` lists them as `jwks:<name>`).
    var keySetsNotReady: [String] { keySets.filter { !$0.value.isReady }.map(\.key).sorted() }

    /// Starts the key-set refreshers (background threads; the request path never fetches) — of every verifier, or
    /// after a reload only of those not taken over from `previous`.
    public func startBackgroundWork(after previous: VerifierGraph? = nil) {
        for (name, keys) in keySets where previous?.keySets[name] !== keys { keys.startRefresher() }
    }

    /// Stops the refreshers — of every verifier, or after a reload only of those `next` did not take over.
    public func stopBackgroundWork(keeping next: VerifierGraph? = nil) {
        for (name, keys) in keySets where next?.keySets[name] !== keys { keys.stop() }
    }

    /// Loads the key sets not taken over from `previous` now (a reload warms them before the swap, so requests do
    /// not see `jwks_unavailable` while a new key set loads); failures are logged and left to the refresher.
    public func warm(after previous: VerifierGraph) {
        for (name, keys) in keySets where previous.keySets[name] !== keys { _ = keys.refreshIfDue(force: true) }
    }
}

/// What the composition root builds from a configuration and hands to `ProxyRuntime`.
public struct RuntimeGraph: Sendable {
    public let verifiers: VerifierGraph
    /// The state store, when something needs it (limited use, App Attest, DeviceCheck's subject binding).
    public let state: StateService?
    /// The fraud-metric refreshers of App Attest verifiers with `fraud_metric`, by verifier name.
    public let fraudMetrics: [String: FraudMetricRefresher]

    public init(verifiers: VerifierGraph, state: StateService?, fraudMetrics: [String: FraudMetricRefresher]) {
        self.verifiers = verifiers
        self.state = state
        self.fraudMetrics = fraudMetrics
    }
}
