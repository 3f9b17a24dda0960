import Attestation
import Dispatch
import GatewayCrypto
import Observability

/// DeviceCheck on a route: the calls to Apple (and the subject record) run on a worker thread, so a slow Apple
/// never holds an event loop; the request waits unread (its body stays in the socket) until the outcome is back.
extension DownstreamConnection {
    /// Worker threads for Apple's servers (libcurl calls block).
    static let appleQueue = DispatchQueue(label: "attest-gateway.apple", attributes: .concurrent)

    func startDeviceCheck(plan: RouteVerification, verifier i: Int, token: String, subject: String?) {
        guard case .deviceCheck(let verifier) = plan.verifiers[i] else { return }
        exchange.awaitingState = true
        deadline = 0
        let loop = worker.loop
        let store = gen.runtime.state?.store
        let now = worker.unixNow()
        let bound = LoopBound(value: self)
        Self.appleQueue.async {
            let outcome = verifier.check(deviceToken: token, subject: subject, now: now, store: store) { message in
                Logger.error(message, ["verifier": verifier.name])
            }
            loop.execute {
                let conn = bound.value
                guard !conn.closed, conn.exchange.awaitingState else { return }
                conn.exchange.awaitingState = false
                switch outcome {
                case .passed(let bit0, let bit1):
                    let hash = SHA256Hasher.hash(Array(token.utf8))
                    conn.resumeVerification(.passed(.deviceCheck(bit0: bit0, bit1: bit1, tokenHash: hash)), verifier: i)
                case .rejected(let status): conn.resumeVerification(.rejected(status), verifier: i)
                }
                conn.resumeAfterStateWork()
            }
        }
    }
}
