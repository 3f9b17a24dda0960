/// The key-set cache's decisions, without I/O, locks or clocks: the cache feeds it the time and the outcome
/// of each fetch, and it answers what may serve and whether a fetch is due.
///
/// Not thread-safe by itself; `KeySetCache` keeps it inside an `AnnotatedMutex`.
struct KeySetCacheStateMachine<KeySet: Sendable>: Sendable {
    typealias Policy = KeySetCache<KeySet>.Policy

    /// The set serving now and its schedule.
    struct Loaded: Sendable {
        /// The set and its deadlines: everything `state(now:)` reads (also what `KeySetReader`s copy).
        let serving: KeySetSnapshot<KeySet>
        let loadedAt: Int64
        /// The scheduled refresh-ahead time.
        let refreshAt: Int64
    }

    let policy: Policy
    private(set) var loaded: Loaded? {
        didSet { servingVersion &+= 1 }
    }
    /// Moves forward with every change of `loaded`, i.e. of what `state(now:)` answers from; `KeySetCache`
    /// mirrors it into an atomic so readers notice without the lock.
    private(set) var servingVersion: UInt64 = 0
    /// When the next regular (scheduled or retry) attempt is due.
    private(set) var nextAttemptAt: Int64
    private(set) var consecutiveFailures = 0
    /// When an unknown `kid` last triggered a refresh.
    private var lastUnknownKeyRefreshAt: Int64?
    /// An unknown-`kid` refresh was requested and has not started yet.
    private(set) var unknownKeyRefreshPending = false
    /// A fetch is running; a second one is never started alongside it.
    private(set) var fetchInFlight = false

    /// The first load is due at once.
    init(policy: Policy, now: Int64) {
        self.policy = policy
        nextAttemptAt = now
    }

    /// What the request path may use at `now`.
    func state(now: Int64) -> KeySetState<KeySet> {
        KeySetSnapshot.state(of: serving, now: now)
    }

    /// The set serving now with its deadlines, nil before the first load.
    var serving: KeySetSnapshot<KeySet>? { loaded?.serving }

    var nextRefreshAt: Int64 {
        if unknownKeyRefreshPending, let requested = lastUnknownKeyRefreshAt { return min(requested, nextAttemptAt) }
        return nextAttemptAt
    }

    /// Records that a token named a key the set lacks. Returns true when this earns a refresh (the previous
    /// unknown-key refresh was at least the policy interval ago), false when it is rate-limited.
    mutating func noteUnknownKey(now: Int64) -> Bool {
        if let last = lastUnknownKeyRefreshAt, now - last < Int64(policy.unknownKeyRefreshIntervalSeconds) {
            return false
        }
        lastUnknownKeyRefreshAt = now
        unknownKeyRefreshPending = true
        return true
    }

    /// Decides whether to fetch now; when it returns true the caller must fetch and then report the outcome
    /// with `fetchSucceeded` or `fetchFailed`.
    mutating func beginFetch(now: Int64, force: Bool) -> Bool {
        guard !fetchInFlight else { return false }
        guard force || unknownKeyRefreshPending || now >= nextAttemptAt else { return false }
        fetchInFlight = true
        unknownKeyRefreshPending = false
        return true
    }

    /// Installs a freshly parsed set; returns the lifetime it was given.
    mutating func fetchSucceeded(_ set: KeySet, advertisedMaxAge: Int?, now: Int64) -> Int {
        let lifetime = policy.lifetime(advertised: advertisedMaxAge)
        let refreshAt = now + Int64(policy.refreshAfter(lifetime: lifetime))
        let expiresAt = now + Int64(lifetime)
        let serving = KeySetSnapshot(set: set, expiresAt: expiresAt,
                                     staleUntil: expiresAt + Int64(policy.staleGraceSeconds))
        loaded = Loaded(serving: serving, loadedAt: now, refreshAt: refreshAt)
        nextAttemptAt = refreshAt
        consecutiveFailures = 0
        fetchInFlight = false
        return lifetime
    }

    /// Keeps the previous set and schedules a retry with exponential backoff. A failed early refresh (an
    /// unknown `kid` while the set is fresh) does not pull the regular refresh earlier than scheduled.
    mutating func fetchFailed(now: Int64) {
        consecutiveFailures += 1
        let retryAt = now + Int64(policy.retryDelay(afterFailures: consecutiveFailures))
        nextAttemptAt = max(retryAt, loaded?.refreshAt ?? retryAt)
        fetchInFlight = false
    }
}
