#if canImport(Glibc)
import Glibc
#endif
import GatewayCore

/// The background refresher's thread and its wake-up signal: a plain POSIX thread (never the Swift
/// concurrency pool, whose threads the event loops must not share) sleeping on a condition variable.
///
/// Each start gets a new generation; `stop()` retires it, so a retired loop ends at its next check even if
/// it cannot be joined (stop called from the refresher thread itself, e.g. inside `onEvent`).
final class KeySetRefresher: @unchecked Sendable {
    // @unchecked: every mutable field below is read and written only inside `sync.locked`.
    private let sync = MonotonicCondition()
    private var woken = false
    private var generation: UInt64 = 0
    private var thread: pthread_t?

    init() {}

    /// Starts `body(generation)` on a new thread unless one is running; returns whether it started.
    @discardableResult
    func start(_ body: @escaping @Sendable (UInt64) -> Void) -> Bool {
        sync.locked { startLocked(body) }
    }

    private func startLocked(_ body: @escaping @Sendable (UInt64) -> Void) -> Bool {
        guard thread == nil else { return false }
        generation &+= 1
        let current = generation
        let box = Unmanaged.passRetained(ThreadBody { body(current) }).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { argument in
            let body = Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue()
            body.run()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        thread = handle
        return true
    }

    /// Wakes the sleeping loop early (an unknown-key refresh was requested).
    func wake() {
        sync.locked {
            woken = true
            sync.signal()
        }
    }

    /// Whether the loop started as `generation` should keep running.
    func isCurrent(_ generation: UInt64) -> Bool {
        sync.locked { self.generation == generation && thread != nil }
    }

    /// Sleeps up to `millis` or until woken or stopped; returns false when the loop must end.
    func sleep(millis: Int, generation: UInt64) -> Bool {
        var deadline = MonotonicCondition.deadline(afterSeconds: Double(millis) / 1000)
        return sync.locked {
            while !woken && self.generation == generation && thread != nil {
                if !sync.wait(until: &deadline) { break }
            }
            woken = false
            return self.generation == generation && thread != nil
        }
    }

    /// Ends the loop and waits for it (bounded by a fetch in progress, i.e. by the fetch's timeout).
    func stop() {
        let running = sync.locked { () -> pthread_t? in
            let running = thread
            thread = nil
            generation &+= 1
            sync.broadcast()
            return running
        }
        guard let running else { return }
        if pthread_equal(running, pthread_self()) != 0 {
            pthread_detach(running)  // called from the loop itself: it ends when this call returns to it
        } else {
            pthread_join(running, nil)
        }
    }
}

/// Carries a thread's body through `pthread_create`'s untyped argument.
private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

extension KeySetCache {
    /// Starts the background refresher: a dedicated thread that loads at once, then sleeps until
    /// `nextRefreshAt` (re-checking at least every minute) or until `noteUnknownKey` wakes it. A second call
    /// while it runs does nothing. The thread keeps the cache alive until `stop()`.
    public func startRefresher() {
        refresher.start { [self] generation in
            while refresher.isCurrent(generation) {
                refreshIfDue()
                let dueIn = max(0, min(nextRefreshAt - now(), 60))
                // At least 100 ms, so a refresh running elsewhere (tests, `force`) cannot make this spin.
                guard refresher.sleep(millis: max(100, Int(dueIn) * 1000), generation: generation) else { return }
            }
        }
    }

    /// Stops the refresher and waits for its thread to end (at most the duration of a fetch in progress).
    public func stop() {
        refresher.stop()
    }
}
