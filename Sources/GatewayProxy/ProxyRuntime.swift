public import GatewayConfig
import GatewayCore
public import GatewayPosix
import GatewayTLS
public import HTTP1
import HTTP2
import Attestation
import Observability
import StateStore

/// An upstream with its address resolved once at start-up.
public struct UpstreamTarget: Sendable {
    public let name: String
    /// The name's `MetricNames` id (the upstream latency histogram's label).
    public let metricID: Int
    public let address: SocketAddress
    /// Prefixed to every forwarded request-target ("" when the url has no path).
    public let basePath: [UInt8]
    public let connectTimeoutMillis: UInt64
    public let responseTimeoutMillis: UInt64
    public let maxIdleConnections: Int
    /// `https://` upstreams: the client TLS context (certificate checked against `ca_file` or the system store).
    let tls: TLSContext?
    /// The host name for SNI and the certificate check.
    let serverName: String
    /// `protocol: h2c` or `h2`: requests are streams of shared HTTP/2 connections.
    let http2: Bool
    /// Several endpoints, a hostname or a health check: where each connection goes (nil: always `address`).
    let cluster: UpstreamCluster?
}

extension UpstreamTarget: Equatable {
    /// The same upstream for pooling purposes: a reload keeps the pool (and its idle connections) of an equal one.
    public static func == (a: UpstreamTarget, b: UpstreamTarget) -> Bool {
        a.name == b.name && a.address.description == b.address.description && a.basePath == b.basePath &&
            a.connectTimeoutMillis == b.connectTimeoutMillis && a.responseTimeoutMillis == b.responseTimeoutMillis &&
            a.maxIdleConnections == b.maxIdleConnections && a.tls === b.tls && a.http2 == b.http2 && a.cluster === b.cluster
    }
}

/// Everything a worker needs, built once from the configuration and shared read-only by every loop.
public struct ProxyRuntime: Sendable {
    public let config: GatewayConfiguration
    public let routes: RouteTable
    public let verifiers: VerifierGraph
    /// The state store, opened when some route uses `limited_use` or an App Attest verifier is configured.
    public let state: StateService?
    /// `POST {registration_path}/challenge|attest` of the App Attest and Play Integrity verifiers (they take
    /// precedence over routes).
    let registration: RegistrationEndpoints
    /// `registration_rate_limit` of each verifier with registration endpoints (absent: turned off).
    let registrationLimits: [String: RateLimitConfig]
    /// The buckets of every rate limit; kept across reloads (a reload does not hand out a fresh budget). With a
    /// store that shares limits, the fallback when it fails.
    let rateLimiter: RateLimiter
    /// The state store when it shares rate limits (Redis): every limit takes its tokens there. Nil: `rateLimiter`.
    let sharedRateLimits: SharedRateLimits?
    /// `forward_auth.path`, if configured.
    let forwardAuthPath: [UInt8]?
    /// `verdict_token`: the signer of verified requests' verdicts (nil: not configured).
    let verdict: VerdictSigner?
    /// `verdict_token.jwks_path`, served on the public listeners too.
    let verdictJWKSPath: [UInt8]?
    /// The verdict field's lower-case name when clients' copies must be stripped (it is not an X-Attest-* name).
    let verdictStrip: [[UInt8]]
    /// `forward_auth.source`: where a call's original method, URI and host come from.
    let forwardAuthSource: ForwardAuthSource
    /// Some route has `match.host`: a forward-auth call must then name the original host.
    let routesMatchHost: Bool
    /// `paths:` — how request targets are made canonical before routing (also forward-auth's original URI).
    let pathOptions: RequestTargetCanonicalizer.Options
    /// App Check verifiers' `token_query_parameter`s: read on WebSocket handshakes only.
    let queryTokens: [QueryTokenSource]
    /// `limits.max_held_body_bytes`, process-wide (kept across reloads; the limit follows the configuration).
    let heldBodies: HeldBodyBudget
    /// The fraud-metric refreshers of App Attest verifiers with `fraud_metric`, by verifier name.
    let fraudMetrics: [String: FraudMetricRefresher]
    public let upstreams: [UpstreamTarget]
    public let listenAddresses: [SocketAddress]
    /// Per listener (same order), its TLS context when it has `tls:` (read from the files at start-up and on
    /// every reload, so SIGHUP picks up renewed certificates for new connections).
    let listenerTLS: [TLSContext?]
    /// Per listener, `http2`: h2c prior knowledge on plaintext, ALPN h2 on TLS.
    let listenerHTTP2: [Bool]
    /// Per listener, `trusted_proxies`: peers whose forwarding headers are kept and appended to.
    let listenerTrustedProxies: [[CIDRBlock]]
    /// The HTTP/2 session limits (max_header_bytes is the header list size).
    let h2Settings: H2Settings
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
        /// For a problem with one setting: its YAML path (`verifiers.ios.root_ca`); `message` is what is wrong with it
        /// (`description` is both, joined by ": ").
        public let key: String?
        public let message: String

        public init(description: String) {
            self.description = description
            key = nil
            message = description
        }

        public init(key: String, message: String) {
            description = "\(key): \(message)"
            self.key = key
            self.message = message
        }
    }

    /// `graph`: what the composition root built for `config` (GatewayComposition). `reusing`: the running runtime
    /// (a reload); what only a restart can change (listeners, admin, state) must be unchanged, or the reload fails.
    public init(config: GatewayConfiguration, graph: RuntimeGraph, reusing previous: ProxyRuntime? = nil) throws(StartupError) {
        self.config = config
        if let previous {
            if config.listeners != previous.config.listeners {
                throw StartupError(description: "listeners: changing listeners needs a restart")
            }
            if config.admin != previous.config.admin {
                throw StartupError(description: "admin: changing the admin listener needs a restart")
            }
            if previous.state != nil && config.state != previous.config.state {
                throw StartupError(description: "state: changing the state store needs a restart")
            }
        }
        verifiers = graph.verifiers
        state = graph.state
        fraudMetrics = graph.fraudMetrics
        routes = RouteTable(config: config) { [verifiers, state, fraudMetrics] name, route in
            verifiers.routeVerifier(name, route: route, state: state, fraudMetrics: fraudMetrics)
        }
        registration = RegistrationEndpoints(verifiers)
        var limits: [String: RateLimitConfig] = [:]
        for v in config.verifiers {
            switch v.kind {
            case .appAttest(let c): limits[v.name] = c.registrationRateLimit
            case .playIntegrity(let c): limits[v.name] = c.registrationRateLimit
            default: break
            }
        }
        registrationLimits = limits
        rateLimiter = previous?.rateLimiter ?? RateLimiter()
        if let state, state.store.sharesRateLimits {
            if let kept = previous?.sharedRateLimits, kept.state === state {
                sharedRateLimits = kept
            } else {
                sharedRateLimits = SharedRateLimits(state: state)
            }
        } else {
            sharedRateLimits = nil
        }
        forwardAuthPath = config.forwardAuth.map { Array($0.path.utf8) }
        if let v = config.verdictToken {
            // A reload with the same settings keeps the key (a generated one too): upstreams keep verifying.
            if let old = previous?.verdict, old.config == v {
                verdict = old
            } else {
                verdict = try VerdictSigner(config: v)
            }
        } else {
            verdict = nil
        }
        verdictJWKSPath = config.verdictToken?.jwksPath.map { Array($0.utf8) }
        // A client's copy of the verdict field never reaches an upstream (X-Attest-* fields are dropped anyway).
        if let v = verdict, !v.headerLower.starts(with: Array("x-attest-".utf8)) {
            verdictStrip = [v.headerLower]
        } else {
            verdictStrip = []
        }
        if let previous {
            heldBodies = previous.heldBodies
            heldBodies.setLimit(config.limits.maxHeldBodyBytes)
        } else {
            heldBodies = HeldBodyBudget(limit: config.limits.maxHeldBodyBytes)
        }
        // The same options check-config judged the match paths with, so routing and the check never disagree.
        pathOptions = config.paths.canonicalizerOptions
        queryTokens = config.verifiers.compactMap { v -> QueryTokenSource? in
            guard case .appCheck(let c) = v.kind, let parameter = c.tokenQueryParameter else { return nil }
            return QueryTokenSource(parameter: Array(parameter.utf8), header: Array(c.header.utf8))
        }
        forwardAuthSource = config.forwardAuth?.source ?? .auto
        routesMatchHost = config.routes.contains { $0.match.host != nil }
        var targets: [UpstreamTarget] = []
        for u in config.upstreams {
            var tlsContext: TLSContext? = nil
            if u.tls {
                do { tlsContext = try TLSContext.client(caFile: u.caFile, alpn: u.protocolVersion == .h2 ? ["h2"] : ["http/1.1"]) } catch {
                    throw StartupError(description: "upstreams.\(u.name): \(error.description)")
                }
            }
            var addresses: [SocketAddress] = []
            for (i, e) in u.endpoints.enumerated() {
                do { addresses.append(try SocketAddress.resolve(host: e.host, port: e.port)) } catch {
                    let key = u.endpoints.count > 1 ? "endpoints[\(i)]" : "url"
                    throw StartupError(description: "upstreams.\(u.name).\(key): \(error)")
                }
            }
            // A cluster where there is something to choose or watch: several endpoints, a hostname, a health check.
            // A single address without a check keeps the plain path (no lock per connection).
            var cluster: UpstreamCluster? = nil
            if u.endpoints.count > 1 || u.cluster.healthCheck != nil || !UpstreamCluster.isAddressLiteral(u.host) {
                if let old = previous?.upstreams.first(where: { $0.name == u.name })?.cluster,
                   previous?.config.upstream(named: u.name) == u {
                    cluster = old   // a reload that leaves the upstream as it was keeps what is known of it
                } else {
                    let c = UpstreamCluster(upstream: u, addresses: addresses)
                    c.startBackgroundWork()
                    cluster = c
                }
            }
            targets.append(UpstreamTarget(
                name: u.name, metricID: MetricNames.shared.id(u.name), address: addresses[0], basePath: Array(u.basePath.utf8),
                connectTimeoutMillis: UInt64(u.connectTimeoutMillis), responseTimeoutMillis: UInt64(u.responseTimeoutMillis),
                maxIdleConnections: u.maxIdleConnections, tls: tlsContext, serverName: u.host,
                http2: u.protocolVersion.isHTTP2, cluster: cluster))
        }
        upstreams = targets
        var addresses: [SocketAddress] = []
        var tls: [TLSContext?] = []
        for l in config.listeners {
            if let t = l.tls {
                let alpn = l.http2 ? ["h2", "http/1.1"] : ["http/1.1"]
                do { tls.append(try TLSContext.server(certificateChainFile: t.certificate, privateKeyFile: t.privateKey, alpn: alpn)) } catch {
                    throw StartupError(description: "listeners.\(l.name).tls: \(error.description)")
                }
            } else {
                tls.append(nil)
            }
            do { addresses.append(try SocketAddress.resolve(host: l.address.host, port: l.address.port)) } catch {
                throw StartupError(description: "listeners.\(l.name).address: \(error)")
            }
        }
        listenAddresses = addresses
        listenerTLS = tls
        listenerHTTP2 = config.listeners.map(\.http2)
        listenerTrustedProxies = config.listeners.map(\.trustedProxies)
        var h2 = H2Settings()
        h2.maxHeaderListSize = config.limits.maxHeaderBytes
        h2.maxConcurrentStreams = UInt32(config.limits.http2MaxConcurrentStreams)
        h2Settings = h2
        requestLimits = HTTP1Limits(maxHeaderBytes: config.limits.maxHeaderBytes, maxHeaders: config.limits.maxHeaders)
        responseLimits = HTTP1Limits(maxHeaderBytes: max(64 * 1024, config.limits.maxHeaderBytes), maxHeaders: max(200, config.limits.maxHeaders))
        headerTimeoutMillis = UInt64(config.limits.headerTimeoutMillis)
        idleTimeoutMillis = UInt64(config.limits.idleTimeoutMillis)
    }
}

extension ProxyRuntime {
    /// Starts (or, `false`, stops) the fraud-metric refreshers.
    public func fraudMetricRefreshers(running: Bool) {
        for r in fraudMetrics.values { if running { r.start() } else { r.stop() } }
    }
}

/// The running configuration, swapped whole on reload; read by the admin listener.
public final class RuntimeSlot: Sendable {
    private let runtime: AnnotatedMutex<ProxyRuntime>
    public init(_ runtime: ProxyRuntime) { self.runtime = AnnotatedMutex(runtime) }
    public func get() -> ProxyRuntime { runtime.withLock { $0 } }
    public func set(_ next: ProxyRuntime) { runtime.withLock { $0 = next } }
}
