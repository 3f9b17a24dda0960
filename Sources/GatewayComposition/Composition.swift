public import GatewayConfig
public import GatewayProxy
/// The composition root: everything a configuration needs — verifiers by type, their key caches and HTTP clients,
/// the state backend, the fraud-metric refreshers — built here, in one place, and handed to `ProxyRuntime`. A
/// reload builds the next graph the same way, taking over what has not changed. GatewayProxy builds none of it.
public enum Composition {
    /// The runtime for `config`. `reusing`: the running runtime (a reload): unchanged App Check verifiers (with
    /// their warm key sets) and the open state store are taken over.
    public static func runtime(_ config: GatewayConfiguration, reusing previous: ProxyRuntime? = nil)
        throws(ProxyRuntime.StartupError) -> ProxyRuntime {
        let verifiers = try Verifiers.graph(config, reusing: previous.map { ($0.verifiers, $0.config) })
        // A reload keeps the open store (requests in flight may be waiting on it).
        let state: StateService?
        if let open = previous?.state { state = open } else { state = try StateBackends.openIfNeeded(config, verifiers: verifiers) }
        let fraudMetrics = try FraudMetrics.refreshers(config, verifiers: verifiers, state: state)
        return try ProxyRuntime(config: config, graph: RuntimeGraph(verifiers: verifiers, state: state, fraudMetrics: fraudMetrics),
                                reusing: previous)
    }
}
