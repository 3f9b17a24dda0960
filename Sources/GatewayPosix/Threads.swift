#if canImport(Glibc)
import Glibc
#endif
public import CGatewayShims
/// Starts and joins the loop threads, and waits for signals on the main thread.
public enum Threads {
    private final class Box { let body: () -> Void; init(_ b: @escaping () -> Void) { body = b } }

    /// Starts a detached-joinable POSIX thread running `body`; returns its handle.
    public static func start(_ body: @escaping () -> Void) -> pthread_t {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            let box = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        return thread
    }

    public static func join(_ thread: pthread_t) { pthread_join(thread, nil) }

    /// Blocks SIGTERM/SIGINT/SIGHUP (to be taken with `waitForSignal`) and SIGPIPE (writes to closed sockets then
    /// fail with EPIPE instead of killing the process). Call before starting threads so they inherit the mask.
    public static func blockSignals() { _ = CGateway_blockSignals() }

    /// Waits for SIGTERM, SIGINT or SIGHUP; returns its number.
    public static func waitForSignal() -> Int32 { CGateway_waitSignal() }

    /// Pins the calling thread to `cpu` (used by benchmarks through --cpu).
    @discardableResult public static func pin(to cpu: Int) -> Bool { CGateway_pinToCPU(Int32(cpu)) == 0 }

    public static var onlineCPUs: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
