#if canImport(Glibc)
import Glibc
#endif

/// The state shared between a `StateStoreSweeper` and its thread: flags guarded by a pthread mutex, and a
/// condition (on the monotonic clock) that both the sleeping sweeper and a waiting `stop()` use.
///
/// `@unchecked Sendable`: every mutable field is read and written only while `mutex` is held.
final class SweeperCore: @unchecked Sendable {
    private let store: any AttestationStateStore
    private let intervalSeconds: Double
    private let clock: @Sendable () -> Int64
    private let report: StateStoreSweeper.Report?

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var started = false
    private var stopping = false
    private var finished = false

    init(store: any AttestationStateStore, intervalSeconds: Double, clock: @escaping @Sendable () -> Int64,
         report: StateStoreSweeper.Report?) {
        self.store = store
        self.intervalSeconds = intervalSeconds
        self.clock = clock
        self.report = report
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        // Monotonic: a wall-clock jump must neither stall the sweeper nor stretch `stop()`.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
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
            pthread_cond_broadcast(condition)
        }
    }

    func requestStop() {
        locked {
            stopping = true
            pthread_cond_broadcast(condition)
        }
    }

    func waitFinished(timeoutMillis: Int) -> Bool {
        let deadline = Self.deadline(afterSeconds: Double(max(timeoutMillis, 0)) / 1000)
        return locked {
            var deadline = deadline
            while started && !finished {
                if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
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
        var deadline = Self.deadline(afterSeconds: intervalSeconds)
        return locked {
            while !stopping {
                if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
            }
            return !stopping
        }
    }

    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    private static func deadline(afterSeconds seconds: Double) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let whole = Int(seconds)
        var nanos = Int(now.tv_nsec) + Int((seconds - Double(whole)) * 1_000_000_000)
        var secs = Int(now.tv_sec) + whole
        if nanos >= 1_000_000_000 {
            secs += 1
            nanos -= 1_000_000_000
        }
        return timespec(tv_sec: secs, tv_nsec: nanos)
    }
}
