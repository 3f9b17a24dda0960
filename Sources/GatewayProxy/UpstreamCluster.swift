import GatewayConfig
import GatewayCore
import GatewayPosix
import OutboundHTTP
import Observability
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The endpoints of an upstream with several (`endpoints`) or a hostname to follow (`dns_refresh`) or an active
/// `health_check`: which one a new connection goes to, and what is known about each. Shared by every loop (one
/// mutex; a loop takes it once per new upstream connection or stream, and once per response to report the outcome),
/// watched by one background thread (DNS refresh, health checks) while the runtime that owns it lives.
///
/// An endpoint is *usable* when it is healthy (active checks; healthy until they say otherwise) and not ejected
/// (passive: `outlier.consecutive_failures` connect failures or 5xx answers in a row eject it for
/// `outlier.ejection`). When no endpoint is usable, the least recently failed one is tried anyway (fail open on
/// our own bookkeeping, never on a verdict: the request was verified already; the upstream decides).
public final class UpstreamCluster: @unchecked Sendable {
    struct Endpoint {
        let config: UpstreamEndpointConfig
        /// `host:port` as configured: the metrics label.
        let label: String
        var address: SocketAddress
        var healthy = true
        var healthRun = 0            // consecutive check results in the current direction
        var ejectedUntil: UInt64 = 0 // monotonic ms
        var failures = 0
        var ejections: UInt64 = 0
        var requests: UInt64 = 0
        var active = 0
    }

    let name: String
    let config: ClusterConfig
    let tls: Bool
    let caFile: String?
    private let state: AnnotatedMutex<(endpoints: [Endpoint], next: Int)>
    /// Some endpoint is a hostname (re-resolved every `dns_refresh`).
    let followsDNS: Bool
    private let stopped = Atomic<Bool>(false)

    init(upstream u: UpstreamConfig, addresses: [SocketAddress]) {
        name = u.name
        config = u.cluster
        tls = u.tls
        caFile = u.caFile
        var endpoints: [Endpoint] = []
        for (e, a) in zip(u.endpoints, addresses) {
            let label = e.host.contains(":") ? "[\(e.host)]:\(e.port)" : "\(e.host):\(e.port)"
            endpoints.append(Endpoint(config: e, label: label, address: a))
        }
        state = AnnotatedMutex((endpoints, 0))
        followsDNS = u.endpoints.contains { !Self.isAddressLiteral($0.host) }
    }

    deinit { stopped.store(true, ordering: .relaxed) }

    static func isAddressLiteral(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    var count: Int { state.withLock { $0.endpoints.count } }

    /// The endpoint for a new connection or stream, not one of `excluding` (a retry), counted as active until
    /// `done`. Nil only when every endpoint is excluded.
    func pick(now: UInt64, excluding: Int = -1) -> (index: Int, address: SocketAddress)? {
        state.withLock { s -> (Int, SocketAddress)? in
            let n = s.endpoints.count
            var best = -1
            var fallback = -1
            for k in 0..<n {
                let i = (s.next + k) % n
                if i == excluding { continue }
                let e = s.endpoints[i]
                let usable = e.healthy && e.ejectedUntil <= now
                if !usable {
                    if fallback < 0 || e.ejectedUntil < s.endpoints[fallback].ejectedUntil { fallback = i }
                    continue
                }
                if best < 0 { best = i; if config.balance == .roundRobin { break } }
                if config.balance == .leastRequest && e.active < s.endpoints[best].active { best = i }
            }
            if best < 0 { best = fallback }
            if best < 0 && excluding >= 0 && excluding < n { best = excluding }   // the only one there is
            guard best >= 0 else { return nil }
            s.next = (best + 1) % n
            s.endpoints[best].requests &+= 1
            s.endpoints[best].active += 1
            return (best, s.endpoints[best].address)
        }
    }

    /// The exchange on `index` is over: `failed` (a connect failure, a 5xx) counts toward ejection, a success
    /// resets the count.
    /// An exchange counted by `pick` went elsewhere: neither a success nor a failure.
    func abandon(_ index: Int) {
        state.withLock { s in
            guard index >= 0 && index < s.endpoints.count else { return }
            s.endpoints[index].active = max(0, s.endpoints[index].active - 1)
        }
    }

    func done(_ index: Int, failed: Bool, now: UInt64) {
        state.withLock { s in
            guard index >= 0 && index < s.endpoints.count else { return }
            s.endpoints[index].active = max(0, s.endpoints[index].active - 1)
            guard failed else {
                s.endpoints[index].failures = 0
                return
            }
            s.endpoints[index].failures += 1
            if config.outlierFailures > 0 && s.endpoints[index].failures >= config.outlierFailures
                && s.endpoints[index].ejectedUntil <= now {
                s.endpoints[index].ejectedUntil = now + UInt64(config.ejectionMillis)
                s.endpoints[index].failures = 0
                s.endpoints[index].ejections &+= 1
                Logger.warn("upstream endpoint ejected", ["upstream": name, "endpoint": s.endpoints[index].label],
                            numbers: ["for_ms": Int64(config.ejectionMillis)])
            }
        }
    }

    /// For `/metrics`: (endpoint, usable, ejections, requests).
    func snapshot(now: UInt64) -> [(String, Bool, UInt64, UInt64)] {
        state.withLock { s in s.endpoints.map { ($0.label, $0.healthy && $0.ejectedUntil <= now, $0.ejections, $0.requests) } }
    }

    // MARK: background work

    /// Starts the thread that re-resolves hostnames and runs health checks (when there is either).
    func startBackgroundWork() {
        guard followsDNS || config.healthCheck != nil else { return }
        let weakSelf = WeakCluster(self)
        _ = Threads.start {
            let client = CurlHTTPClient(caFile: weakSelf.cluster?.caFile)
            var nextDNS: UInt64 = 0
            var nextCheck: UInt64 = 0
            while let c = weakSelf.cluster, !c.stopped.load(ordering: .relaxed) {
                let now = MonotonicClock.nowMillis()
                if c.followsDNS && now >= nextDNS {
                    c.refreshDNS()
                    nextDNS = now + UInt64(max(100, c.config.dnsRefreshMillis))
                }
                if let hc = c.config.healthCheck, now >= nextCheck {
                    c.check(hc, client: client)
                    nextCheck = MonotonicClock.nowMillis() + UInt64(max(100, hc.intervalMillis))
                }
                // Short naps: the thread notices the runtime's end (a reload, shutdown) within 100 ms.
                usleep(100_000)
            }
        }
    }

    func stopBackgroundWork() { stopped.store(true, ordering: .relaxed) }

    private func refreshDNS() {
        let endpoints = state.withLock { $0.endpoints.map(\.config) }
        for (i, e) in endpoints.enumerated() where !Self.isAddressLiteral(e.host) {
            guard let address = try? SocketAddress.resolve(host: e.host, port: e.port) else {
                continue   // a failed lookup keeps the last address (the resolver may be down for a moment)
            }
            state.withLock { s in
                guard i < s.endpoints.count, s.endpoints[i].address.description != address.description else { return }
                Logger.info("upstream endpoint address changed", ["upstream": name, "endpoint": s.endpoints[i].label,
                                                                  "address": address.description])
                s.endpoints[i].address = address
            }
        }
    }

    private func check(_ hc: HealthCheckConfig, client: CurlHTTPClient) {
        let targets = state.withLock { $0.endpoints.map { ($0.address, $0.label) } }
        for (i, (address, label)) in targets.enumerated() {
            // Plain HTTP: the address connections go to. TLS: the configured name, which the certificate is for.
            let url = tls ? "https://\(label)\(hc.path)" : "http://\(address.description)\(hc.path)"
            let ok: Bool
            if case .success(let r) = client.get(url, headers: [], timeoutMillis: hc.timeoutMillis, maxBodyBytes: 64 * 1024) {
                ok = r.status >= 200 && r.status < 300
            } else {
                ok = false
            }
            state.withLock { s in
                guard i < s.endpoints.count else { return }
                var e = s.endpoints[i]
                if ok == e.healthy {
                    e.healthRun = 0
                } else {
                    e.healthRun += 1
                    if e.healthRun >= (ok ? hc.healthyThreshold : hc.unhealthyThreshold) {
                        e.healthy = ok
                        e.healthRun = 0
                        Logger.warn(ok ? "upstream endpoint healthy" : "upstream endpoint unhealthy",
                                    ["upstream": name, "endpoint": e.label])
                    }
                }
                s.endpoints[i] = e
            }
        }
    }
}

/// The background thread's handle: it ends when the cluster does.
private final class WeakCluster: @unchecked Sendable {
    weak var cluster: UpstreamCluster?
    init(_ c: UpstreamCluster) { cluster = c }
}
