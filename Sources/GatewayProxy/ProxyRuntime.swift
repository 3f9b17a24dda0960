import GatewayConfig
import GatewayPosix
import HTTP1

/// An upstream with its address resolved once at start-up.
public struct UpstreamTarget: Sendable {
    public let name: String
    public let address: SocketAddress
    /// Prefixed to every forwarded request-target ("" when the url has no path).
    public let basePath: [UInt8]
    public let connectTimeoutMillis: UInt64
    public let responseTimeoutMillis: UInt64
    public let maxIdleConnections: Int
}

/// Everything a worker needs, built once from the configuration and shared read-only by every loop.
public struct ProxyRuntime: Sendable {
    public let config: GatewayConfiguration
    public let routes: RouteTable
    public let verifiers: VerifierGraph
    /// The state store, opened when some route uses `limited_use` or an App Attest verifier is configured.
    public let state: StateService?
    /// `POST {registration_path}/challenge|attest` of the App Attest verifiers (they take precedence over routes).
    let registration: RegistrationEndpoints
    public let upstreams: [UpstreamTarget]
    public let listenAddresses: [SocketAddress]
    public let requestLimits: HTTP1Limits
    public let responseLimits: HTTP1Limits
    public let headerTimeoutMillis: UInt64
    public let idleTimeoutMillis: UInt64
    /// How long an idle pooled upstream connection is kept.
    public let upstreamIdleMillis: UInt64 = 30_000
    /// Write-buffer size above which the gateway stops reading from the other side (backpressure).
    public let highWaterBytes = 256 * 1024

    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
    }

    public init(config: GatewayConfiguration) throws(StartupError) {
        self.config = config
        verifiers = try VerifierGraph.build(config)
        routes = RouteTable(config: config, verifiers: verifiers.byName)
        registration = RegistrationEndpoints(verifiers.appAttest.values.sorted { $0.name < $1.name })
        // The state store is opened when something needs it: limited use, or App Attest (challenges, keys, counters).
        state = config.routes.contains { $0.limitedUse } || !verifiers.appAttest.isEmpty
            ? try StateService.open(config.state) : nil
        var targets: [UpstreamTarget] = []
        for u in config.upstreams {
            if u.tls {
                throw StartupError(description: "upstreams.\(u.name).url: https upstreams are not supported yet (TLS to upstreams arrives with the TLS issue)")
            }
            let address: SocketAddress
            do { address = try SocketAddress.resolve(host: u.host, port: u.port) } catch {
                throw StartupError(description: "upstreams.\(u.name).url: \(error)")
            }
            targets.append(UpstreamTarget(
                name: u.name, address: address, basePath: Array(u.basePath.utf8),
                connectTimeoutMillis: UInt64(u.connectTimeoutMillis), responseTimeoutMillis: UInt64(u.responseTimeoutMillis),
                maxIdleConnections: u.maxIdleConnections))
        }
        upstreams = targets
        var addresses: [SocketAddress] = []
        for l in config.listeners {
            if l.tls != nil {
                throw StartupError(description: "listeners.\(l.name).tls: TLS termination is not supported yet (it arrives with the TLS issue)")
            }
            do { addresses.append(try SocketAddress.resolve(host: l.address.host, port: l.address.port)) } catch {
                throw StartupError(description: "listeners.\(l.name).address: \(error)")
            }
        }
        listenAddresses = addresses
        requestLimits = HTTP1Limits(maxHeaderBytes: config.limits.maxHeaderBytes, maxHeaders: config.limits.maxHeaders)
        responseLimits = HTTP1Limits(maxHeaderBytes: max(64 * 1024, config.limits.maxHeaderBytes), maxHeaders: max(200, config.limits.maxHeaders))
        headerTimeoutMillis = UInt64(config.limits.headerTimeoutMillis)
        idleTimeoutMillis = UInt64(config.limits.idleTimeoutMillis)
    }
}
