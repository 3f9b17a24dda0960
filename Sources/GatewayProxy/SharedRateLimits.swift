import GatewayConfig
import GatewayCrypto
import Observability
import StateStore
import Synchronization

/// Rate limits shared by every gateway on one state store that shares them (Redis): `rate_limit` and
/// `registration_rate_limit` take their tokens there, off the loop through the state queue (`StateService`), so
/// replicas on one Redis spend one budget.
///
/// When the store fails (down, refusing, slower than `state.timeout`) the request is not let through unlimited: it
/// takes its token from the process's own buckets (`RateLimiter`) instead — each replica then limits on its own, as
/// without Redis. The change is logged once each way; every fallback counts in
/// `attest_gateway_state_errors_total{operation="rate_limit"}`. Kept across reloads, like the store.
final class SharedRateLimits: Sendable {
    let state: StateService
    /// Limiting locally since the last failure (reset by the next shared answer).
    private let local = Atomic<Bool>(false)

    init(state: StateService) {
        self.state = state
    }

    /// The state-store operation name (metrics): `attest_gateway_state_operation_seconds{operation="rate_limit"}`.
    static let operation = "rate_limit"

    /// What the store keys a bucket by: the hex SHA-256 of the client address, app id or key id, so none appears in
    /// Redis (keys, `MONITOR`, the slow log) as it is, and every key has the same length whatever a trusted proxy
    /// reported. (A digest, not a secret: an IPv4 address can be found again from its hash by trying them all.)
    static func digest(_ key: some Collection<UInt8>) -> String {
        hexString(SHA256Hasher.hash(Array(key)))
    }

    /// A token could not be taken from the store: limit locally; logs the change to local limiting once.
    /// True when this call made the change.
    @discardableResult
    func fellBack(_ error: StateStoreError) -> Bool {
        guard !local.exchange(true, ordering: .relaxed) else { return false }
        Logger.warn("rate limit store unavailable, limiting locally", ["cause": error.label, "error": error.description])
        return true
    }

    /// The store answered: limits are shared again; logs the change back once. True when this call made it.
    @discardableResult
    func answered() -> Bool {
        guard local.load(ordering: .relaxed), local.exchange(false, ordering: .relaxed) else { return false }
        Logger.info("rate limit store available, limits shared again")
        return true
    }

    /// Whether requests are limited locally (the last store call failed).
    var limitingLocally: Bool { local.load(ordering: .relaxed) }
}
