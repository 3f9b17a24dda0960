extension KeySetCache {
    /// How long key sets live, when they are refreshed and how failures are retried. All times in seconds.
    public struct Policy: Sendable, Equatable {
        /// The longest a set is used before it must be refetched, whatever the origin says; at most 6 hours.
        public var maxAgeSeconds: Int
        /// How long past its lifetime a set still serves (as `.stale`) while refreshes fail.
        public var staleGraceSeconds: Int
        /// An unknown `kid` triggers a refresh at most this often (keys rotate; tokens naming unknown keys must
        /// not become a way to make the gateway hammer the key server).
        public var unknownKeyRefreshIntervalSeconds: Int
        /// The fraction of the lifetime after which a refresh is attempted, so a new set arrives before expiry.
        public var refreshAheadFraction: Double
        /// The shortest lifetime given to a set, also for `max-age=0`, `no-store` and `no-cache`.
        public var minimumLifetimeSeconds: Int
        /// The first retry delay after a failed refresh; it doubles with each consecutive failure...
        public var initialRetrySeconds: Int
        /// ...up to this delay.
        public var maximumRetrySeconds: Int

        /// The hard cap on `maxAgeSeconds`: 6 hours.
        public static var maxAgeCeilingSeconds: Int { 21_600 }

        /// Out-of-range values are clamped: `maxAgeSeconds` to 1...6 h, the minimum lifetime to at most
        /// `maxAgeSeconds`, the fraction to 0.1...1, intervals to at least 1 s.
        public init(maxAgeSeconds: Int = 21_600, staleGraceSeconds: Int = 3_600,
                    unknownKeyRefreshIntervalSeconds: Int = 30, refreshAheadFraction: Double = 0.8,
                    minimumLifetimeSeconds: Int = 60, initialRetrySeconds: Int = 5, maximumRetrySeconds: Int = 300) {
            self.maxAgeSeconds = min(max(1, maxAgeSeconds), Self.maxAgeCeilingSeconds)
            self.staleGraceSeconds = max(0, staleGraceSeconds)
            self.unknownKeyRefreshIntervalSeconds = max(1, unknownKeyRefreshIntervalSeconds)
            self.refreshAheadFraction = min(max(0.1, refreshAheadFraction), 1)
            self.minimumLifetimeSeconds = min(max(1, minimumLifetimeSeconds), self.maxAgeSeconds)
            self.initialRetrySeconds = max(1, initialRetrySeconds)
            self.maximumRetrySeconds = max(self.initialRetrySeconds, maximumRetrySeconds)
        }

        /// The lifetime of a set whose origin advertised `maxAge` (nil: nothing advertised).
        func lifetime(advertised maxAge: Int?) -> Int {
            max(min(maxAge ?? maxAgeSeconds, maxAgeSeconds), minimumLifetimeSeconds)
        }

        /// Seconds after loading at which a set with `lifetime` is refreshed (at least 1).
        func refreshAfter(lifetime: Int) -> Int {
            max(1, Int(Double(lifetime) * refreshAheadFraction))
        }

        /// The delay before the next attempt after `failures` consecutive failures (1 = the first).
        func retryDelay(afterFailures failures: Int) -> Int {
            var delay = initialRetrySeconds
            var n = 1
            while n < failures && delay < maximumRetrySeconds {
                delay *= 2
                n += 1
            }
            return min(delay, maximumRetrySeconds)
        }
    }
}
