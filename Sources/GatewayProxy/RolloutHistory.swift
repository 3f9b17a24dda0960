import Dispatch
import GatewayCore
import Observability

/// The rollout view's memory (admin `GET /`, `GET /stats`): verification outcomes per route, verifier, result and
/// reason, and verified requests per route and app id, in one-minute buckets over the last day. Kept in memory per
/// process and bounded: 1,440 buckets, each holding only the keys that changed in its minute (keys are route ×
/// verifier × reason, so their number is bounded by the configuration; app ids by `LoopMetrics.maxAppKeys` per loop
/// and sample, and kept for the last hour only).
///
/// The request path only counts (the verification counter `/metrics` has anyway, and one app-id count per verified
/// request): the loops' counters are sampled every few seconds and on every read, and what changed since the
/// previous sample goes into the current minute's bucket. A count can land in the minute after the one it happened
/// in by at most the sampling interval.
public final class RolloutHistory: Sendable {
    public static let dayMinutes = 1440
    public static let hourMinutes = 60
    static let sampleSeconds = 5

    struct Minute {
        /// Unix minute (seconds ÷ 60) this bucket holds; -1: empty.
        var minute: Int64 = -1
        var verifications: [Int: UInt64] = [:]
        var apps: [AppRequestKey: UInt64] = [:]
    }

    private struct State {
        var buckets = [Minute](repeating: Minute(), count: RolloutHistory.dayMinutes)
        /// Per worker, its cumulative verification counters at the previous sample.
        var lastVerifications: [[Int: UInt64]]
    }

    private let workers: [ProxyWorker]
    private let state: AnnotatedMutex<State>
    private let clock: @Sendable () -> Int64
    /// The sampling timer while running (Dispatch sources are thread-safe; the mutex orders start and stop).
    private let timer = AnnotatedMutex<TimerBox?>(nil)

    /// A Dispatch timer, carried across the mutex (only ever used under it, or by Dispatch itself).
    private struct TimerBox: @unchecked Sendable { let source: DispatchSourceTimer }

    /// `clock`: unix seconds (tests inject one; by default the wall clock).
    public init(workers: [ProxyWorker], clock: (@Sendable () -> Int64)? = nil) {
        self.workers = workers
        self.clock = clock ?? { WallClock.unixSeconds() }
        state = AnnotatedMutex(State(lastVerifications: Array(repeating: [:], count: workers.count)))
    }

    deinit { stop() }

    /// Samples every `sampleSeconds` until `stop()` (again after another `start()`).
    public func start() {
        timer.withLock { box in
            guard box == nil else { return }
            let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "attest-gateway.rollout"))
            source.schedule(deadline: .now() + .seconds(Self.sampleSeconds), repeating: .seconds(Self.sampleSeconds))
            source.setEventHandler { [weak self] in self?.sample() }
            source.resume()
            box = TimerBox(source: source)
        }
    }

    public func stop() {
        timer.withLock { box in
            box?.source.cancel()
            box = nil
        }
    }

    /// Copies every loop's counters (on its loop; app counts are taken, so the loop starts afresh) and adds what
    /// changed since the previous sample to the bucket of the current minute. A loop that does not answer within a
    /// second is skipped; its counts arrive next time.
    public func sample() {
        // Under the lock from the copies to the update: two samples at once (the timer and a reader) would otherwise
        // let an older copy overwrite a newer one and count the difference twice. The loops never take this lock.
        state.withLock { s in
            let snapshots = workers.map { Self.take($0) }
            let minute = clock() / 60
            let index = Int(minute % Int64(Self.dayMinutes))
            if s.buckets[index].minute != minute { s.buckets[index] = Minute(minute: minute) }
            for (i, snap) in snapshots.enumerated() {
                guard let snap else { continue }
                for (key, n) in snap.verifications {
                    let delta = n &- min(n, s.lastVerifications[i][key] ?? 0)
                    if delta > 0 { s.buckets[index].verifications[key, default: 0] &+= delta }
                }
                for (key, n) in snap.apps { s.buckets[index].apps[key, default: 0] &+= n }
                s.lastVerifications[i] = snap.verifications
            }
            // App ids are shown for the last hour only: drop them from older buckets.
            let old = Int((minute - Int64(Self.hourMinutes) + Int64(Self.dayMinutes)) % Int64(Self.dayMinutes))
            if !s.buckets[old].apps.isEmpty && s.buckets[old].minute <= minute - Int64(Self.hourMinutes) { s.buckets[old].apps = [:] }
        }
    }

    /// One loop's cumulative verification counters and its app counts since the last take, copied on that loop;
    /// nil if it does not answer within a second (stopping). A late answer's app counts are lost (not counted twice).
    private static func take(_ worker: ProxyWorker) -> (verifications: [Int: UInt64], apps: [AppRequestKey: UInt64])? {
        MetricsEndpoint.onLoop(worker) { (worker.metrics.verifications, worker.metrics.takeAppRequests()) }
    }

    /// The buckets of the last `minutes` minutes (the current one included), after a fresh sample, and the current
    /// unix minute.
    func recent(minutes: Int) -> (now: Int64, buckets: [Minute]) {
        sample()
        let minute = clock() / 60
        let oldest = minute - Int64(min(minutes, Self.dayMinutes)) + 1
        return state.withLock { s in
            (minute, s.buckets.filter { $0.minute >= oldest && $0.minute <= minute })
        }
    }
}
