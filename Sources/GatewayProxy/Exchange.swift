import Attestation
import GatewayCrypto
import HTTP1

/// The state of the request a client connection is serving now (one at a time; pipelined ones wait).
struct Exchange {
    var head: HTTP1RequestHead? = nil
    /// The configuration this request started on (a reload does not change it under the request).
    var generation: LoopGeneration? = nil
    var routeIndex = -1
    var upstream: UpstreamConnection? = nil
    /// The upstream request body is re-framed as chunks.
    var requestChunked = false
    /// The whole request body has been read from the client.
    var requestDone = false
    var bodyBytes = 0
    var bodyLimit = Int.max
    var responseStarted = false
    /// The response body is re-framed as chunks for the client.
    var chunkToClient = false
    /// The connection closes after this response.
    var closeAfter = false
    var sawRequestBytes = false
    var logged = false
    var startMicros: UInt64 = 0
    var status = 0
    var upstreamStatus = 0
    var bytesIn = 0
    /// `totalWritten + outBuf.readableBytes` when the response started.
    var outMark = 0
    /// The access log's verdict: none (route without verifiers), verified, failed, absent.
    var verdict: Verdict = .none
    /// Why verification did not pass (logged; also the response's reason when enforced).
    var reason: VerificationStatus? = nil
    /// The replay check is running off the loop: the body waits (unread) until it answers.
    var awaitingState = false
    /// The request body, read and held rather than forwarded while App Attest or a registration needs it whole.
    var heldBody: HeldBody? = nil
    /// How far the route's verifiers have got (they may suspend for App Attest).
    var progress = EvaluationProgress()
    /// The App Attest verifier waiting for the body, the key or the counter.
    var pendingAttest: (verifier: Int, presented: AppAttestPresentation)? = nil
    /// `X-Request-Id` (the client's or generated), forwarded and logged.
    var requestID: RequestID? = nil
    /// The `MetricNames` id of the verifier whose verdict this is (-1: none ran or none decided).
    var verifierMetric = -1
    /// When the head went to the upstream (monotonic µs), for the upstream latency histogram.
    var forwardMicros: UInt64 = 0
    /// A forward-auth call: the original request it asks about (answered, never forwarded).
    var forwardAuth: ForwardAuthTarget? = nil
    /// The registration endpoint this request is for.
    var registration: (action: RegistrationEndpoints.Action, verifier: AppAttestVerifier)? = nil
}

/// A request body kept in memory (bounded by the route's `max_body_bytes`) with its running SHA-256.
final class HeldBody {
    private(set) var bytes: [UInt8] = []
    private let hasher = SHA256Hasher()

    func append(_ chunk: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: chunk)
        hasher.update(chunk)
    }

    /// SHA-256 of everything appended (call once, when the body is complete).
    func finishDigest() -> [UInt8] { hasher.finish() }
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
