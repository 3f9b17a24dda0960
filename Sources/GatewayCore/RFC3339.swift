/// RFC 3339 timestamps (`appattest --at`, certificate validity in CLI output, App Attest receipt times), without the C
/// library's time-zone state: the civil-date arithmetic is Howard Hinnant's `days_from_civil` and its inverse.
public enum RFC3339 {
    /// Unix seconds of `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`T`/`Z` in either case); the fraction is
    /// dropped. nil for anything else, including impossible dates and leap seconds.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ at: Int, _ count: Int) -> Int64? {
            guard at + count <= b.count else { return nil }
            var value: Int64 = 0
            for c in b[at..<at + count] {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(c - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ at: Int, _ allowed: String) -> Bool { at < b.count && allowed.utf8.contains(b[at]) }
        guard let year = number(0, 4), byte(4, "-"), let month = number(5, 2), byte(7, "-"), let day = number(8, 2),
              byte(10, "Tt"), let hour = number(11, 2), byte(13, ":"), let minute = number(14, 2), byte(16, ":"),
              let second = number(17, 2) else { return nil }
        var i = 19
        if byte(i, ".") {
            i += 1
            let start = i
            while number(i, 1) != nil { i += 1 }
            guard i > start else { return nil }
        }
        var offset: Int64 = 0
        if byte(i, "Zz") {
            i += 1
        } else if byte(i, "+-"), let h = number(i + 1, 2), byte(i + 3, ":"), let m = number(i + 4, 2), h < 24, m < 60 {
            offset = (b[i] == UInt8(ascii: "-") ? -1 : 1) * (h * 3600 + m * 60)
            i += 6
        } else {
            return nil
        }
        guard i == b.count, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 60 else { return nil }
        return days(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second - offset
    }

    /// `unixSeconds` as `YYYY-MM-DDTHH:MM:SSZ`.
    public static func format(_ unixSeconds: Int64) -> String {
        let (dayNumber, secondOfDay) = floorDivision(unixSeconds, 86_400)
        let (year, month, day) = civil(days: dayNumber)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):"
            + "\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2))Z"
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    private static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivision(y, 400).quotient
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01.
    private static func civil(days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = floorDivision(z, 146_097).quotient
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func floorDivision(_ a: Int64, _ b: Int64) -> (quotient: Int64, remainder: Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }
}
