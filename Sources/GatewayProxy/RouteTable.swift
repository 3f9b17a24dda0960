public import Attestation
public import GatewayConfig
import Observability
import GatewayCore

/// One route, compiled for byte-level matching on the request path.
/// A class, not a struct: the exchange reads its route once per request, and copying a struct of this many
/// references retained and released each of them (about 600 instructions per request, by callgrind).
public final class CompiledRoute: Sendable {
    public let name: String
    /// The name's `MetricNames` id (the requests counter's route label).
    public let metricID: Int
    /// The route name as a JSON value for the access log (`"payments"`).
    public let jsonName: [UInt8]
    public let exactPath: [UInt8]?
    public let pathPrefix: [UInt8]?
    public let methods: [[UInt8]]?
    /// Lower-case host, with a port only if the configuration gave one.
    public let host: [UInt8]?
    public let hostHasPort: Bool
    public let upstreamIndex: Int
    public let verifiers: [String]
    public let maxBodyBytes: Int
    /// `max_risk_metric`: App Attest keys whose fraud metric is higher are refused (`risk_too_high`).
    public let maxRiskMetric: Int?
    /// Set when every verifier the route names is available; nil with verifiers means the route answers 503.
    public let verification: Authenticator?
    /// Per verifier of `verification`, its name's `MetricNames` id.
    let verifierMetricIDs: [Int]
    /// `websocket: true`: RFC 6455 handshakes are verified and, after the upstream's 101, tunneled.
    public let webSocket: Bool
    /// `cors_preflight: forward`: preflights go to the upstream unverified, whatever `methods` says.
    public let forwardsPreflights: Bool
    /// `stream_idle_timeout` in milliseconds.
    public let streamIdleMillis: UInt64
    /// `rate_limit`, and the name its buckets are kept under.
    let rateLimit: RateLimitConfig?
    let rateLimitName: String

    init(name: String, metricID: Int, jsonName: [UInt8], exactPath: [UInt8]?, pathPrefix: [UInt8]?,
         methods: [[UInt8]]?, host: [UInt8]?, hostHasPort: Bool, upstreamIndex: Int, verifiers: [String],
         maxBodyBytes: Int, maxRiskMetric: Int?, verification: Authenticator?, verifierMetricIDs: [Int],
         webSocket: Bool = false, forwardsPreflights: Bool = false, streamIdleMillis: UInt64 = 300_000,
         rateLimit: RateLimitConfig? = nil) {
        self.rateLimit = rateLimit
        rateLimitName = "route:" + name
        self.name = name
        self.metricID = metricID
        self.jsonName = jsonName
        self.exactPath = exactPath
        self.pathPrefix = pathPrefix
        self.methods = methods
        self.host = host
        self.hostHasPort = hostHasPort
        self.upstreamIndex = upstreamIndex
        self.verifiers = verifiers
        self.maxBodyBytes = maxBodyBytes
        self.maxRiskMetric = maxRiskMetric
        self.verification = verification
        self.verifierMetricIDs = verifierMetricIDs
        self.webSocket = webSocket
        self.forwardsPreflights = forwardsPreflights
        self.streamIdleMillis = streamIdleMillis
    }

    /// Whether the route names verifiers (with `verification` nil, a verifier it names is missing: 503).
    public var requiresVerification: Bool { !verifiers.isEmpty }
}

/// Routes in file order; the first that matches host, method and path wins. Built once, read-only afterwards.
public struct RouteTable: Sendable {
    public let routes: [CompiledRoute]

    /// `verifier`: the built verifier of a name as a route uses it (a route naming one that is not built answers 503).
    public init(config: GatewayConfiguration,
                verifier: (_ name: String, _ route: RouteConfig) -> (any CredentialVerifier)? = { _, _ in nil }) {
        var compiled: [CompiledRoute] = []
        for route in config.routes {
            var exact: [UInt8]?
            var prefix: [UInt8]?
            switch route.match.path {
            case .exact(let p): exact = Array(p.utf8)
            case .prefix(let p): prefix = Array(p.utf8)
            }
            var verification: Authenticator? = nil
            let found = route.verify.compactMap { verifier($0, route) }
            if !route.verify.isEmpty && found.count == route.verify.count {
                verification = Authenticator(
                    verifiers: found, requireAll: route.requireAll, monitor: route.mode == .monitor,
                    stripTokenHeaders: route.stripTokenHeaders, limitedUse: route.limitedUse)
            }
            compiled.append(CompiledRoute(
                name: route.name,
                metricID: MetricNames.shared.id(route.name),
                jsonName: Array(JSONText.quoted(route.name).utf8),
                exactPath: exact,
                pathPrefix: prefix,
                methods: route.match.methods?.map { Array($0.utf8) },
                host: route.match.host.map { Array($0.lowercased().utf8) },
                hostHasPort: route.match.host.map(Self.hasPort) ?? false,
                upstreamIndex: config.upstreams.firstIndex { $0.name == route.upstream } ?? 0,
                verifiers: route.verify,
                maxBodyBytes: route.maxBodyBytes ?? config.limits.maxBodyBytes,
                maxRiskMetric: route.maxRiskMetric,
                verification: verification,
                verifierMetricIDs: (verification?.verifiers ?? []).map { MetricNames.shared.id($0.name) },
                webSocket: route.webSocket,
                forwardsPreflights: route.corsPreflight == .forward,
                streamIdleMillis: UInt64(route.streamIdleTimeoutMillis), rateLimit: route.rateLimit))
        }
        routes = compiled
    }

    /// "[::1]:8080" and "api:8080" carry a port; "::1", "[::1]" and "api" do not.
    static func hasPort(_ host: String) -> Bool {
        if host.hasPrefix("[") { return host.contains("]:") }
        return host.filter { $0 == ":" }.count == 1
    }

    /// The index of the first route matching, or nil. `host` is the Host field value (any case, may carry a port).
    /// `preflight`: the request is a CORS preflight, which a `cors_preflight: forward` route takes whatever its
    /// methods say.
    public func match(method: UnsafeRawBufferPointer, host: UnsafeRawBufferPointer?, path: UnsafeRawBufferPointer,
                      preflight: Bool = false) -> Int? {
        var i = 0
        while i < routes.count {
            let r = routes[i]
            if matches(r, method: method, host: host, path: path, preflight: preflight) { return i }
            i += 1
        }
        return nil
    }

    @inline(__always)
    private func matches(_ r: CompiledRoute, method: UnsafeRawBufferPointer, host: UnsafeRawBufferPointer?,
                         path: UnsafeRawBufferPointer, preflight: Bool) -> Bool {
        if let exact = r.exactPath {
            guard Bytes.equal(path, exact) else { return false }
        } else if let prefix = r.pathPrefix {
            guard Bytes.hasPrefix(path, prefix) else { return false }
        }
        if let methods = r.methods, !(preflight && r.forwardsPreflights) {
            var found = false
            for m in methods where Bytes.equal(method, m) { found = true; break }
            guard found else { return false }
        }
        if let wanted = r.host {
            guard let host else { return false }
            guard Bytes.hostEquals(host, wanted, wantedHasPort: r.hostHasPort) else { return false }
        }
        return true
    }
}

/// Byte comparisons for the request path (no String).
enum Bytes {
    @inline(__always) static func equal(_ a: UnsafeRawBufferPointer, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return b.withUnsafeBytes { bb in a.count == 0 || memcmp(a.baseAddress!, bb.baseAddress!, a.count) == 0 }
    }

    @inline(__always) static func hasPrefix(_ a: UnsafeRawBufferPointer, _ p: [UInt8]) -> Bool {
        guard a.count >= p.count else { return false }
        return p.withUnsafeBytes { pb in p.count == 0 || memcmp(a.baseAddress!, pb.baseAddress!, p.count) == 0 }
    }

    /// Compares a Host value (or an absolute-form authority) to a route's lower-case `match.host`: the name
    /// case-insensitively and without one trailing dot (`API.example.com.` is `api.example.com`), so no spelling of
    /// a protected host reaches a looser route. A route host without a port matches any port; one with a port only
    /// that port (compared as a number: `:08443` is `:8443`).
    static func hostEquals(_ host: UnsafeRawBufferPointer, _ wanted: [UInt8], wantedHasPort: Bool) -> Bool {
        let (name, port) = splitHost(host)
        let w = wanted.withUnsafeBytes { splitHost($0) }
        guard name.count == w.name.count else { return false }
        for k in 0..<name.count where lower(host[name.lowerBound + k]) != wanted[w.name.lowerBound + k] { return false }
        guard wantedHasPort else { return true }
        guard let wantedPort = wanted.withUnsafeBytes({ decimal($0, w.port) }) else { return false }
        return decimal(host, port) == wantedPort
    }

    /// The name (trailing dot removed) and port ranges of `host[:port]`, `[v6]:port`; an empty port range for none.
    static func splitHost(_ host: UnsafeRawBufferPointer) -> (name: Range<Int>, port: Range<Int>) {
        var end = host.count
        var port = host.count..<host.count
        // A port is the digits after the last ":", but not inside an IPv6 literal ("[::1]:8080").
        var i = host.count - 1
        while i >= 0 {
            let c = host[i]
            if c == UInt8(ascii: ":") {
                if i == 0 || host[0] != UInt8(ascii: "[") || host[i - 1] == UInt8(ascii: "]") {
                    end = i
                    port = (i + 1)..<host.count
                }
                break
            }
            if !(c >= 48 && c <= 57) { break }
            i -= 1
        }
        if end > 1 && host[end - 1] == UInt8(ascii: ".") { end -= 1 }
        return (0..<end, port)
    }

    /// The port number in `range` (nil when empty, not digits, or past 65535).
    static func decimal(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
        guard !range.isEmpty, range.count <= 10 else { return nil }
        var v = 0
        for k in range {
            let d = Int(bytes[k]) - 48
            guard d >= 0 && d <= 9 else { return nil }
            v = v * 10 + d
        }
        return v <= 65535 ? v : nil
    }

    @inline(__always) static func lower(_ c: UInt8) -> UInt8 { (c >= 65 && c <= 90) ? c | 0x20 : c }
}

#if canImport(Glibc)
import Glibc
#endif
