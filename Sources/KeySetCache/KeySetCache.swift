import GatewayCore

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
public final class KeySetCache<KeySet: Sendable>: Sendable {
    private let machine: AnnotatedMutex<KeySetCacheStateMachine<KeySet>>
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
        machine = AnnotatedMutex(KeySetCacheStateMachine(policy: policy, now: clock()))
        self.clock = clock
        self.fetch = fetch
        self.parse = parse
        self.onEvent = onEvent
        self.countKeys = countKeys
    }

    /// The policy in force (clamped as `Policy.init` documents).
    public var policy: Policy { machine.withLock { $0.policy } }

    /// Request path: never blocks on I/O, never fetches. `.ready` within the lifetime, `.stale` up to the
    /// grace past expiry, then `.unavailable`.
    public func current() -> KeySetState<KeySet> {
        let now = clock()
        return machine.withLock { $0.state(now: now) }
    }

    /// Request path: a token named a `kid` the current set lacks. Wakes the refresher when the last such
    /// refresh was at least the policy interval ago. Never blocks. Returns whether a refresh was requested.
    @discardableResult
    public func noteUnknownKey() -> Bool {
        let now = clock()
        let requested = machine.withLock { $0.noteUnknownKey(now: now) }
        if requested { refresher.wake() }
        return requested
    }

    /// A set has loaded and is not yet `.unavailable` (the readiness probe).
    public var isReady: Bool {
        if case .unavailable = current() { return false }
        return true
    }

    /// When (unix seconds) the next refresh is due; the refresher sleeps until then unless woken.
    public var nextRefreshAt: Int64 { machine.withLock { $0.nextRefreshAt } }

    /// Background only (blocking): fetches and installs a new set if a refresh is due, an unknown-key refresh
    /// is pending, or `force` is set; returns what happened. Never runs two fetches at once (`.notDue`).
    @discardableResult
    public func refreshIfDue(force: Bool = false) -> KeySetEvent {
        let start = clock()
        guard machine.withLock({ $0.beginFetch(now: start, force: force) }) else { return .notDue }
        let event: KeySetEvent
        do {
            let fetched = try fetch()
            let set = try parse(fetched.body)
            let now = clock()
            let lifetime = machine.withLock { $0.fetchSucceeded(set, advertisedMaxAge: fetched.maxAgeSeconds, now: now) }
            event = .loaded(keys: keyCount(set), lifetimeSeconds: lifetime)
        } catch {
            let now = clock()
            machine.withLock { $0.fetchFailed(now: now) }
            event = .failed(String(describing: error))
        }
        onEvent?(event)
        return event
    }

    /// The clock this cache reads (the refresher converts due times into sleeps with it).
    func now() -> Int64 { clock() }

    private func keyCount(_ set: KeySet) -> Int? {
        if let countKeys { return countKeys(set) }
        return (set as? any Collection)?.count
    }
}
