#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import Synchronization

/// Operational messages (start-up, listeners, errors) as JSON lines on standard error — kept apart from the
/// access log on standard output. Not for the request path.
public enum Logger {
    public enum Level: String, Sendable, CaseIterable {
        case debug, info, warn, error
        var rank: Int { Level.allCases.firstIndex(of: self) ?? 0 }
    }

    private static let lock = AnnotatedMutex<Void>(())
    private static let minimum = Atomic<Int>(Level.info.rank)

    /// `--log-level`: messages below `level` are dropped (default `info`).
    public static func setMinimumLevel(_ level: Level) { minimum.store(level.rank, ordering: .relaxed) }

    public static func debug(_ m: String, _ f: KeyValuePairs<String, String> = [:], numbers: KeyValuePairs<String, Int64> = [:]) {
        log(.debug, m, f, numbers: numbers)
    }

    /// Writes `{"time":…,"level":…,"msg":…, fields…, numbers…}` to standard error: `fields` as JSON strings,
    /// `numbers` (counts, durations, sizes) as JSON numbers.
    public static func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String> = [:],
                           numbers: KeyValuePairs<String, Int64> = [:]) {
        guard level.rank >= minimum.load(ordering: .relaxed) else { return }
        let b = ByteBuffer(capacity: 256)
        var clock = WallClock()
        b.append("{\"time\":\"" as StaticString)
        clock.appendNow(to: b)
        b.append("\",\"level\":\"\(level.rawValue)\",\"msg\":")
        b.append(JSONText.quoted(message))
        for (k, v) in fields {
            b.append(",")
            b.append(JSONText.quoted(k))
            b.append(":")
            b.append(JSONText.quoted(v))
        }
        for (k, v) in numbers {
            b.append(",")
            b.append(JSONText.quoted(k))
            b.append(":\(v)")
        }
        b.append("}\n" as StaticString)
        lock.withLock { _ in
            var p = b.readable
            while p.count > 0 {
                let n = write(2, p.baseAddress, p.count)
                if n <= 0 { break }
                p = UnsafeRawBufferPointer(rebasing: p[n...])
            }
        }
    }

    public static func info(_ m: String, _ f: KeyValuePairs<String, String> = [:], numbers: KeyValuePairs<String, Int64> = [:]) {
        log(.info, m, f, numbers: numbers)
    }
    public static func warn(_ m: String, _ f: KeyValuePairs<String, String> = [:], numbers: KeyValuePairs<String, Int64> = [:]) {
        log(.warn, m, f, numbers: numbers)
    }
    public static func error(_ m: String, _ f: KeyValuePairs<String, String> = [:], numbers: KeyValuePairs<String, Int64> = [:]) {
        log(.error, m, f, numbers: numbers)
    }
}
