public import GatewayCore
/// The typed, validated form of `gateway.yml` (contract: docs/configuration.md). Built once by
/// `ConfigLoader`; every value here has passed validation, and defaults are filled in.
public struct GatewayConfiguration: Sendable, Equatable {
    public var version: Int
    public var listeners: [ListenerConfig]
    public var admin: AdminConfig?
    public var limits: LimitsConfig
    public var state: StateConfig
    /// Upstreams in file order; names are unique.
    public var upstreams: [UpstreamConfig]
    /// Verifiers in file order; names are unique.
    public var verifiers: [VerifierConfig]
    /// Routes in file order (first match wins).
    public var routes: [RouteConfig]
    /// Extension: the forward-auth endpoint (nginx `auth_request`, Traefik `forwardAuth`, Envoy `ext_authz`).
    public var forwardAuth: ForwardAuthConfig? = nil
    /// `verdict_token`: an ES256 JWT of each verified request's verdict for the upstream.
    public var verdictToken: VerdictTokenConfig? = nil
    /// `paths:` — how request targets are made canonical before routing (CONFIG.md Additions).
    public var paths = PathsConfig()

    public init(version: Int, listeners: [ListenerConfig], admin: AdminConfig?, limits: LimitsConfig,
                state: StateConfig, upstreams: [UpstreamConfig], verifiers: [VerifierConfig], routes: [RouteConfig]) {
        self.version = version
        self.listeners = listeners
        self.admin = admin
        self.limits = limits
        self.state = state
        self.upstreams = upstreams
        self.verifiers = verifiers
        self.routes = routes
    }

    public func upstream(named name: String) -> UpstreamConfig? { upstreams.first { $0.name == name } }
    public func verifier(named name: String) -> VerifierConfig? { verifiers.first { $0.name == name } }
}

/// A `host:port` socket address as written in the file (`127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:80`).
public struct SocketAddressConfig: Sendable, Equatable, CustomStringConvertible {
    /// The host without brackets (`::1`, `127.0.0.1`, `localhost`).
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) { self.host = host; self.port = port }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

public struct TLSConfig: Sendable, Equatable {
    public var certificate: String
    public var privateKey: String
    public init(certificate: String, privateKey: String) { self.certificate = certificate; self.privateKey = privateKey }
}

public struct ListenerConfig: Sendable, Equatable {
    public var name: String
    public var address: SocketAddressConfig
    public var http2: Bool
    public var tls: TLSConfig?
    /// `trusted_proxies`: peers whose forwarding headers are kept and appended to (empty: none, the default).
    public var trustedProxies: [CIDRBlock] = []
    public init(name: String, address: SocketAddressConfig, http2: Bool = false, tls: TLSConfig? = nil) {
        self.name = name; self.address = address; self.http2 = http2; self.tls = tls
    }
}

public struct AdminConfig: Sendable, Equatable {
    public var address: SocketAddressConfig
    public init(address: SocketAddressConfig) { self.address = address }
}

/// Durations are held as milliseconds; sizes as bytes.
public struct LimitsConfig: Sendable, Equatable {
    public var maxHeaderBytes: Int = 32 * 1024
    public var maxHeaders: Int = 100
    public var maxBodyBytes: Int = 10 * 1024 * 1024
    public var headerTimeoutMillis: Int = 10_000
    public var idleTimeoutMillis: Int = 60_000
    public var maxConnections: Int = 10_000
    /// Extension: how long SIGTERM/SIGINT waits for in-flight requests before exiting (default 30s).
    public var drainTimeoutMillis: Int = 30_000
    /// Extension: SETTINGS_MAX_CONCURRENT_STREAMS of HTTP/2 connections (default 100, like Envoy's and nginx's order).
    public var http2MaxConcurrentStreams: Int = 100
    /// Process-wide bytes held in memory for body-bound verification (App Attest, registration bodies); a request
    /// that would exceed it gets 503 `overloaded`.
    public var maxHeldBodyBytes: Int = 64 * 1024 * 1024
    public init() {}
}

public enum StateBackendKind: String, Sendable, Equatable { case memory, sqlite, redis }
public enum UnavailablePolicy: String, Sendable, Equatable { case reject, allow }

public struct StateConfig: Sendable, Equatable {
    public var backend: StateBackendKind = .sqlite
    public var path: String = "data/state.db"
    public var url: String? = nil
    public var keyPrefix: String = "attest-gateway:"
    public var timeoutMillis: Int = 250
    public var onUnavailable: UnavailablePolicy = .reject
    /// `username`: the Redis ACL user (instead of, or overriding, the URL's).
    public var username: String?
    /// `password_file`: the Redis password, read at start-up (one trailing newline stripped), instead of the URL's.
    public var passwordFile: String?
    /// `wait_replicas`: after each write, `WAIT` for this many Redis replicas within `timeout` (0: do not wait).
    public var waitReplicas: Int = 0
    /// `rediss://` (TLS): `ca_file` (the trust anchor; default the system store), `client_certificate` and
    /// `client_key` (PEM, together), `tls_server_name` (the name the certificate must carry; default the URL's
    /// host) and `tls_verify` (false: any certificate, an opt-out logged at start).
    public var caFile: String?
    public var clientCertificate: String?
    public var clientKey: String?
    public var tlsServerName: String?
    public var tlsVerify: Bool = true
    /// `sentinel`: the master is found through these sentinels (instead of `url`).
    public var sentinel: SentinelConfig?
    /// `cluster`: a Redis Cluster, its slot map read from these seed nodes (instead of `url`).
    public var cluster: RedisClusterConfig?
    /// `tls`: with `sentinel`, TLS to the sentinels and the master; with `cluster`, to every node (with `url`, the
    /// scheme says it).
    public var tls: Bool = false
    /// `database`: with `sentinel`, the master's database (with `url`, its path says it).
    public var database: Int = 0
    /// Whether the connection is TLS: a `rediss://` url, or `tls: true` with sentinels.
    public var usesTLS: Bool { sentinel != nil || cluster != nil ? tls : url?.prefix(9).lowercased() == "rediss://" }
    public init() {}
}

/// `state.cluster`: `nodes` (`host:port` each), the seeds the slot map is first read from.
public struct RedisClusterConfig: Sendable, Equatable {
    public var nodes: [UpstreamEndpointConfig]
    public init(nodes: [UpstreamEndpointConfig]) {
        self.nodes = nodes
    }
}

/// `state.sentinel`: `master` (the name the sentinels monitor), `nodes` (`host:port` each), and the sentinels' own
/// `username` and `password_file` (apart from the master's).
public struct SentinelConfig: Sendable, Equatable {
    public var master: String
    public var nodes: [UpstreamEndpointConfig]
    public var username: String?
    public var passwordFile: String?
    public init(master: String, nodes: [UpstreamEndpointConfig]) {
        self.master = master
        self.nodes = nodes
    }
}

public struct UpstreamConfig: Sendable, Equatable {
    public var name: String
    /// Host from the URL (no brackets), port (default 80), and base path ("" when none; never ends in "/").
    public var host: String
    public var port: UInt16
    public var basePath: String
    public var connectTimeoutMillis: Int = 2_000
    public var responseTimeoutMillis: Int = 30_000
    public var maxIdleConnections: Int = 64
    /// True for an `https://` URL (port default 443): TLS to the upstream, the certificate verified for `host`.
    public var tls: Bool = false
    /// Extension: the trust anchor for an `https://` upstream's certificate (default: the system store).
    public var caFile: String?
    /// The cluster: `endpoints` (one, `url`'s, when absent) and how they are chosen and watched.
    public var endpoints: [UpstreamEndpointConfig] = []
    public var cluster = ClusterConfig()
    /// `protocol`: HTTP/1.1 (default), h2c (HTTP/2 with prior knowledge, `http://`) or h2 (ALPN, `https://`).
    public var protocolVersion: UpstreamProtocol = .http1
    public init(name: String, host: String, port: UInt16, basePath: String = "") {
        self.name = name; self.host = host; self.port = port; self.basePath = basePath
        endpoints = [UpstreamEndpointConfig(host: host, port: port)]
    }
}

public enum AppAttestEnvironment: String, Sendable, Equatable { case production, development, any }
public enum AppAttestBinding: String, Sendable, Equatable { case request, challenge }
public enum DeviceCheckEnvironment: String, Sendable, Equatable { case production, development }

public struct AppCheckVerifierConfig: Sendable, Equatable {
    public var projectNumber: String
    public var projectID: String?
    public var appIDs: [String]?
    /// Exactly one of jwksURL / jwksFile is set (jwksURL defaults to Google's).
    public var jwksURL: String?
    public var jwksFile: String?
    public var jwksMaxAgeMillis: Int = 6 * 3_600_000
    public var clockSkewMillis: Int = 60_000
    public var header: String = "X-Firebase-AppCheck"
    /// Extension: verified tokens remembered per event loop (by SHA-256) so a repeated token skips the RSA check;
    /// 0 turns the cache off.
    public var verifiedTokenCacheSize: Int = 10_000
    /// `token_query_parameter`: on WebSocket handshakes only (browsers cannot set headers there), the token may come
    /// from this query parameter instead of `header`; it is removed from the target before routing and forwarding.
    public var tokenQueryParameter: String?
    public init(projectNumber: String) { self.projectNumber = projectNumber }
}

public struct AppAttestExtensionsPolicy: Sendable, Equatable {
    public var allowedValidationCategories: [Int]?
    public var minBundleVersion: String?
    public init() {}
}

public struct FraudMetricConfig: Sendable, Equatable {
    public var keyID: String
    public var privateKey: String
    public var baseURL: String?
    public var caFile: String?
    public var refreshIntervalMillis: Int = 24 * 3_600_000
    public var timeoutMillis: Int = 10_000
    public init(keyID: String, privateKey: String) { self.keyID = keyID; self.privateKey = privateKey }
}

public struct AppAttestVerifierConfig: Sendable, Equatable {
    public var teamID: String
    public var bundleIDs: [String]
    public var environment: AppAttestEnvironment = .production
    /// "builtin" or a PEM path.
    public var rootCA: String = "builtin"
    public var binding: AppAttestBinding = .request
    public var maxSkewMillis: Int = 300_000
    public var challengeTTLMillis: Int = 300_000
    public var registrationPath: String = "/.attest/ios"
    public var extensions: AppAttestExtensionsPolicy?
    public var receiptRootCA: String = "builtin"
    public var fraudMetric: FraudMetricConfig?
    /// `registration_rate_limit` (nil: `rate: 0`, off).
    public var registrationRateLimit: RateLimitConfig? = .registrationDefault
    public init(teamID: String, bundleIDs: [String]) { self.teamID = teamID; self.bundleIDs = bundleIDs }
}

public struct SubjectBindingConfig: Sendable, Equatable {
    public var header: String
    public init(header: String) { self.header = header }
}

public struct DeviceCheckVerifierConfig: Sendable, Equatable {
    public var teamID: String
    public var keyID: String
    public var privateKey: String
    public var environment: DeviceCheckEnvironment = .production
    public var baseURL: String?
    public var caFile: String?
    public var timeoutMillis: Int = 3_000
    public var header: String = "X-Apple-DeviceCheck"
    public var subjectBinding: SubjectBindingConfig?
    /// `limited_use` routes: how long a consumed device token's hash is kept (default 24h).
    public var replayWindowMillis: Int = 24 * 3_600_000
    public init(teamID: String, keyID: String, privateKey: String) {
        self.teamID = teamID; self.keyID = keyID; self.privateKey = privateKey
    }
}

/// What a rate limit counts by (CONFIG.md Additions `rate_limit.key`).
public enum RateLimitKey: String, Sendable, Equatable {
    /// The first untrusted hop: the peer, or for a trusted proxy the address it reports.
    case clientAddress = "client_address"
    /// The verified credential's app id (requests without one are not limited by it).
    case appID = "app_id"
    /// The App Attest key id of the verified assertion.
    case keyID = "key_id"
}

/// A token bucket: `ratePerSecond` tokens added per second up to `burst`; one taken per request.
public struct RateLimitConfig: Sendable, Equatable {
    public var key: RateLimitKey = .clientAddress
    public var ratePerSecond: Double
    public var burst: Int
    public init(key: RateLimitKey = .clientAddress, ratePerSecond: Double, burst: Int) {
        self.key = key
        self.ratePerSecond = ratePerSecond
        self.burst = burst
    }

    /// `registration_rate_limit`'s default: 10/s, burst 20, per client address.
    public static let registrationDefault = RateLimitConfig(ratePerSecond: 10, burst: 20)
}

/// `binding` of a `play_integrity` verifier.
public enum PlayIntegrityBindingConfig: String, Sendable, Equatable { case request, nonce }

/// The `play_integrity` verifier type (CONFIG.md Additions): Google Play Integrity tokens, standard ones decoded by
/// Google with a service account, classic ones with developer-managed keys decoded locally.
public struct PlayIntegrityVerifierConfig: Sendable, Equatable {
    public var packageName: String
    /// Allowed signing-certificate digests as base64url without padding (the verdict's form; hex is converted).
    public var certificateSHA256: [String]
    public var header: String = "X-Play-Integrity"
    public var binding: PlayIntegrityBindingConfig = .request
    public var serviceAccountFile: String?
    public var decryptionKeyFile: String?
    public var verificationKeyFile: String?
    public var appRecognition: [String] = ["PLAY_RECOGNIZED"]
    public var minDeviceIntegrity: String = "MEETS_DEVICE_INTEGRITY"
    public var requireLicensed: Bool = false
    public var playProtect: [String]?
    /// `LEVEL_1` … `LEVEL_4` as 1 … 4.
    public var maxDeviceActivity: Int?
    public var maxSkewMillis: Int = 300_000
    public var replayWindowMillis: Int = 24 * 3_600_000
    public var registrationPath: String?
    public var apiBaseURL: String = "https://playintegrity.googleapis.com"
    /// nil: the service account file's `token_uri`, else Google's.
    public var tokenURL: String?
    public var caFile: String?
    public var timeoutMillis: Int = 3_000
    /// `registration_rate_limit` (nil: `rate: 0`, off).
    public var registrationRateLimit: RateLimitConfig? = .registrationDefault
    public init(packageName: String, certificateSHA256: [String]) {
        self.packageName = packageName
        self.certificateSHA256 = certificateSHA256
    }
}

public enum VerifierKind: Sendable, Equatable {
    case appCheck(AppCheckVerifierConfig)
    case appAttest(AppAttestVerifierConfig)
    case deviceCheck(DeviceCheckVerifierConfig)
    case playIntegrity(PlayIntegrityVerifierConfig)
}

public struct VerifierConfig: Sendable, Equatable {
    public var name: String
    public var kind: VerifierKind
    public init(name: String, kind: VerifierKind) { self.name = name; self.kind = kind }
}

public enum RouteMode: String, Sendable, Equatable { case enforce, monitor }

/// `cors_preflight`: what a CORS preflight (OPTIONS with Origin and Access-Control-Request-Method, no body) gets.
/// `verdict_token` (PROTOCOL.md Additions "Verdict token").
public struct VerdictTokenConfig: Sendable, Equatable {
    /// The request field the token goes in.
    public var header = "X-Attest-Assertion"
    /// A PEM P-256 private key; nil or a missing file: a key generated at start (the JWKS then changes per restart).
    public var keyFile: String? = nil
    public var ttlMillis = 60_000
    /// Also served on the public listeners when set (always on admin `/jwks`).
    public var jwksPath: String? = nil
    public init() {}
}

/// One endpoint of an upstream: a host (name or address) and port.
public struct UpstreamEndpointConfig: Sendable, Equatable, Hashable {
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) { self.host = host; self.port = port }
}

public enum BalancePolicy: String, Sendable, Equatable {
    case roundRobin = "round_robin"
    case leastRequest = "least_request"
}

/// `health_check`: an active GET of `path` on every endpoint each `interval`.
public struct HealthCheckConfig: Sendable, Equatable {
    public var path: String
    public var intervalMillis = 5_000
    public var timeoutMillis = 1_000
    public var unhealthyThreshold = 3
    public var healthyThreshold = 2
    public init(path: String) { self.path = path }
}

/// How an upstream's endpoints are chosen and watched (CONFIG.md Additions).
public struct ClusterConfig: Sendable, Equatable {
    public var balance: BalancePolicy = .roundRobin
    /// Passive outlier ejection: this many consecutive connect failures or 5xx answers eject an endpoint for
    /// `ejectionMillis` (0: never ejected).
    public var outlierFailures = 5
    public var ejectionMillis = 30_000
    public var healthCheck: HealthCheckConfig? = nil
    /// Hostnames are resolved again this often.
    public var dnsRefreshMillis = 30_000
    public init() {}
}

/// How the gateway speaks to an upstream.
public enum UpstreamProtocol: String, Sendable, Equatable {
    case http1, h2c, h2

    public var isHTTP2: Bool { self != .http1 }
}

public enum CORSPreflightPolicy: String, Sendable, Equatable {
    /// Like any request: the route's methods and verifiers apply (the default).
    case verify
    /// Forwarded unverified to the upstream, which answers CORS itself, whatever `match.methods` says.
    case forward
}

public enum PathMatch: Sendable, Equatable {
    case exact(String)
    case prefix(String)
}

public struct RouteMatchConfig: Sendable, Equatable {
    public var path: PathMatch
    /// Upper-case method names; nil = any method.
    public var methods: [String]?
    /// Lower-cased host without a trailing dot, with a port only if the file gave one (then it must match
    /// exactly; without one any port matches); nil = any host.
    public var host: String?
    public init(path: PathMatch, methods: [String]? = nil, host: String? = nil) {
        self.path = path; self.methods = methods; self.host = host
    }
}

public struct RouteConfig: Sendable, Equatable {
    public var name: String
    public var match: RouteMatchConfig
    public var upstream: String
    public var verify: [String] = []
    public var requireAll: Bool = false
    public var limitedUse: Bool = false
    public var maxRiskMetric: Int?
    public var mode: RouteMode = .enforce
    public var stripTokenHeaders: Bool = true
    /// nil = the global limits.maxBodyBytes.
    public var maxBodyBytes: Int?
    /// `websocket`: RFC 6455 upgrades allowed (else a handshake gets 400 `upgrade_not_allowed`).
    public var webSocket: Bool = false
    public var corsPreflight: CORSPreflightPolicy = .verify
    /// `stream_idle_timeout`: the idle limit of a WebSocket tunnel (and of gRPC calls), instead of response_timeout.
    public var streamIdleTimeoutMillis: Int = 300_000
    /// `rate_limit`: a token bucket per key (client address, app id or App Attest key id).
    public var rateLimit: RateLimitConfig?
    public init(name: String, match: RouteMatchConfig, upstream: String) {
        self.name = name; self.match = match; self.upstream = upstream
    }
}

/// `forward_auth:` — an endpoint on every listener that judges a request another proxy is about to forward, by the
/// route its original method, URI and host match, and answers 200 (with the `X-Attest-*` headers) or the rejection.
public struct ForwardAuthConfig: Sendable, Equatable {
    /// Absolute path; `{path}` takes the original request from headers, `{path}/<original path>` (Envoy) from the
    /// rest of the target.
    public var path: String
    /// Where the original method, URI and host come from (`source`, default auto).
    public var source: ForwardAuthSource = .auto
    public init(path: String) { self.path = path }
}

/// `forward_auth.source`: the one proxy whose headers say what the original request was.
public enum ForwardAuthSource: String, Sendable, Equatable {
    /// The one source whose URI header the call carries (two sources' URI headers: refused).
    case auto
    /// nginx `auth_request`: `X-Original-URI`, `X-Original-Method`, `X-Original-Host`.
    case nginx
    /// Traefik `forwardAuth`: `X-Forwarded-Uri`, `X-Forwarded-Method`, `X-Forwarded-Host`, `X-Forwarded-Proto`.
    case traefik
    /// Envoy `ext_authz` (HTTP service): the original path appended to `path`, the call's method and Host.
    case envoy
}

/// `paths:` — request-target canonicalisation (CONFIG.md Additions). The defaults are the safe choice.
public struct PathsConfig: Sendable, Equatable {
    public enum Action: String, Sendable, Equatable {
        /// 400 `ambiguous_path`.
        case reject
        /// Left as sent (an escaped slash stays encoded and is never decoded).
        case keep
    }
    /// `merge_slashes`: "//a///b" → "/a/b".
    public var mergeSlashes = true
    /// `escaped_slashes`: `%2F` / `%5C` in the path.
    public var escapedSlashes = Action.reject
    /// `path_parameters`: `;` in a path segment.
    public var pathParameters = Action.reject
    public init() {}
}
