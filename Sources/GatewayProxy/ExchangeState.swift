import Attestation
import GatewayCrypto
import HTTP1
import Synchronization

/// What a `ProxyExchange` knows about the request it is serving now (reset between requests).
struct ExchangeState {
    var head: HTTP1RequestHead? = nil
    /// The canonical target when it differs from the one sent (routed on, forwarded, logged).
    var canonicalTarget: [UInt8]? = nil
    /// An absolute-form target's authority (range into `head.bytes`), which wins over Host.
    var authority: Range<Int>? = nil
    /// The configuration this request started on (a reload does not change it under the request).
    var generation: LoopGeneration? = nil
    var routeIndex = -1
    var upstream: (any UpstreamLeg)? = nil
    /// The upstream request body is re-framed as chunks.
    var requestChunked = false
    var bodyBytes = 0
    var bodyLimit = Int.max
    var logged = false
    var startMicros: UInt64 = 0
    var status = 0
    var upstreamStatus = 0
    var bytesIn = 0
    /// The sink's `bytesOut` when the response started.
    var outMark = 0
    /// The access log's verdict: none (route without verifiers), verified, failed, absent.
    var verdict: Verdict = .none
    /// Why verification did not pass (logged; also the response's reason when enforced).
    var reason: VerificationStatus? = nil
    /// The request body, read and held rather than forwarded while App Attest or a registration needs it whole.
    var heldBody: HeldBody? = nil
    /// The request's trailers, when they came while the body was held.
    var heldTrailers: ResponseTrailers? = nil
    /// How far the route's verifiers have got (they may suspend for work off the loop).
    var progress = AuthenticationProgress()
    /// The verifier waiting for the whole body, and what it does with its digest.
    var pendingBody: (verifier: Int, continuation: @Sendable ([UInt8]) -> VerifierStep)? = nil
    /// A held body that was forwarded: its budget reservation lasts as long as the exchange.
    var forwardedHeldBody: HeldBody? = nil
    /// `X-Request-Id` (the client's or generated), forwarded and logged.
    var requestID: RequestID? = nil
    /// The `MetricNames` id of the verifier whose verdict this is (-1: none ran or none decided).
    var verifierMetric = -1
    /// The deciding credential's app id (access log), when it named one.
    var appID: String? = nil
    /// The deciding verifier's name (access log), set with `verifierMetric` on routes.
    var verifierName: String? = nil
    /// When the head went to the upstream (monotonic µs), for the upstream latency histogram.
    var forwardMicros: UInt64 = 0
    /// The upstream's answer: how long its response head took (µs) and where it came from (the access log).
    var upstreamMicros: UInt64 = 0
    var upstreamAddress: String? = nil
    /// A forward-auth call: the original request it asks about (answered, never forwarded).
    var forwardAuth: ForwardAuthTarget? = nil
    /// A WebSocket handshake the route allows: forwarded with the switch, tunneled after the upstream's 101.
    var webSocket = false
    /// Fresh connections this request moved to (a stale pooled one, an endpoint that refused): bounded.
    var connectRetries = 0
    /// A gRPC call's route `stream_idle_timeout` (0: not gRPC): its client-side idle limit instead of idle_timeout.
    var streamIdleMillis: UInt64 = 0
    /// Bytes the client got past the sink (a tunnel's 101 head and frames), for the access log.
    var extraBytesOut = 0
    /// The registration endpoint this request is for.
    var registration: RegistrationEndpoints.Endpoint? = nil

    /// How long the client may be silent mid-exchange: a gRPC call's stream_idle_timeout, else idle_timeout.
    @inline(__always) func idleMillis(_ worker: ProxyWorker) -> UInt64 {
        streamIdleMillis != 0 ? streamIdleMillis : worker.idleTimeout
    }
}

/// A request body kept in memory (bounded by the route's `max_body_bytes`) with its running SHA-256. Its bytes
/// count against the process-wide `limits.max_held_body_bytes` until it is gone (not when its bytes move on to the
/// upstream's buffer: they are still in memory there until sent).
final class HeldBody {
    private(set) var bytes: [UInt8] = []
    private let hasher = SHA256Hasher()
    private let budget: HeldBodyBudget
    /// Bytes reserved in `budget` (released in deinit).
    private var reserved = 0

    init(budget: HeldBodyBudget) { self.budget = budget }

    deinit { budget.release(reserved) }

    /// Reserves room for `total` bytes at once (a declared content-length); false when the process is over budget.
    func reserve(total: Int) -> Bool {
        guard total > reserved else { return true }
        guard budget.reserve(total - reserved) else { return false }
        reserved = total
        bytes.reserveCapacity(total)
        return true
    }

    /// Appends a chunk; false (nothing appended) when it would take the process over budget.
    func append(_ chunk: UnsafeRawBufferPointer) -> Bool {
        let needed = bytes.count + chunk.count
        if needed > reserved {
            // Grow the reservation ahead of the array's own growth, so what is counted covers what is allocated.
            let want = max(needed, min(reserved * 2, needed + 1024 * 1024))
            guard budget.reserve(want - reserved) else { return false }
            reserved = want
        }
        bytes.append(contentsOf: chunk)
        hasher.update(chunk)
        return true
    }

    /// SHA-256 of everything appended (call once, when the body is complete).
    func finishDigest() -> [UInt8] { hasher.finish() }

    /// The bytes were copied on (to the upstream's buffer): free them, keep the reservation while that copy lives.
    func dropBytes() { bytes = [] }
}

/// The process-wide bound on bytes held for body-bound verification (`limits.max_held_body_bytes`), shared by every
/// loop and kept across reloads. Past it a request gets 503 `overloaded` instead of the process running out of memory.
final class HeldBodyBudget: Sendable {
    private let used = Atomic<Int>(0)
    private let limit: Atomic<Int>

    init(limit: Int) { self.limit = Atomic(limit) }

    func setLimit(_ bytes: Int) { limit.store(bytes, ordering: .relaxed) }

    var bytesHeld: Int { used.load(ordering: .relaxed) }

    func reserve(_ n: Int) -> Bool {
        let after = used.add(n, ordering: .relaxed).newValue
        if after > limit.load(ordering: .relaxed) {
            used.subtract(n, ordering: .relaxed)
            return false
        }
        return true
    }

    func release(_ n: Int) {
        if n > 0 { used.subtract(n, ordering: .relaxed) }
    }
}

/// What the access log and the verification metrics say about a request.
enum Verdict {
    case none, verified, failed, absent

    var text: StaticString {
        switch self {
        case .none: "none"
        case .verified: "verified"
        case .failed: "failed"
        case .absent: "absent"
        }
    }
}
