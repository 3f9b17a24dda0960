import Synchronization

/// What `KeySetCache.current()` answers from: the serving set and its deadlines, immutable once published.
struct KeySetSnapshot<KeySet: Sendable>: Sendable {
    let set: KeySet
    /// The end of the lifetime: `.ready` before it.
    let expiresAt: Int64
    /// `expiresAt` plus the policy's stale grace: `.stale` before it, `.unavailable` from it on.
    let staleUntil: Int64

    /// The one definition of the state at `now` (nil: nothing has loaded), shared by the state machine
    /// (`KeySetCache.current()`) and `KeySetReader`, so the two cannot disagree.
    static func state(of snapshot: Self?, now: Int64) -> KeySetState<KeySet> {
        guard let snapshot else { return .unavailable }
        if now < snapshot.expiresAt { return .ready(snapshot.set) }
        if now < snapshot.staleUntil { return .stale(snapshot.set) }
        return .unavailable
    }
}

/// One event loop's view of a `KeySetCache`: `current()` answers exactly what `KeySetCache.current()` would,
/// without taking the cache's lock unless the serving set has changed since this reader last looked.
///
/// Why: every App Check verification asks for the key set, on an event loop thread; with one lock shared by
/// all loops that is a contended atomic read-modify-write per request, for a value that changes a few times
/// a day. The cache bumps an atomic version (release) in the same critical section that installs a set; a
/// reader compares it (acquire) with the version of the snapshot it holds and re-reads the snapshot under the
/// lock only when they differ. `.ready → .stale → .unavailable` are pure functions of the snapshot and the
/// clock (`KeySetSnapshot.state`), so they need no new snapshot. A failed refresh changes nothing a reader
/// sees, so it does not bump the version.
///
/// Not `Sendable`: loop-confined, one per event loop per verifier (`cache.makeReader()`). It may be created
/// elsewhere and handed to the loop, but never used from two threads.
public final class KeySetReader<KeySet: Sendable> {
    private let cache: KeySetCache<KeySet>
    private var serving: KeySetSnapshot<KeySet>?
    /// The cache's serving version `serving` belongs to (internal for tests: it only moves forward).
    private(set) var version: UInt64

    init(_ cache: KeySetCache<KeySet>) {
        self.cache = cache
        (serving, version) = cache.published()
    }

    /// Request path: what `KeySetCache.current()` answers now; lock-free unless a new set was installed.
    public func current() -> KeySetState<KeySet> {
        let now = cache.now()
        if cache.servingVersion.load(ordering: .acquiring) != version {
            (serving, version) = cache.published()
        }
        return KeySetSnapshot.state(of: serving, now: now)
    }
}

@available(*, unavailable, message: "loop-confined: make one reader per event loop with KeySetCache.makeReader()")
extension KeySetReader: Sendable {}
