import GatewayCore
import Synchronization

/// A cache of one verification key set (a JWKS) that the request path reads without ever waiting.
///
/// The policy, after Envoy's jwt_authn JWKS cache:
/// - a set lives for min(`Cache-Control: max-age`, `Policy.maxAgeSeconds` ≤ 6 h), at least the minimum lifetime;
/// - it is refreshed in the background once `refreshAheadFraction` of that lifetime has passed;
/// - a token naming an unknown `kid` triggers at most one extra refresh per `unknownKeyRefreshIntervalSeconds`
///   (key rotation), so forged `kid`s cannot make the gateway hammer the key server;
/// - when a fetch or parse fails, the last good set keeps serving: `.ready` until expiry, `.stale` for
///   `staleGraceSeconds` more, then `.unavailable`; retries back off from 5 s doubling to 5 min;
/// - readiness is false until a set has loaded.
///
/// Pure apart from the injected `clock` and `fetch`: `refreshIfDue` performs one step synchronously, so tests
/// drive it with a manual clock and no thread. In production `startRefresher()` runs those steps on a
/// dedicated thread. `KeySet` is generic so this module knows nothing of JOSE.
///
/// Event loops read through a `KeySetReader` each (`makeReader()`), which takes no lock while the set is
/// unchanged; `current()` takes the lock and serves the other callers (readiness, admin).
public final class KeySetCache<KeySet: Sendable>: Sendable {
    /// The state machine and a count of the times the lock was taken (for tests: readers' fast path takes none).
    private struct Guarded: Sendable {
        var machine: KeySetCacheStateMachine<KeySet>
        var lockAcquisitions: UInt64 = 0
        /// Why the last fetch failed; nil once one succeeds (the rollout view).
        var lastError: String?
    }

    private let guarded: AnnotatedMutex<Guarded>
    /// The machine's `servingVersion`, stored (release) inside the critical section that changed it. A reader
    /// compares it (acquire) with the version it holds and, when they differ, reads the snapshot and the version
    /// together under the lock (`published()`), so the pair it keeps always matches.
    let servingVersion = Atomic<UInt64>(0)
    private let clock: @Sendable () -> Int64
    private let fetch: @Sendable () throws -> KeySetFetch
    private let parse: @Sendable ([UInt8]) throws -> KeySet
    private let onEvent: (@Sendable (KeySetEvent) -> Void)?
    private let countKeys: (@Sendable (KeySet) -> Int)?
    let refresher = KeySetRefresher()

    /// - Parameters:
    ///   - clock: the current time in unix seconds (a manual clock in tests).
    ///   - fetch: fetches the raw set; blocking, called only from `refreshIfDue` (the refresher thread).
    ///   - parse: turns the raw set into `KeySet`; a throw counts as a failed fetch.
    ///   - onEvent: told of every `.loaded` and `.failed`, on the refreshing thread, outside the lock.
    ///   - countKeys: the number of keys in a set, for `.loaded(keys:)`; by default a `Collection`'s count.
    public init(policy: Policy, clock: @escaping @Sendable () -> Int64,
                fetch: @escaping @Sendable () throws -> KeySetFetch,
                parse: @escaping @Sendable ([UInt8]) throws -> KeySet,
                onEvent: (@Sendable (KeySetEvent) -> Void)? = nil,
                countKeys: (@Sendable (KeySet) -> Int)? = nil) {
        guarded = AnnotatedMutex(Guarded(machine: KeySetCacheStateMachine(policy: policy, now: clock())))
        self.clock = clock
        self.fetch = fetch
        self.parse = parse
        self.onEvent = onEvent
        self.countKeys = countKeys
    }

    /// The policy in force (clamped as `Policy.init` documents).
    public var policy: Policy { locked { $0.policy } }

    /// Request path: never blocks on I/O, never fetches. `.ready` within the lifetime, `.stale` up to the
    /// grace past expiry, then `.unavailable`.
    public func current() -> KeySetState<KeySet> {
        let now = clock()
        return locked { $0.state(now: now) }
    }

    /// A lock-free reader of `current()` for one event loop (see `KeySetReader`).
    public func makeReader() -> sending KeySetReader<KeySet> {
        KeySetReader(self)
    }

    /// Request path: a token named a `kid` the current set lacks. Wakes the refresher when the last such
    /// refresh was at least the policy interval ago. Never blocks. Returns whether a refresh was requested.
    @discardableResult
    public func noteUnknownKey() -> Bool {
        let now = clock()
        let requested = locked { $0.noteUnknownKey(now: now) }
        if requested { refresher.wake() }
        return requested
    }

    /// A set has loaded and is not yet `.unavailable` (the readiness probe).
    public var isReady: Bool {
        if case .unavailable = current() { return false }
        return true
    }

    /// When (unix seconds) the next refresh is due; the refresher sleeps until then unless woken.
    public var nextRefreshAt: Int64 { locked { $0.nextRefreshAt } }

    /// The serving set's schedule, for metrics and the rollout view: when it loaded, when it expires (unix
    /// seconds; nil before the first load), and how many fetches in a row have failed since.
    public var schedule: (loadedAt: Int64?, expiresAt: Int64?, consecutiveFailures: Int) {
        locked { m in (m.loaded?.loadedAt, m.loaded?.serving.expiresAt, m.consecutiveFailures) }
    }

    /// Why the most recent fetch failed (nil when it succeeded, or before the first attempt ended).
    public var lastError: String? { guarded.withLock { $0.lastError } }

    /// Background only (blocking): fetches and installs a new set if a refresh is due, an unknown-key refresh
    /// is pending, or `force` is set; returns what happened. Never runs two fetches at once (`.notDue`).
    @discardableResult
    public func refreshIfDue(force: Bool = false) -> KeySetEvent {
        let start = clock()
        guard locked({ $0.beginFetch(now: start, force: force) }) else { return .notDue }
        let event: KeySetEvent
        do {
            let fetched = try fetch()
            let set = try parse(fetched.body)
            let now = clock()
            let lifetime = locked { $0.fetchSucceeded(set, advertisedMaxAge: fetched.maxAgeSeconds, now: now) }
            guarded.withLock { $0.lastError = nil }
            event = .loaded(keys: keyCount(set), lifetimeSeconds: lifetime)
        } catch {
            let now = clock()
            locked { $0.fetchFailed(now: now) }
            let why = String(describing: error)
            guarded.withLock { $0.lastError = why }
            event = .failed(why)
        }
        onEvent?(event)
        return event
    }

    /// The clock this cache reads (the refresher converts due times into sleeps with it; readers too).
    func now() -> Int64 { clock() }

    /// The serving snapshot and its version, read together under the lock (a reader's slow path).
    func published() -> (snapshot: KeySetSnapshot<KeySet>?, version: UInt64) {
        locked { ($0.serving, $0.servingVersion) }
    }

    /// How often the lock has been taken (tests; reading it is not counted).
    var lockAcquisitions: UInt64 { guarded.withLock { $0.lockAcquisitions } }

    /// Every access to the machine: counts the acquisition and publishes a changed serving version before
    /// the lock is released.
    private func locked<Result: Sendable>(_ body: (inout KeySetCacheStateMachine<KeySet>) -> Result) -> Result {
        guarded.withLock { guarded in
            guarded.lockAcquisitions &+= 1
            let result = body(&guarded.machine)
            let version = guarded.machine.servingVersion
            if version != servingVersion.load(ordering: .relaxed) {
                servingVersion.store(version, ordering: .releasing)
            }
            return result
        }
    }

    private func keyCount(_ set: KeySet) -> Int? {
        if let countKeys { return countKeys(set) }
        return (set as? any Collection)?.count
    }
}
