#if canImport(Glibc)
import Glibc
#endif
import CGatewayShims
import GatewayCore

/// Something that owns a file descriptor registered with an `EventLoop`. Loop-confined: all calls arrive on the
/// loop's thread.
public protocol LoopHandler: AnyObject {
    /// epoll reported `events` (edge-triggered) for the handler's descriptor.
    func onEvents(_ events: UInt32)
    /// The handler's deadline (monotonic milliseconds, 0 = none) has passed.
    func onTimeout(now: UInt64)
    /// Monotonic milliseconds at which `onTimeout` is due, or 0 for none.
    var deadline: UInt64 { get }
}

/// Event bits, re-exported as constants the loop's users compare against.
public enum IOEvents {
    public static let readable = CGateway_EPOLLIN
    public static let writable = CGateway_EPOLLOUT
    public static let error = CGateway_EPOLLERR
    public static let hangup = CGateway_EPOLLHUP
    public static let readHangup = CGateway_EPOLLRDHUP
    /// What connections register once: edge-triggered read and write readiness plus hang-ups, so the loop never
    /// has to call epoll_ctl again for the descriptor's lifetime.
    public static let all = CGateway_EPOLLIN | CGateway_EPOLLOUT | CGateway_EPOLLRDHUP | CGateway_EPOLLET
}

/// One epoll event loop, run by one thread. Owns the handlers registered with it, coarse timers (deadlines are
/// checked in a sweep, at most every `tickMillis`), and a queue of tasks other threads hand it.
public final class EventLoop: @unchecked Sendable {
    private struct Slot {
        var handler: LoopHandler?
        var generation: UInt32
    }

    public let index: Int
    private let epfd: Int32
    private let wakeFD: Int32
    private var slots: [Slot] = []
    private var registeredCount = 0
    private var running = false
    /// The monotonic time of the current wake-up, in milliseconds: cheap "now" for deadlines.
    public private(set) var now: UInt64 = MonotonicClock.nowMillis()
    private var nextSweep: UInt64 = 0
    private let tickMillis: UInt64 = 100
    /// Tasks handed over by other threads, and whether the loop still takes them (false once `run()` returns).
    private let tasks = AnnotatedMutex<(queue: [@Sendable () -> Void], open: Bool)>(([], true))
    /// Called after each batch of events (flushes buffered logs and similar per-iteration work).
    public var afterIteration: (() -> Void)?

    public init(index: Int) throws(PosixError) {
        self.index = index
        epfd = CGateway_epollCreate()
        guard epfd >= 0 else { throw PosixError("epoll_create1") }
        wakeFD = CGateway_eventfd()
        guard wakeFD >= 0 else { close(epfd); throw PosixError("eventfd") }
        _ = CGateway_epollAdd(epfd, wakeFD, CGateway_EPOLLIN, UInt64.max)
    }

    deinit {
        close(wakeFD)
        close(epfd)
    }

    /// Registers `fd` for `events`; the handler is retained until `deregister`.
    public func register(fd: Int32, events: UInt32, handler: LoopHandler) throws(PosixError) {
        let i = Int(fd)
        if i >= slots.count {
            slots.append(contentsOf: repeatElement(Slot(handler: nil, generation: 0), count: max(i + 1 - slots.count, 64)))
        }
        slots[i].generation &+= 1
        slots[i].handler = handler
        let token = UInt64(slots[i].generation) << 32 | UInt64(UInt32(bitPattern: fd))
        guard CGateway_epollAdd(epfd, fd, events, token) == 0 else {
            slots[i].handler = nil
            throw PosixError("epoll_ctl(ADD)")
        }
        registeredCount += 1
    }

    /// Forgets `fd` (call before closing it). Events already fetched for it are dropped.
    public func deregister(fd: Int32) {
        let i = Int(fd)
        guard i < slots.count, slots[i].handler != nil else { return }
        _ = CGateway_epollDel(epfd, fd)
        slots[i].handler = nil
        slots[i].generation &+= 1
        registeredCount -= 1
    }

    /// Number of registered descriptors (listeners and connections).
    public var handlerCount: Int { registeredCount }

    /// Asks for `onTimeout` no later than `deadline` (monotonic ms); handlers call this when they set an earlier one.
    @inline(__always) public func scheduleSweep(by deadline: UInt64) {
        if deadline < nextSweep { nextSweep = deadline }
    }

    /// Runs `task` on this loop's thread soon. Safe from any thread. A loop that has stopped running drops the
    /// task (nothing would ever run it, and keeping it would keep what it captures — often this loop's owner).
    public func execute(_ task: @escaping @Sendable () -> Void) {
        // Only the first task of a burst wakes the loop: the loop takes the whole queue after each wake-up, so
        // later tasks ride along (one eventfd write per burst, not per task).
        let wasEmpty = tasks.withLock { state -> Bool in
            guard state.open else { return false }
            let empty = state.queue.isEmpty
            state.queue.append(task)
            return empty
        }
        guard wasEmpty else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Stops `run()` after the current iteration. Loop thread only.
    public func stop() { running = false }

    /// Runs until `stop()`.
    public func run() {
        running = true
        tasks.withLock { $0.open = true }
        defer { closeTasks() }
        let maxEvents = 256
        let tokens = UnsafeMutablePointer<UInt64>.allocate(capacity: maxEvents)
        let events = UnsafeMutablePointer<UInt32>.allocate(capacity: maxEvents)
        defer { tokens.deallocate(); events.deallocate() }
        now = MonotonicClock.nowMillis()
        nextSweep = now + tickMillis
        while running {
            let timeout = nextSweep > now ? Int32(min(nextSweep - now, 1000)) : 0
            let n = CGateway_epollWait(epfd, tokens, events, Int32(maxEvents), timeout)
            now = MonotonicClock.nowMillis()
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            for k in 0..<Int(n) {
                let token = tokens[k]
                if token == UInt64.max { drainTasks(); continue }
                let fd = Int(UInt32(truncatingIfNeeded: token))
                let generation = UInt32(truncatingIfNeeded: token >> 32)
                guard fd < slots.count, slots[fd].generation == generation, let handler = slots[fd].handler else { continue }
                handler.onEvents(events[k])
            }
            if now >= nextSweep { sweep() }
            afterIteration?()
        }
    }

    private func drainTasks() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
        let pending = tasks.withLock { state -> [@Sendable () -> Void] in
            let taken = state.queue
            state.queue.removeAll(keepingCapacity: true)
            return taken
        }
        for task in pending { task() }
    }

    /// After the last iteration: refuses further tasks and releases those that arrived too late to run (e.g. a
    /// shutdown step sent to every loop while this one was already finishing).
    private func closeTasks() {
        let late = tasks.withLock { state -> [@Sendable () -> Void] in
            state.open = false
            let taken = state.queue
            state.queue = []
            return taken
        }
        // Released here, outside the lock: releasing a task may run deinitializers.
        withExtendedLifetime(late) {}
    }

    /// Fires due deadlines and finds the next one.
    private func sweep() {
        var next = now + 1000
        var i = 0
        while i < slots.count {
            if let handler = slots[i].handler {
                let d = handler.deadline
                if d != 0 {
                    if d <= now {
                        handler.onTimeout(now: now)
                        let again = handler.deadline
                        if again != 0 && again > now && again < next { next = again }
                    } else if d < next {
                        next = d
                    }
                }
            }
            i += 1
        }
        nextSweep = max(next, now + 1)
    }
}
