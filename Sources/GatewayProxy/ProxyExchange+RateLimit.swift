import GatewayConfig
import StateStore

/// `rate_limit` and `registration_rate_limit` through a state store that shares them (Redis): the token is taken
/// off the loop, the request waiting unread meanwhile as it does for a consume; a store that fails answers from the
/// process's own buckets instead (`SharedRateLimits`). Without such a store the limits are taken on the loop, from
/// `RateLimiter`, by the callers.
extension ProxyExchange {
    /// Takes a token for `key` under `limit` (named `name`) from the shared store. Refused: answers 429 with
    /// `Retry-After` (`close` as the caller decided); taken: `admitted` goes on with the request. Neither runs when
    /// the exchange closed meanwhile (the client went away).
    func takeSharedToken(_ shared: SharedRateLimits, _ limit: RateLimitConfig, name: String, key: [UInt8], close: Bool,
                         admitted: @escaping (ProxyExchange) -> Void) {
        let digest = SharedRateLimits.digest(key)
        let rate = limit.ratePerSecond, burst = limit.burst
        offLoop(shared.state, SharedRateLimits.operation, { store in
            Result { () throws(StateStoreError) in
                try store.takeToken(limit: name, key: digest, ratePerSecond: rate, burst: burst)
            }
        }) { conn, result in
            let retry: Int?
            switch result {
            case .success(let answer):
                shared.answered()
                retry = answer
            case .failure(let error):
                // Never unlimited: the process's own bucket for the same limit and key decides.
                shared.fellBack(error)
                retry = conn.gen.runtime.rateLimiter.take(limit, name: name, key: key)
            }
            if let retry {
                conn.respondLocal(.rateLimited(retryAfter: retry), close: close)
            } else {
                admitted(conn)
            }
        }
    }
}
