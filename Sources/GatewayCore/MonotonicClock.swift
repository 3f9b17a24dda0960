#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds on the monotonic clock (never jumps with wall-clock changes); used for deadlines.
public enum MonotonicClock {
    @inline(__always) public static func nowMillis() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1000 &+ UInt64(ts.tv_nsec / 1_000_000)
    }

    @inline(__always) public static func nowMicros() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000 &+ UInt64(ts.tv_nsec / 1000)
    }
}

/// Wall-clock time formatted for logs, cached per second by its owner.
public struct WallClock {
    private var cachedSecond: Int = -1
    private var cachedPrefix: [UInt8] = []

    public init() {}

    /// Unix seconds now: the clock tokens' `iat`/`exp` are written in.
    @inline(__always) public static func unixSeconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }

    /// Unix milliseconds now: the clock Play Integrity's `timestampMillis` is written in.
    @inline(__always) public static func unixMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec / 1_000_000)
    }

    /// Appends the current UTC time as RFC 3339 with milliseconds, e.g. `2026-11-29T18:37:43.123Z`.
    public mutating func appendNow(to buffer: ByteBuffer) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let second = Int(ts.tv_sec)
        if second != cachedSecond {
            var t = time_t(second)
            var tmv = tm()
            gmtime_r(&t, &tmv)
            func two(_ v: Int32) -> [UInt8] { [UInt8(48 + v / 10), UInt8(48 + v % 10)] }
            let year = Int(tmv.tm_year) + 1900
            var p: [UInt8] = Array(String(year).utf8)
            p.append(UInt8(ascii: "-")); p += two(tmv.tm_mon + 1)
            p.append(UInt8(ascii: "-")); p += two(tmv.tm_mday)
            p.append(UInt8(ascii: "T")); p += two(tmv.tm_hour)
            p.append(UInt8(ascii: ":")); p += two(tmv.tm_min)
            p.append(UInt8(ascii: ":")); p += two(tmv.tm_sec)
            p.append(UInt8(ascii: "."))
            cachedPrefix = p
            cachedSecond = second
        }
        buffer.append(cachedPrefix)
        let ms = Int(ts.tv_nsec / 1_000_000)
        buffer.append(byte: UInt8(48 + ms / 100))
        buffer.append(byte: UInt8(48 + (ms / 10) % 10))
        buffer.append(byte: UInt8(48 + ms % 10))
        buffer.append(byte: UInt8(ascii: "Z"))
    }
}
