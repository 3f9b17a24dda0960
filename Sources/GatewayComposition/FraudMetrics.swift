import Attestation
import GatewayConfig
import GatewayProxy

/// The fraud-metric refreshers of App Attest verifiers with `fraud_metric` (their `.p8` key read now).
enum FraudMetrics {
    static func refreshers(_ config: GatewayConfiguration, verifiers: VerifierGraph, state: StateService?)
        throws(ProxyRuntime.StartupError) -> [String: FraudMetricRefresher] {
        var built: [String: FraudMetricRefresher] = [:]
        for v in config.verifiers {
            guard case .appAttest(let c) = v.kind, let f = c.fraudMetric, let verifier = verifiers.appAttest[v.name],
                  let receiptVerifier = verifier.receiptVerifier, let state else { continue }
            let key = try ConfigFiles.appleKey(f.privateKey, key: "verifiers.\(v.name).fraud_metric.private_key")
            let base = f.baseURL ?? (c.environment == .development ? "https://data-development.appattest.apple.com"
                                                                   : "https://data.appattest.apple.com")
            built[v.name] = FraudMetricRefresher(
                verifier: verifier, receiptVerifier: receiptVerifier, auth: AppleAuthToken(teamID: c.teamID, keyID: f.keyID, key: key),
                baseURL: base, caFile: f.caFile, timeoutMillis: f.timeoutMillis,
                refreshIntervalSeconds: Int64(f.refreshIntervalMillis / 1000), state: state)
        }
        return built
    }
}
