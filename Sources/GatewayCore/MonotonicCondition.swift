#if canImport(Glibc)
public import Glibc
#endif

/// A POSIX mutex with a condition variable on the monotonic clock, for the few background threads (key-set
/// refresher, state sweeper) that sleep until a deadline or until woken. Timed waits ignore wall-clock jumps.
///
/// `@unchecked Sendable`: the pthread objects are made for sharing; callers keep their own mutable state behind
/// `locked`.
public final class MonotonicCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
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

    /// Runs `body` holding the mutex.
    public func locked<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Inside `locked`: waits for a signal or until `deadline`; false when the deadline passed.
    public func wait(until deadline: inout timespec) -> Bool {
        pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    /// Inside `locked`: wakes one waiter.
    public func signal() { pthread_cond_signal(condition) }

    /// Inside `locked`: wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// The monotonic time `seconds` from now, for `wait(until:)`.
    public static func deadline(afterSeconds seconds: Double) -> timespec {
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
