internal import CSanitizerHooks
public import Synchronization

/// `Synchronization.Mutex`, made visible to ThreadSanitizer. Use it instead of `Mutex` (`make sanitize` checks).
///
/// Why: on Linux, `Mutex` takes its uncontended path with an atomic compare-and-swap inlined into our (instrumented)
/// code, which ThreadSanitizer sees; but a contended lock is acquired inside `libswiftSynchronization.so`, which is not
/// instrumented — it spins with its own `lock cmpxchg`, then sleeps in `syscall(SYS_futex, FUTEX_LOCK_PI)`, and
/// ThreadSanitizer intercepts neither. So whenever two threads really contend, ThreadSanitizer misses the
/// happens-before edge from one holder's critical section to the next and reports a data race that cannot happen
/// (docs/hardening.md "Sanitizers" has the reproduction). This wrapper adds that edge with `__tsan_acquire` after
/// locking and `__tsan_release` before unlocking, on the mutex's own address; outside a `--sanitize=thread` build
/// those hooks are null (two calls that return at once). It changes nothing else: same lock, same semantics.
///
/// Like `Mutex`, it is `~Copyable` and must live at a fixed address: a `let` in a `final class` or a global.
public struct AnnotatedMutex<Value: ~Copyable>: ~Copyable, Sendable {
    @usableFromInline let mutex: Mutex<Value>

    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` holding the lock, with exclusive access to the value (as `Mutex.withLock`).
    @inlinable @inline(__always)
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = withUnsafePointer(to: self) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            threadSanitizerAcquire(address)
            defer { threadSanitizerRelease(address) }
            return try body(&value)
        }
    }
}

/// The hooks, out of line: `@inlinable` code cannot call into an internally imported C module.
@usableFromInline
func threadSanitizerAcquire(_ address: UnsafeRawPointer) {
    CSanitizerHooks_acquire(address)
}

@usableFromInline
func threadSanitizerRelease(_ address: UnsafeRawPointer) {
    CSanitizerHooks_release(address)
}
