public import Attestation
import Dispatch
import GatewayCore
import GatewayCrypto
import JOSE
import Observability
import OutboundHTTP
import StateStore

/// The App Attest fraud-metric refresher of one verifier with `fraud_metric` (PROTOCOL.md "App Attest receipts and
/// fraud metric"): posts each key's latest receipt to Apple's data server — an ATTEST receipt at once, then every
/// key used in the last 30 days once per `refresh_interval`, never before the receipt's not-before — verifies the
/// new receipt and keeps its risk metric for `X-Attest-Risk-Metric` and `max_risk_metric`. 304 keeps the receipt;
/// 404/429/5xx back off from 1 minute up to `refresh_interval`. Runs on its own queue, never on an event loop.
public final class FraudMetricRefresher: Sendable {
    let verifier: AppAttestVerifier
    private let receiptVerifier: AppAttestReceiptVerifier
    private let auth: AppleAuthToken
    private let post: @Sendable (_ body: [UInt8], _ authorization: String) -> HTTPResponse?
    private let refreshIntervalSeconds: Int64
    private let state: StateService
    private let queue = DispatchQueue(label: "attest-gateway.fraud-metric")
    /// The pass timer (a DispatchSource is thread-safe to cancel; the box only carries it across the lock).
    private struct Timer: @unchecked Sendable { let source: DispatchSourceTimer }
    private let timer = AnnotatedMutex<Timer?>(nil)
    /// Keys used by requests since the last pass (their `lastUsedAt` is written then, not per request).
    private let used = AnnotatedMutex<Set<String>>([])
    /// When each key may be tried again after a 304 or a failure, and the current back-off.
    private let retry = AnnotatedMutex<[String: (next: Int64, delay: Int64)]>([:])

    static let usedWindowSeconds: Int64 = 30 * 86_400
    static let firstBackoffSeconds: Int64 = 60

    public init(verifier: AppAttestVerifier, receiptVerifier: AppAttestReceiptVerifier, auth: AppleAuthToken, baseURL: String,
         caFile: String?, timeoutMillis: Int, refreshIntervalSeconds: Int64, state: StateService) {
        self.verifier = verifier
        self.receiptVerifier = receiptVerifier
        self.auth = auth
        self.refreshIntervalSeconds = max(1, refreshIntervalSeconds)
        self.state = state
        let client = CurlHTTPClient(caFile: caFile)
        let url = baseURL + "/v1/attestationData"
        post = { body, authorization in
            switch client.post(url, headers: [("Authorization", authorization), ("Content-Type", "text/plain")], body: body,
                               timeoutMillis: timeoutMillis, maxBodyBytes: 256 * 1024) {
            case .success(let r): return r
            case .failure(let e):
                Logger.warn("fraud metric: call failed", ["verifier": verifier.name, "error": e.description])
                return nil
            }
        }
    }

    /// A request used `keyID` (called on the loops; a set insert under a lock).
    func noteUse(_ keyID: String) { _ = used.withLock { $0.insert(keyID) } }

    func start() {
        let tick = max(1, min(60, refreshIntervalSeconds / 4))
        let source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: .now(), repeating: .seconds(Int(tick)))
        source.setEventHandler { [self] in runOnce(now: WallClock.unixSeconds()) }
        let box = Timer(source: source)
        timer.withLock { $0 = box }
        source.resume()
    }

    func stop() { timer.withLock { $0?.source.cancel(); $0 = nil } }

    /// One pass over the verifier's keys.
    func runOnce(now: Int64) {
        let usedNow = used.withLock { s -> Set<String> in let taken = s; s.removeAll(); return taken }
        let store = state.store
        for appID in verifier.appIDs {
            guard let keys = try? store.keys(appID: appID) else { return }
            for key in keys {
                guard var record = try? store.receipt(keyID: key.keyID) else { continue }
                let wasUsed = usedNow.contains(key.keyID)
                if wasUsed { record.lastUsedAt = now }
                var changed = wasUsed
                if due(record, keyID: key.keyID, now: now) {
                    let refreshed = refresh(record, key: key, now: now)
                    changed = changed || refreshed != record
                    record = refreshed
                }
                // Written only when something changed: a new receipt, or the key was used (its lastUsedAt).
                if changed { try? store.putReceipt(keyID: key.keyID, record) }
                if record.riskMetric != nil { state.appAttestKeys.setRiskMetric(key.keyID, record.riskMetric) }
            }
        }
    }

    private func due(_ r: ReceiptRecord, keyID: String, now: Int64) -> Bool {
        if let wait = retry.withLock({ $0[keyID] }), wait.next > now { return false }
        let isAttestReceipt = r.riskMetric == nil && r.notBefore == nil
        if isAttestReceipt { return true }
        return now - r.lastUsedAt <= Self.usedWindowSeconds && now >= (r.notBefore ?? 0) && now >= r.createdAt + refreshIntervalSeconds
    }

    /// Posts the receipt; the updated record (a new receipt on 200, the same one otherwise).
    private func refresh(_ record: ReceiptRecord, key: AttestedKeyRecord, now: Int64) -> ReceiptRecord {
        let keyID = key.keyID
        guard let keyBytes = StandardBase64.decode(keyID), let token = try? auth.current(now: now) else { return record }
        let body = Array(StandardBase64.encode(record.receipt).utf8)
        guard let response = post(body, token) else { return backOff(record, keyID: keyID, now: now) }
        switch response.status {
        case 200:
            let text = String(decoding: response.body, as: UTF8.self).filter { !$0.isWhitespace }
            let bytes = StandardBase64.decode(text) ?? response.body
            let environment: Attestation.AppAttestEnvironment? = switch verifier.environment {
            case .development: .development
            case .production: .production
            case .any: nil
            }
            switch receiptVerifier.verify(bytes, appID: key.appID, keyID: keyBytes, environment: environment) {
            case .success(let receipt) where receipt.createdAt >= record.createdAt:
                retry.withLock { $0[keyID] = nil }
                Logger.info("fraud metric: receipt refreshed", ["verifier": verifier.name, "risk_metric": receipt.riskMetric.map(String.init) ?? "-"])
                return ReceiptRecord(receipt: bytes, riskMetric: receipt.riskMetric, createdAt: receipt.createdAt,
                                     notBefore: receipt.notBefore, lastUsedAt: record.lastUsedAt)
            case .success:
                Logger.warn("fraud metric: Apple returned an older receipt; keeping the current one", ["verifier": verifier.name])
            case .failure(let why):
                Logger.warn("fraud metric: the new receipt does not verify; keeping the current one",
                            ["verifier": verifier.name, "error": why.description])
            }
            return backOff(record, keyID: keyID, now: now)
        case 304:
            retry.withLock { $0[keyID] = (now + refreshIntervalSeconds, Self.firstBackoffSeconds) }
            return record
        default:
            return backOff(record, keyID: keyID, now: now)
        }
    }

    private func backOff(_ record: ReceiptRecord, keyID: String, now: Int64) -> ReceiptRecord {
        retry.withLock { r in
            let delay = min(max(Self.firstBackoffSeconds, (r[keyID]?.delay ?? 0) * 2), max(Self.firstBackoffSeconds, refreshIntervalSeconds))
            r[keyID] = (now + delay, delay)
        }
        return record
    }
}
