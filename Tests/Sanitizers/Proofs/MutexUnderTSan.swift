// Does ThreadSanitizer see a contended Synchronization.Mutex? (Why GatewayCore has `AnnotatedMutex`.)
//
//   swiftc -sanitize=thread -g Tests/Sanitizers/Proofs/MutexUnderTSan.swift -o /tmp/mutex-tsan
//   /tmp/mutex-tsan mutex       # Synchronization.Mutex:                      a "Swift access race" report, exit 66
//   /tmp/mutex-tsan pthread     # the same under a pthread_mutex_t:           clean
//   /tmp/mutex-tsan annotated   # Mutex + __tsan_acquire/__tsan_release:      clean (what AnnotatedMutex does)
//   /tmp/mutex-tsan annotated-racy   # the same, but the second thread skips the lock: reported (a real race)
//
// Two threads each add 1 to a plain Int 200,000 times inside the lock. Every variant prints the exact total
// (400000): the lock does exclude. In "mutex" ThreadSanitizer still reports a race between two critical sections,
// because the contended path runs in libswiftSynchronization.so, which is not instrumented: `_lockSlow` spins with
// its own `lock cmpxchg`, then calls `syscall(SYS_futex, FUTEX_LOCK_PI_PRIVATE)`, and `_unlockSlow` calls
// `syscall(SYS_futex, FUTEX_UNLOCK_PI_PRIVATE)` (see `objdump -d libswiftSynchronization.so`); the ThreadSanitizer
// runtime intercepts neither `syscall` nor futex. Only the uncontended compare-and-swap is inlined into our code.
// Adding the missing edge by hand ("annotated") removes the report, so it was that edge and nothing else; and the
// annotations hide no real race ("annotated-racy": an access outside the lock is still reported).
// scripts/sanitize.sh builds and runs this (SANITIZE_PROOFS=0 skips it) and says so if the outcome ever changes.
import Glibc
import Synchronization

@_silgen_name("__tsan_acquire") func tsanAcquire(_ address: UnsafeMutableRawPointer)
@_silgen_name("__tsan_release") func tsanRelease(_ address: UnsafeMutableRawPointer)

final class Shared: @unchecked Sendable {
    let mutex = Mutex<Int>(0)
    var plain = 0   // guarded by `pmutex` ("pthread"), or by `mutex` ("annotated-racy", where one thread cheats)
    let pmutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Only an address for the annotations (AnnotatedMutex uses the mutex's own address).
    let token = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
    init() { pthread_mutex_init(pmutex, nil) }
}

let variant = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "mutex"
let iterations = 200_000
let shared = Shared()

final class Body { let run: () -> Void; init(_ run: @escaping () -> Void) { self.run = run } }

func startThread(_ run: @escaping () -> Void) -> pthread_t {
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Body(run)).toOpaque()
    pthread_create(&thread, nil, { Unmanaged<Body>.fromOpaque($0!).takeRetainedValue().run(); return nil }, box)
    return thread
}

func work(thread: Int) {
    for _ in 0..<iterations {
        switch variant {
        case "annotated-racy" where thread == 1:
            shared.plain += 1
        case "annotated-racy":
            shared.mutex.withLock { _ in
                tsanAcquire(shared.token)
                shared.plain += 1
                tsanRelease(shared.token)
            }
        case "pthread":
            pthread_mutex_lock(shared.pmutex)
            shared.plain += 1
            pthread_mutex_unlock(shared.pmutex)
        case "annotated":
            shared.mutex.withLock { value in
                tsanAcquire(shared.token)
                value += 1
                tsanRelease(shared.token)
            }
        default:
            shared.mutex.withLock { $0 += 1 }
        }
    }
}

let threads = (0..<2).map { index in startThread { work(thread: index) } }
for thread in threads { pthread_join(thread, nil) }
let total = variant == "mutex" || variant == "annotated" ? shared.mutex.withLock { $0 } : shared.plain
print("\(variant): total \(total), expected \(2 * iterations)")
exit(total == 2 * iterations ? 0 : 1)
