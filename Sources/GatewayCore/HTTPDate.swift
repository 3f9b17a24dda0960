#if canImport(Glibc)
import Glibc
#endif

/// The `Date` field value (RFC 9110 §5.6.7 IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), formatted at most once a
/// second per owner: every response the gateway makes itself carries one (apps correct their clock from it).
/// Loop-confined.
public final class HTTPDate {
    /// Always 29 bytes.
    public private(set) var bytes: [UInt8] = Array(repeating: 0, count: 29)
    private var second: Int64 = -1

    public init() {}

    /// The value for `unixSeconds`, reformatted only when the second changed.
    public func value(at unixSeconds: Int64) -> [UInt8] {
        if unixSeconds != second {
            second = unixSeconds
            bytes = Self.format(unixSeconds)
        }
        return bytes
    }

    static let days: [StaticString] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let months: [StaticString] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    public static func format(_ unixSeconds: Int64) -> [UInt8] {
        var t = time_t(unixSeconds)
        var tm = tm()
        gmtime_r(&t, &tm)
        var out: [UInt8] = []
        out.reserveCapacity(29)
        func put(_ s: StaticString) { out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount)) }
        func two(_ v: Int32) { out.append(UInt8(48 + v / 10)); out.append(UInt8(48 + v % 10)) }
        put(days[Int(tm.tm_wday)])
        put(", ")
        two(tm.tm_mday)
        out.append(32)
        put(months[Int(tm.tm_mon)])
        out.append(32)
        let year = tm.tm_year + 1900
        two(year / 100)
        two(year % 100)
        out.append(32)
        two(tm.tm_hour)
        out.append(58)
        two(tm.tm_min)
        out.append(58)
        two(tm.tm_sec)
        put(" GMT")
        return out
    }
}
