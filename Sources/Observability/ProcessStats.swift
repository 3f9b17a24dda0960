#if canImport(Glibc)
import Glibc
#endif
import GatewayCore

/// The process families Prometheus clients export everywhere (`process_*`), read from the kernel at each scrape:
/// CPU time (getrusage), resident memory (/proc/self/statm), open and allowed file descriptors (/proc/self/fd,
/// RLIMIT_NOFILE) and the start time (/proc/self/stat against the boot time in /proc/stat).
public enum ProcessStats {
    public static func render(into out: inout PrometheusText) {
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
            out.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
            out.sample("process_cpu_seconds_total", [], seconds: cpu)
        }
        if let statm = read("/proc/self/statm"), let pages = statm.split(separator: " ").dropFirst().first.flatMap({ UInt64($0) }) {
            out.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
            out.sample("process_resident_memory_bytes", [], pages &* UInt64(sysconf(Int32(_SC_PAGESIZE))))
        }
        if let fds = openFileDescriptors() {
            out.family("process_open_fds", "gauge", "Number of open file descriptors.")
            out.sample("process_open_fds", [], fds)
        }
        var limit = rlimit()
        if getrlimit(RLIMIT_NOFILE_VALUE, &limit) == 0 {
            out.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
            out.sample("process_max_fds", [], UInt64(limit.rlim_cur))
        }
        if let start = startTimeSeconds {
            out.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
            out.sample("process_start_time_seconds", [], seconds: start)
        }
        out.family("attest_gateway_build_info", "gauge", "The running build (always 1).")
        out.sample("attest_gateway_build_info", [("version", GatewayCore.version)], 1)
    }

    #if os(Linux)
    private static let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let RLIMIT_NOFILE_VALUE = RLIMIT_NOFILE
    #endif

    /// Read once: it does not change.
    static let startTimeSeconds: Double? = {
        // Field 22 of /proc/self/stat (after the parenthesised command name, which may contain spaces) is the start
        // time in clock ticks since boot; `btime` in /proc/stat is the boot time.
        guard let stat = read("/proc/self/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return nil }
        guard let boot = read("/proc/stat")?.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let btime = Double(boot.dropFirst(6)) else { return nil }
        return btime + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }()

    private static func openFileDescriptors() -> UInt64? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var n: UInt64 = 0
        while let entry = readdir(dir) {
            let first = withUnsafeBytes(of: entry.pointee.d_name) { $0.first ?? 0 }
            if first != UInt8(ascii: ".") { n += 1 }
        }
        return n > 0 ? n - 1 : 0   // less the descriptor opendir itself holds
    }

    private static func read(_ path: String) -> String? {
        SmallFile.read(path).map { String(decoding: $0, as: UTF8.self) }
    }
}
