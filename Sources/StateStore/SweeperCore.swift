#if canImport(Glibc)
import Glibc
#endif
import GatewayCore

/// The state shared between a `StateStoreSweeper` and its thread: flags guarded by a `MonotonicCondition`, whose
/// condition both the sleeping sweeper and a waiting `stop()` use.
///
/// `@unchecked Sendable`: every mutable field is read and written only inside `sync.locked`.
final class SweeperCore: @unchecked Sendable {
    private let store: any AttestationStateStore
    private let intervalSeconds: Double
    private let clock: @Sendable () -> Int64
    private let report: StateStoreSweeper.Report?

    private let sync = MonotonicCondition()
    private var started = false
    private var stopping = false
    private var finished = false

    init(store: any AttestationStateStore, intervalSeconds: Double, clock: @escaping @Sendable () -> Int64,
         report: StateStoreSweeper.Report?) {
        self.store = store
        self.intervalSeconds = intervalSeconds
        self.clock = clock
        self.report = report
    }

    /// True when the caller should spawn the thread (first start, not stopped).
    func markStarted() -> Bool {
        locked {
            guard !started, !stopping else { return false }
            started = true
            return true
        }
    }

    func markFinished() {
        locked {
            finished = true
            sync.broadcast()
        }
    }

    func requestStop() {
        locked {
            stopping = true
            sync.broadcast()
        }
    }

    func waitFinished(timeoutMillis: Int) -> Bool {
        let deadline = MonotonicCondition.deadline(afterSeconds: Double(max(timeoutMillis, 0)) / 1000)
        return locked {
            var deadline = deadline
            while started && !finished {
                if !sync.wait(until: &deadline) { break }
            }
            return !started || finished
        }
    }

    /// The thread body: sleep an interval (woken early by `requestStop`), sweep, repeat until stopped.
    func run() {
        while sleepUnlessStopped() {
            let outcome: Result<Int, StateStoreError>
            do {
                outcome = .success(try store.sweepExpired(now: clock()))
            } catch {
                outcome = .failure(error)
            }
            report?(outcome)
        }
        markFinished()
    }

    /// False once a stop was requested.
    private func sleepUnlessStopped() -> Bool {
        var deadline = MonotonicCondition.deadline(afterSeconds: intervalSeconds)
        return locked {
            while !stopping {
                if !sync.wait(until: &deadline) { break }
            }
            return !stopping
        }
    }

    private func locked<R>(_ body: () -> R) -> R { sync.locked(body) }

}
