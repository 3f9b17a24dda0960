import Attestation
import Dispatch
import GatewayCore
public import JOSE
public import KeySetCache
import Observability
import GatewayPosix

/// `GET /metrics` on the admin listener: every loop's counters (copied on their loops), the connection gauge and
/// the process-wide families, in Prometheus text format. Labels are configuration names and reason codes only —
/// never a token, key or request detail.
public enum MetricsEndpoint {
    public static func render(workers: [ProxyWorker], budget: ConnectionBudget, upstreams: [UpstreamTarget] = [],
                              keySets: [String: KeySetCache<JWKS>] = [:]) -> String {
        var total = LoopMetricsSnapshot()
        for w in workers { if let s = snapshot(w) { total.merge(s) } }
        let names = MetricNames.shared
        var out = PrometheusText()

        out.family("attest_gateway_requests_total", "counter", "Requests answered, by route (\"-\": none matched; \"registration\", \"forward_auth\": those endpoints) and status.")
        for (key, n) in total.requests.sorted(by: { $0.key < $1.key }) {
            out.sample("attest_gateway_requests_total", [("route", names.name(key >> 16)), ("status", String(key & 0xFFFF))], n)
        }

        out.family("attest_gateway_verifications_total", "counter",
                   "Verification outcomes by the deciding verifier (\"-\": no token for any), result, reason and route.")
        var replays: [String: UInt64] = [:]
        let reasons = VerificationStatus.allCases
        for (key, n) in total.verifications.sorted(by: { $0.key < $1.key }) {
            let (route, verifier, outcome, reasonIndex) = VerificationKey.split(key)
            let reason = reasonIndex < reasons.count ? reasons[reasonIndex] : nil
            let result = switch outcome {
            case .verified: "verified"
            case .failed: "failed"
            case .absent: "absent"
            }
            let name = names.name(verifier)
            // A verified or absent result has no reason: no `reason=""` label either.
            out.sample("attest_gateway_verifications_total",
                       [("verifier", name), ("result", result)] + (reason.map { [("reason", $0.code)] } ?? [])
                        + [("route", names.name(route))], n)
            if reason == .tokenReplayed || reason == .counterNotIncreasing || reason == .challengeUnknown {
                replays[name, default: 0] &+= n
            }
        }
        out.family("attest_gateway_replays_rejected_total", "counter",
                   "Requests refused as replays (token_replayed, counter_not_increasing, challenge_unknown), by verifier.")
        for (name, n) in replays.sorted(by: { $0.key < $1.key }) { out.sample("attest_gateway_replays_rejected_total", [("verifier", name)], n) }

        var durations: [String: Histogram] = [:]
        for (id, h) in total.requestDuration { durations[names.name(id)] = h }
        out.histogram("attest_gateway_request_duration_seconds",
                      "From the request head read to the answer, verification and the upstream included, by route.",
                      label: "route", durations)

        var latency: [String: Histogram] = [:]
        for (id, h) in total.upstreamLatency { latency[names.name(id)] = h }
        out.histogram("attest_gateway_upstream_response_seconds", "From the request head sent to the response head read, by upstream.",
                      label: "upstream", latency)

        let tunnels = total.tunnels.map { (names.name($0.key), $0.value) }.sorted { $0.0 < $1.0 }
        out.family("attest_gateway_websocket_tunnels_total", "counter", "WebSocket tunnels opened (upstream answered 101), by route.")
        for (route, t) in tunnels { out.sample("attest_gateway_websocket_tunnels_total", [("route", route)], t.opened) }
        out.family("attest_gateway_websocket_tunnels_active", "gauge", "WebSocket tunnels open now, by route.")
        for (route, t) in tunnels {
            out.sample("attest_gateway_websocket_tunnels_active", [("route", route)], t.opened &- min(t.opened, t.closed))
        }
        out.family("attest_gateway_websocket_bytes_total", "counter",
                   "Bytes tunneled after the handshake, by route and direction (upstream: from the client; downstream: to it).")
        for (route, t) in tunnels {
            out.sample("attest_gateway_websocket_bytes_total", [("route", route), ("direction", "upstream")], t.bytesUpstream)
            out.sample("attest_gateway_websocket_bytes_total", [("route", route), ("direction", "downstream")], t.bytesDownstream)
        }

        let clusters = upstreams.compactMap { t in t.cluster.map { (t.name, $0) } }
        if !clusters.isEmpty {
            let now = MonotonicClock.nowMillis()
            let rows = clusters.map { ($0.0, $0.1.snapshot(now: now)) }
            out.family("attest_gateway_upstream_endpoint_healthy", "gauge",
                       "1 when an upstream endpoint takes new requests (health check passing, not ejected), by upstream and endpoint.")
            for (u, eps) in rows { for e in eps { out.sample("attest_gateway_upstream_endpoint_healthy", [("upstream", u), ("endpoint", e.0)], e.1 ? 1 : 0) } }
            out.family("attest_gateway_upstream_endpoint_ejections_total", "counter",
                       "Passive outlier ejections (consecutive connect failures or 5xx), by upstream and endpoint.")
            for (u, eps) in rows { for e in eps { out.sample("attest_gateway_upstream_endpoint_ejections_total", [("upstream", u), ("endpoint", e.0)], e.2) } }
            out.family("attest_gateway_upstream_endpoint_requests_total", "counter",
                       "Requests sent to an upstream endpoint (retries on another endpoint count there too), by upstream and endpoint.")
            for (u, eps) in rows { for e in eps { out.sample("attest_gateway_upstream_endpoint_requests_total", [("upstream", u), ("endpoint", e.0)], e.3) } }
        }

        if !keySets.isEmpty {
            let now = WallClock.unixSeconds()
            let schedules = keySets.sorted { $0.key < $1.key }.map { ($0.key, $0.value.schedule) }
            out.family("attest_gateway_jwks_age_seconds", "gauge", "Seconds since the verifier's key set was last fetched.")
            for (v, s) in schedules { if let at = s.loadedAt { out.sample("attest_gateway_jwks_age_seconds", [("verifier", v)], UInt64(max(0, now - at))) } }
            out.family("attest_gateway_jwks_expiry_seconds", "gauge",
                       "Seconds until the verifier's key set expires (0 once it has: it serves stale, then not at all).")
            for (v, s) in schedules { if let at = s.expiresAt { out.sample("attest_gateway_jwks_expiry_seconds", [("verifier", v)], UInt64(max(0, at - now))) } }
            out.family("attest_gateway_jwks_consecutive_failures", "gauge", "Key-set fetches that failed in a row, by verifier.")
            for (v, s) in schedules { out.sample("attest_gateway_jwks_consecutive_failures", [("verifier", v)], UInt64(s.consecutiveFailures)) }
        }

        out.family("attest_gateway_active_connections", "gauge", "Open client connections.")
        out.sample("attest_gateway_active_connections", [], UInt64(max(0, budget.current)))
        ProcessMetrics.shared.render(into: &out)
        ProcessStats.render(into: &out)
        return out.text
    }

    /// A copy of one loop's counters, taken on that loop; nil if it does not answer within a second (stopping).
    static func snapshot(_ worker: ProxyWorker) -> LoopMetricsSnapshot? {
        onLoop(worker) { worker.metrics.snapshot() }
    }

    /// Runs `body` on `worker`'s loop and returns its result; nil if the loop does not answer within a second.
    static func onLoop<T: Sendable>(_ worker: ProxyWorker, _ body: @escaping @Sendable () -> T) -> T? {
        let done = DispatchSemaphore(value: 0)
        let box = AnnotatedMutex<T?>(nil)
        worker.loop.execute {
            let value = body()
            box.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + 1) == .success else { return nil }
        return box.withLock { $0 }
    }
}
