import GatewayCore

/// Metric label values (route, verifier, upstream names) interned to small integers once, when a configuration is
/// compiled, so the request path counts by integer keys and never hashes a string.
public final class MetricNames: Sendable {
    public static let shared = MetricNames()
    private let table = AnnotatedMutex<(ids: [String: Int], names: [String])>(([:], []))

    public func id(_ name: String) -> Int {
        table.withLock { t in
            if let id = t.ids[name] { return id }
            t.names.append(name)
            t.ids[name] = t.names.count - 1
            return t.names.count - 1
        }
    }

    public func name(_ id: Int) -> String { table.withLock { id < $0.names.count ? $0.names[id] : "?" } }
}

/// A latency histogram with fixed buckets (seconds, Prometheus' default layout extended down to 100 µs).
public struct Histogram: Sendable {
    public static let bounds: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                          0.5, 1, 2.5, 5, 10]
    /// Bucket upper bounds in microseconds (so observing needs no floating point).
    static let boundMicros: [UInt64] = bounds.map { UInt64($0 * 1_000_000) }
    public private(set) var counts = [UInt64](repeating: 0, count: Histogram.bounds.count)
    public private(set) var count: UInt64 = 0
    public private(set) var sumMicros: UInt64 = 0

    public init() {}

    @inline(__always)
    public mutating func observe(micros: UInt64) {
        count &+= 1
        sumMicros &+= micros
        var i = 0
        let bounds = Histogram.boundMicros
        while i < bounds.count && micros > bounds[i] { i += 1 }
        if i < counts.count { counts[i] &+= 1 }
    }

    public mutating func merge(_ other: Histogram) {
        count &+= other.count
        sumMicros &+= other.sumMicros
        for i in counts.indices { counts[i] &+= other.counts[i] }
    }
}

/// One event loop's request counters. Loop-confined: only its loop writes them, and a scrape copies them on that
/// loop (`EventLoop.execute`), so the request path takes no lock and no atomic.
public final class LoopMetrics {
    /// Key: route id << 16 | status.
    public private(set) var requests: [Int: UInt64] = [:]
    /// Key: verifier id << 16 | outcome << 8 | reason index (see `VerificationKey`).
    public private(set) var verifications: [Int: UInt64] = [:]
    /// Per upstream id: time from the request head written to the response head read.
    public private(set) var upstreamLatency: [Int: Histogram] = [:]
    /// Per route id: WebSocket tunnels and their bytes.
    public private(set) var tunnels: [Int: TunnelCounters] = [:]
    /// Per route id: from the request head read to the response's last byte handed to the client (verification, body
    /// holding, state work and the upstream included).
    public private(set) var requestDuration: [Int: Histogram] = [:]

    /// Verified requests per route id and app id since the rollout view last took them (`takeAppRequests`, every
    /// few seconds): at most `maxAppKeys` pairs per loop between two takes, later ones counted under
    /// `AppRequestKey.otherApps`.
    public private(set) var appRequests: [AppRequestKey: UInt64] = [:]
    public static let maxAppKeys = 256

    public init() {}

    /// A verified request on `route` from `appID` (an id the verifier accepted; never a token).
    /// One hash of the app id when the pair is known (the usual case): a small cost the rollout view adds per
    /// verified request.
    public func verifiedApp(route: Int, appID: String) {
        let key = AppRequestKey(route: route, appID: appID)
        if let i = appRequests.index(forKey: key) {
            appRequests.values[i] &+= 1
        } else {
            appRequests[appRequests.count < Self.maxAppKeys ? key : AppRequestKey(route: route, appID: AppRequestKey.otherApps), default: 0] &+= 1
        }
    }

    /// The app counts since the last take, and a fresh start (so ids seen long ago do not hold the slots).
    public func takeAppRequests() -> [AppRequestKey: UInt64] {
        defer { appRequests = [:] }
        return appRequests
    }

    @inline(__always) public func requestDone(route: Int, micros: UInt64) {
        requestDuration[route, default: Histogram()].observe(micros: micros)
    }

    public func tunnelOpened(route: Int) { tunnels[route, default: TunnelCounters()].opened &+= 1 }
    public func tunnelClosed(route: Int) { tunnels[route, default: TunnelCounters()].closed &+= 1 }
    /// Bytes a tunnel moved: `upstream` client → upstream, `downstream` upstream → client.
    public func tunnelBytes(route: Int, upstream: Int, downstream: Int) {
        var t = tunnels[route] ?? TunnelCounters()
        t.bytesUpstream &+= UInt64(upstream)
        t.bytesDownstream &+= UInt64(downstream)
        tunnels[route] = t
    }

    @inline(__always) public func request(route: Int, status: Int) {
        requests[route << 16 | (status & 0xFFFF), default: 0] &+= 1
    }

    @inline(__always) public func verification(_ key: Int) { verifications[key, default: 0] &+= 1 }

    @inline(__always) public func upstreamResponse(upstream: Int, micros: UInt64) {
        upstreamLatency[upstream, default: Histogram()].observe(micros: micros)
    }

    public func snapshot() -> LoopMetricsSnapshot {
        var s = LoopMetricsSnapshot(requests: requests, verifications: verifications, upstreamLatency: upstreamLatency)
        s.tunnels = tunnels
        s.requestDuration = requestDuration
        return s
    }
}

/// A route id and an app id, counted together.
public struct AppRequestKey: Hashable, Sendable {
    public var route: Int
    public var appID: String
    /// Where app ids past a loop's bound are counted.
    public static let otherApps = "(other)"
    public init(route: Int, appID: String) {
        self.route = route
        self.appID = appID
    }
}

/// One route's WebSocket tunnels on one loop.
public struct TunnelCounters: Sendable {
    public var opened: UInt64 = 0
    public var closed: UInt64 = 0
    public var bytesUpstream: UInt64 = 0
    public var bytesDownstream: UInt64 = 0
    public init() {}

    mutating func merge(_ o: TunnelCounters) {
        opened &+= o.opened
        closed &+= o.closed
        bytesUpstream &+= o.bytesUpstream
        bytesDownstream &+= o.bytesDownstream
    }
}

public struct LoopMetricsSnapshot: Sendable {
    public var requests: [Int: UInt64] = [:]
    public var verifications: [Int: UInt64] = [:]
    public var upstreamLatency: [Int: Histogram] = [:]
    public var tunnels: [Int: TunnelCounters] = [:]
    public var requestDuration: [Int: Histogram] = [:]

    public init(requests: [Int: UInt64] = [:], verifications: [Int: UInt64] = [:], upstreamLatency: [Int: Histogram] = [:]) {
        self.requests = requests
        self.verifications = verifications
        self.upstreamLatency = upstreamLatency
    }

    public mutating func merge(_ other: LoopMetricsSnapshot) {
        for (k, v) in other.requests { requests[k, default: 0] &+= v }
        for (k, v) in other.verifications { verifications[k, default: 0] &+= v }
        for (k, h) in other.upstreamLatency { upstreamLatency[k, default: Histogram()].merge(h) }
        for (k, t) in other.tunnels { tunnels[k, default: TunnelCounters()].merge(t) }
        for (k, h) in other.requestDuration { requestDuration[k, default: Histogram()].merge(h) }
    }
}

/// How a verification key packs: route id (23 bits) and verifier id (24 bits) — `MetricNames` ids, which only grow
/// as reloads bring new names: millions of reloads with new names each before they could alias — then outcome and
/// reason index.
public enum VerificationKey {
    public enum Outcome: Int, Sendable { case verified = 0, failed = 1, absent = 2 }

    @inline(__always) public static func make(route: Int, verifier: Int, outcome: Outcome, reason: Int) -> Int {
        (route & 0x7F_FFFF) << 40 | (verifier & 0xFF_FFFF) << 16 | outcome.rawValue << 8 | (reason & 0xFF)
    }

    public static func split(_ key: Int) -> (route: Int, verifier: Int, outcome: Outcome, reason: Int) {
        (key >> 40, (key >> 16) & 0xFF_FFFF, Outcome(rawValue: (key >> 8) & 0xFF) ?? .failed, key & 0xFF)
    }
}

/// Process-wide metrics that change off the request path: key-set refreshes, state-store operations, reloads.
/// Lock-guarded (a few per second, or one per state-store batch).
public final class ProcessMetrics: Sendable {
    public static let shared = ProcessMetrics()

    private struct State {
        var jwksRefreshes: [String: [String: UInt64]] = [:]   // verifier → result → count
        var jwksKeys: [String: Int] = [:]
        var stateOps: [String: Histogram] = [:]                // operation → latency
        var stateErrors: [String: [String: UInt64]] = [:]     // operation → kind → count
        var reloads: [String: UInt64] = [:]                    // result → count
        var h2Closed: [String: UInt64] = [:]                   // reason → count
        var configHash = ""
        var configLoadedAt: Int64 = 0
        var reloadHistory: [ReloadRecord] = []
    }

    /// One reload, for the rollout view: when, whether it applied, the file's hash after it, and why not.
    public struct ReloadRecord: Sendable {
        public let at: Int64
        public let ok: Bool
        public let hash: String
        public let error: String?
    }
    /// Reloads remembered (the newest).
    public static let reloadHistoryLimit = 20
    private let state = AnnotatedMutex(State())

    public func jwksRefresh(verifier: String, ok: Bool, keys: Int?) {
        state.withLock { s in
            s.jwksRefreshes[verifier, default: [:]][ok ? "ok" : "error", default: 0] &+= 1
            if let keys { s.jwksKeys[verifier] = keys }
        }
    }

    public func stateOperation(_ op: String, micros: UInt64, error: String?) {
        state.withLock { s in
            s.stateOps[op, default: Histogram()].observe(micros: micros)
            if let error { s.stateErrors[op, default: [:]][error, default: 0] &+= 1 }
        }
    }

    /// A reload ended: applied (`ok`, with the new file's hash set before) or refused with `error` (a configuration
    /// error: its file:line and message, secrets already redacted).
    /// `fileHash`: a refused file's hash (an applied one's is the running hash, set before).
    public func reload(ok: Bool, error: String? = nil, fileHash: String? = nil, at time: Int64? = nil) {
        let at = time ?? WallClock.unixSeconds()
        state.withLock { s in
            s.reloads[ok ? "success" : "failure", default: 0] &+= 1
            if ok { s.configLoadedAt = at }
            s.reloadHistory.append(ReloadRecord(at: at, ok: ok, hash: ok ? s.configHash : fileHash ?? "", error: error))
            if s.reloadHistory.count > Self.reloadHistoryLimit { s.reloadHistory.removeFirst(s.reloadHistory.count - Self.reloadHistoryLimit) }
        }
    }

    /// The running configuration's hash, when it was applied, and the latest reloads (oldest first).
    public var configStatus: (hash: String, loadedAt: Int64, reloads: [ReloadRecord]) {
        state.withLock { ($0.configHash, $0.configLoadedAt, $0.reloadHistory) }
    }

    /// An HTTP/2 connection the gateway ended for its client's misbehaviour (rare by nature, so a lock is fine).
    public func h2ConnectionClosed(reason: String) { state.withLock { $0.h2Closed[reason, default: 0] &+= 1 } }

    /// The reasons ``h2ConnectionClosed(reason:)`` is called with (`H2Failure.label`), rendered as 0 until they happen.
    public static let h2CloseReasons = ["ping_flood", "protocol_error", "rapid_reset", "settings_flood"]

    public func setConfigHash(_ hash: String, at time: Int64? = nil) {
        let at = time ?? WallClock.unixSeconds()
        state.withLock { s in
            if s.configLoadedAt == 0 { s.configLoadedAt = at }
            s.configHash = hash
        }
    }

    /// Appends the process-wide families in Prometheus text format.
    public func render(into out: inout PrometheusText) {
        let s = state.withLock { $0 }
        out.family("attest_gateway_jwks_refreshes_total", "counter", "Key-set fetches by verifier and result.")
        for (v, results) in s.jwksRefreshes.sorted(by: { $0.key < $1.key }) {
            for (r, n) in results.sorted(by: { $0.key < $1.key }) { out.sample("attest_gateway_jwks_refreshes_total", [("verifier", v), ("result", r)], n) }
        }
        out.family("attest_gateway_jwks_keys", "gauge", "Keys in the verifier's current key set.")
        for (v, n) in s.jwksKeys.sorted(by: { $0.key < $1.key }) { out.sample("attest_gateway_jwks_keys", [("verifier", v)], UInt64(n)) }
        out.histogram("attest_gateway_state_operation_seconds", "State-store operations (a batch of consumes counts once).",
                      label: "operation", s.stateOps)
        out.family("attest_gateway_state_errors_total", "counter", "State-store operations that failed, by kind.")
        for (op, kinds) in s.stateErrors.sorted(by: { $0.key < $1.key }) {
            for (k, n) in kinds.sorted(by: { $0.key < $1.key }) { out.sample("attest_gateway_state_errors_total", [("operation", op), ("kind", k)], n) }
        }
        out.family("attest_gateway_config_reloads_total", "counter", "Configuration reloads (SIGHUP) by result.")
        for r in ["success", "failure"] { out.sample("attest_gateway_config_reloads_total", [("result", r)], s.reloads[r] ?? 0) }
        out.family("attest_gateway_h2_connections_closed_total", "counter",
                   "HTTP/2 connections ended by the gateway: floods (PING, SETTINGS, rapid reset) and protocol errors.")
        for r in Set(Self.h2CloseReasons).union(s.h2Closed.keys).sorted() {
            out.sample("attest_gateway_h2_connections_closed_total", [("reason", r)], s.h2Closed[r] ?? 0)
        }
        out.family("attest_gateway_config_info", "gauge", "The running configuration (SHA-256 of the file, first 16 hex digits).")
        out.sample("attest_gateway_config_info", [("hash", s.configHash)], 1)
    }
}

/// Prometheus text exposition format 0.0.4.
public struct PrometheusText {
    public private(set) var text = ""

    public init() {}

    public mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)], _ value: UInt64) {
        text += name
        appendLabels(labels)
        text += " \(value)\n"
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)], seconds: Double) {
        text += name
        appendLabels(labels)
        text += " \(seconds)\n"
    }

    /// A histogram family with one label distinguishing its series.
    public mutating func histogram(_ name: String, _ help: String, label: String, _ series: [String: Histogram]) {
        family(name, "histogram", help)
        for (value, h) in series.sorted(by: { $0.key < $1.key }) {
            var cumulative: UInt64 = 0
            for (i, bound) in Histogram.bounds.enumerated() {
                cumulative &+= h.counts[i]
                sample(name + "_bucket", [(label, value), ("le", Self.format(bound))], cumulative)
            }
            sample(name + "_bucket", [(label, value), ("le", "+Inf")], h.count)
            sample(name + "_sum", [(label, value)], seconds: Double(h.sumMicros) / 1_000_000)
            sample(name + "_count", [(label, value)], h.count)
        }
    }

    static func format(_ bound: Double) -> String {
        bound == bound.rounded() ? String(Int(bound)) : String(bound)
    }

    private mutating func appendLabels(_ labels: [(String, String)]) {
        guard !labels.isEmpty else { return }
        text += "{"
        for (i, (k, v)) in labels.enumerated() {
            if i > 0 { text += "," }
            text += k + "=\""
            for c in v.unicodeScalars {
                switch c {
                case "\\": text += "\\\\"
                case "\"": text += "\\\""
                case "\n": text += "\\n"
                default: text.unicodeScalars.append(c)
                }
            }
            text += "\""
        }
        text += "}"
    }
}
