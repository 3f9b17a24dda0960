import Attestation
import Dispatch
import GatewayCore
import Observability
import GatewayPosix
public import StateStore
/// Moves a loop-confined value through a `@Sendable` closure that only ever runs it on that same loop.
struct LoopBound<Value>: @unchecked Sendable {
    let value: Value
}

/// The configured state store, and the one place its blocking calls run: a serial queue off the event loops.
/// Results come back to the caller's loop through `EventLoop.execute` (ARCHITECTURE.md "Concurrency").
public final class StateService: Sendable {
    public let store: AttestationStateStore
    /// `state.on_unavailable: allow`: when the store fails, forward and say the replay check was skipped.
    public let allowWhenUnavailable: Bool
    /// Registered App Attest keys already read from the store.
    let appAttestKeys = AppAttestKeyCache()
    private let queue = DispatchQueue(label: "attest-gateway.state")
    private let sweeper: StateStoreSweeper?

    /// Work waiting for the state queue, with where its answer goes: a consume (batched with the others of its
    /// drain) or any other store call.
    private enum Pending: @unchecked Sendable {   // the closures only ever run their results on their loop
        case consume(ConsumeRequest, now: Int64, deliver: (Result<Bool, StateStoreError>) -> Void)
        case counter(CounterAdvance, deliver: (Result<Bool, StateStoreError>) -> Void)
        case call(op: String, () -> Void)
    }

    /// Work waiting to run, and whether a drain is already queued. Everything that arrives while one batch runs
    /// goes into the next: under load, one SQLite commit serves many consumes (group commit).
    private let pending = AnnotatedMutex<(items: [Pending], drainQueued: Bool)>(([], false))

    /// `sweepIntervalSeconds`: how often expired one-time values are deleted (nil: the backend expires them itself).
    public init(store: AttestationStateStore, allowWhenUnavailable: Bool, sweepIntervalSeconds: Int?) {
        self.store = store
        self.allowWhenUnavailable = allowWhenUnavailable
        sweeper = sweepIntervalSeconds.map { StateStoreSweeper(store: store, intervalSeconds: Double($0), clock: { WallClock.unixSeconds() }) }
    }

    public func startBackgroundWork() { sweeper?.start() }
    public func stopBackgroundWork() { sweeper?.stop() }

    /// Consumes a one-time value off the loop; `done` runs on `loop` with the result.
    func consume<Owner: AnyObject>(namespace: String, key: String, expiresAt: Int64, now: Int64, loop: EventLoop,
                                   owner: Owner, _ done: @escaping (Owner, Result<Bool, StateStoreError>) -> Void) {
        let bound = LoopBound(value: (owner, done))
        let item = Pending.consume(ConsumeRequest(namespace: namespace, key: key, expiresAt: expiresAt), now: now) { result in
            loop.execute { bound.value.1(bound.value.0, result) }
        }
        pending.withLock { state in state.items.append(item) }
    }

    /// An App Attest counter compare-and-set off the loop, batched like consumes (`advanceCounters(batch:)`: one
    /// SQLite commit, one Redis script, per drain); `done` runs on `loop` with the result.
    func advanceCounter<Owner: AnyObject>(_ advance: CounterAdvance, loop: EventLoop, owner: Owner,
                                          _ done: @escaping (Owner, Result<Bool, StateStoreError>) -> Void) {
        let bound = LoopBound(value: (owner, done))
        let item = Pending.counter(advance) { result in loop.execute { bound.value.1(bound.value.0, result) } }
        pending.withLock { state in state.items.append(item) }
    }

    /// Runs `work` against the store off the loop (in arrival order with everything else); `done` runs on `loop`
    /// with its result. Like `consume`, it starts with the loop's next `kick`.
    /// `op` names the work in the state-store metrics (`attest_gateway_state_operation_seconds{operation}`).
    func call<Owner: AnyObject, Value>(_ op: String, loop: EventLoop, owner: Owner,
                                       _ work: @escaping @Sendable (AttestationStateStore) -> Result<Value, StateStoreError>,
                                       _ done: @escaping (Owner, Result<Value, StateStoreError>) -> Void) {
        let bound = LoopBound(value: (owner, done))
        let store = self.store
        let item = Pending.call(op: op) {
            let started = MonotonicClock.nowMicros()
            let outcome = work(store)
            var failure: String? = nil
            if case .failure(let e) = outcome { failure = e.label }
            ProcessMetrics.shared.stateOperation(op, micros: MonotonicClock.nowMicros() &- started, error: failure)
            let result = LoopBound(value: outcome)
            loop.execute { bound.value.1(bound.value.0, result.value) }
        }
        pending.withLock { state in state.items.append(item) }
    }

    /// Starts a drain of what is pending, unless one is queued already. Event loops call this after each batch of
    /// events, so every consume that batch produced goes to the store together (and the state thread does not
    /// preempt the loop once per request).
    func kick() {
        let scheduleDrain = pending.withLock { state -> Bool in
            guard !state.items.isEmpty, !state.drainQueued else { return false }
            state.drainQueued = true
            return true
        }
        if scheduleDrain { queue.async { self.drain() } }
    }

    /// Runs everything pending as one batch. Requests carry their own clock readings, which differ by at most the
    /// batch's age; the oldest is used, so a consumed value can only be held live a moment longer, never shorter.
    private func drain() {
        let batch = pending.withLock { state -> [Pending] in
            let taken = state.items
            state.items.removeAll(keepingCapacity: true)
            state.drainQueued = false
            return taken
        }
        guard !batch.isEmpty else { return }
        var consumes: [(request: ConsumeRequest, now: Int64, deliver: (Result<Bool, StateStoreError>) -> Void)] = []
        var counters: [(advance: CounterAdvance, deliver: (Result<Bool, StateStoreError>) -> Void)] = []
        for item in batch {
            switch item {
            case .consume(let request, let now, let deliver): consumes.append((request, now, deliver))
            case .counter(let advance, let deliver): counters.append((advance, deliver))
            case .call(_, let run): run()
            }
        }
        if !counters.isEmpty {
            let results = measured("counter_batch", count: counters.count) { store.advanceCounters(batch: counters.map(\.advance)) }
            for (item, result) in zip(counters, results) { item.deliver(result) }
        }
        guard !consumes.isEmpty else { return }
        let now = consumes.map(\.now).min() ?? 0
        let results = measured("consume_batch", count: consumes.count) { store.consumeOnce(batch: consumes.map(\.request), now: now) }
        for (item, result) in zip(consumes, results) { item.deliver(result) }
    }

    /// Runs a batch call of `count` items, recording its time and its first failure in the state-store metrics under
    /// `op`. A backend answering another number of results than items (a bug) fails every item, rather than leave
    /// requests unanswered or hand one request another's answer.
    private func measured(_ op: String, count: Int, _ body: () -> [Result<Bool, StateStoreError>]) -> [Result<Bool, StateStoreError>] {
        let started = MonotonicClock.nowMicros()
        var results = body()
        if results.count != count {
            let error = StateStoreError(.unavailable, "\(op): \(results.count) results for \(count) items")
            Logger.error("state store batch answered the wrong number of results", ["operation": op, "detail": error.description])
            results = Array(repeating: .failure(error), count: count)
        }
        var failure: String? = nil
        for case .failure(let e) in results { failure = e.label; break }
        ProcessMetrics.shared.stateOperation(op, micros: MonotonicClock.nowMicros() &- started, error: failure)
        return results
    }
}
