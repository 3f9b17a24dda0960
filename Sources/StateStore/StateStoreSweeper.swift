#if canImport(Glibc)
import Glibc
#endif

/// Calls `sweepExpired(now:)` on a store every `intervalSeconds`, on a plain POSIX thread of its own (not Swift
/// concurrency: a sweep may block on disk or network, and must never occupy an event loop or the cooperative pool).
///
/// `start()` spawns the thread once; `stop()` wakes it at once and waits (bounded) for it to finish the sweep in
/// progress. The thread keeps only the shared core alive, so dropping the sweeper also asks the thread to stop.
public final class StateStoreSweeper: Sendable {
    /// The outcome of one sweep: rows deleted, or why it failed (e.g. for a log line or a metric).
    public typealias Report = @Sendable (Result<Int, StateStoreError>) -> Void

    private let core: SweeperCore

    /// - Parameters:
    ///   - intervalSeconds: pause between sweeps (the first sweep runs one interval after `start()`).
    ///   - clock: wall-clock unix seconds, injected so tests can move time.
    ///   - report: called on the sweeper thread after every sweep.
    public init(
        store: any AttestationStateStore,
        intervalSeconds: Double,
        clock: @escaping @Sendable () -> Int64 = StateStoreSweeper.systemUnixSeconds,
        report: Report? = nil
    ) {
        core = SweeperCore(store: store, intervalSeconds: max(intervalSeconds, 0.001), clock: clock, report: report)
    }

    deinit {
        core.requestStop()
    }

    /// The system's wall clock in unix seconds (the default clock).
    @Sendable public static func systemUnixSeconds() -> Int64 {
        Int64(time(nil))
    }

    /// Starts the sweeping thread; a second call, or a call after `stop()`, does nothing.
    public func start() {
        guard core.markStarted() else { return }
        let context = Unmanaged.passRetained(core).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        // Detached: `stop()` waits on a condition with a deadline instead of an unbounded join.
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attributes, { context in
            let core = Unmanaged<SweeperCore>.fromOpaque(context!).takeRetainedValue()
            core.run()
            return nil
        }, context)
        if rc != 0 {
            Unmanaged<SweeperCore>.fromOpaque(context).release()
            core.markFinished()
        }
    }

    /// Stops sweeping: wakes the thread and waits up to `timeoutMillis` for it to finish the sweep in progress
    /// (a sweep is itself bounded by the store's timeout). True when the thread has ended (or never started).
    @discardableResult
    public func stop(timeoutMillis: Int = 5_000) -> Bool {
        core.requestStop()
        return core.waitFinished(timeoutMillis: timeoutMillis)
    }
}
