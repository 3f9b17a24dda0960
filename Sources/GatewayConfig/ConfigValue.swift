#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Parsers for the scalar formats of `gateway.yml`; public so other modules and tests can reuse them.
public enum ConfigValue {
    /// Milliseconds from `500ms`, `30s`, `5m`, `6h` (a non-negative integer and a unit; `0s` is allowed).
    /// Returns nil for anything else, including a bare number, a fraction, spaces or an overflow.
    public static func parseDuration(_ s: String) -> Int? {
        let units: [(suffix: String, millis: Int)] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)]
        for unit in units where s.hasSuffix(unit.suffix) {
            guard let count = decimal(s.dropLast(unit.suffix.count)) else { return nil }
            let (product, overflow) = count.multipliedReportingOverflow(by: unit.millis)
            return overflow ? nil : product
        }
        return nil
    }

    /// Bytes from `512`, `64KiB`, `10MiB`, `1GiB`. Decimal units (`KB`, `MB`) are rejected on purpose: they
    /// are ambiguous between 1000 and 1024.
    public static func parseSize(_ s: String) -> Int? {
        let units: [(suffix: String, bytes: Int)] = [("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)]
        for unit in units where s.hasSuffix(unit.suffix) {
            guard let count = decimal(s.dropLast(unit.suffix.count)) else { return nil }
            let (product, overflow) = count.multipliedReportingOverflow(by: unit.bytes)
            return overflow ? nil : product
        }
        return decimal(Substring(s))
    }

    /// `127.0.0.1:8080`, `[::1]:8080`, `localhost:80`, `0.0.0.0:8080`. The port may be 0 (an ephemeral port,
    /// for tests). An IPv6 address must be in brackets; a dotted-numeric host must be a valid IPv4 address.
    public static func parseSocketAddress(_ s: String) -> SocketAddressConfig? {
        let host: Substring
        let portText: Substring
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            host = s[s.index(after: s.startIndex)..<close]
            let rest = s[s.index(after: close)...]
            guard rest.hasPrefix(":"), isIPv6(host) else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = s.lastIndex(of: ":") else { return nil }
            host = s[..<colon]
            portText = s[s.index(after: colon)...]
            guard isHostName(host) else { return nil }
        }
        guard portText.count <= 5, let port = decimal(portText), port <= 65_535 else { return nil }
        return SocketAddressConfig(host: String(host), port: UInt16(port))
    }

    // MARK: - Internal helpers shared by the loader

    /// Non-negative decimal digits only (no sign, no underscores), nil on overflow.
    static func decimal(_ s: Substring) -> Int? {
        guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(s)
    }

    static func isIPv6(_ s: Substring) -> Bool {
        var address = in6_addr()
        return !s.isEmpty && inet_pton(AF_INET6, String(s), &address) == 1
    }

    static func isIPv4(_ s: Substring) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, String(s), &address) == 1
    }

    /// A DNS name or an IPv4 address (not IPv6: that needs brackets). All-numeric dotted names must be real
    /// IPv4 addresses, so `256.0.0.1` is caught here rather than at bind time.
    static func isHostName(_ s: Substring) -> Bool {
        guard !s.isEmpty, s.count <= 253 else { return false }
        if s.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E }) { return isIPv4(s) }
        return s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E || c == 0x5F
        } && !s.hasPrefix(".") && !s.hasPrefix("-")
    }

    /// Loopback hosts: `localhost`, 127.0.0.0/8 and `::1`. Only these may use plain http for key material.
    static func isLoopback(_ host: String) -> Bool {
        let lower = host.lowercased()
        if lower == "localhost" || lower.hasSuffix(".localhost") { return true }
        if isIPv4(Substring(host)) { return host.hasPrefix("127.") }
        var address = in6_addr()
        var loopback = in6_addr()
        guard inet_pton(AF_INET6, host, &address) == 1, inet_pton(AF_INET6, "::1", &loopback) == 1 else { return false }
        return withUnsafeBytes(of: &address) { a in withUnsafeBytes(of: &loopback) { b in a.elementsEqual(b) } }
    }

    /// An RFC 9110 field name: one or more `tchar`.
    static func isHeaderName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy(isTokenChar)
    }

    /// An unreserved URI character (RFC 3986 2.3): what a query parameter name may hold unencoded.
    static func isQueryNameByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "-._~".utf8.contains(c)
        }
    }

    /// An RFC 9110 token (method names).
    static func isToken(_ s: String) -> Bool { isHeaderName(s) }

    private static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }

    /// Two socket addresses that cannot both be bound: same port and the same host, or either host a wildcard.
    /// Listeners use SO_REUSEPORT, so the kernel would not refuse a duplicate — it would split the traffic.
    static func conflicts(_ a: SocketAddressConfig, _ b: SocketAddressConfig) -> Bool {
        guard a.port == b.port, a.port != 0 else { return false }
        let wildcards: Set<String> = ["0.0.0.0", "::"]
        return a.host.lowercased() == b.host.lowercased() || wildcards.contains(a.host) || wildcards.contains(b.host)
    }
}

extension ConfigValue {
    /// `text` as 43 characters of base64url: 64 hex digits (colons allowed) are converted, standard base64's
    /// `+ /` and padding accepted; nil for anything that is not exactly 32 bytes.
    public static func sha256Digest(_ text: String) -> String? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        let hex = text.utf8.filter { $0 != UInt8(ascii: ":") }
        if hex.count == 64, let bytes = hexBytes(hex) {
            var out: [UInt8] = []
            var bits: UInt32 = 0, count = 0
            for b in bytes {
                bits = bits << 8 | UInt32(b); count += 8
                while count >= 6 { count -= 6; out.append(alphabet[Int(bits >> UInt32(count) & 63)]) }
            }
            out.append(alphabet[Int(bits << UInt32(6 - count) & 63)])
            return String(decoding: out, as: UTF8.self)
        }
        var chars = Array(text.utf8)
        if chars.count == 44, chars[43] == UInt8(ascii: "=") { chars.removeLast() }
        guard chars.count == 43 else { return nil }
        for i in chars.indices {
            if chars[i] == UInt8(ascii: "+") { chars[i] = UInt8(ascii: "-") } else if chars[i] == UInt8(ascii: "/") { chars[i] = UInt8(ascii: "_") }
        }
        // 43 characters carry 258 bits for 256: the last one's low 2 bits must be zero (one spelling per digest).
        guard chars.allSatisfy(alphabet.contains), let last = alphabet.firstIndex(of: chars[42]), last & 3 == 0 else { return nil }
        return String(decoding: chars, as: UTF8.self)
    }

    private static func hexBytes(_ digits: [UInt8]) -> [UInt8]? {
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: c - 0x30
            case 0x41...0x46: c - 0x41 + 10
            case 0x61...0x66: c - 0x61 + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i + 1 < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    /// A URL keys, verdicts or credentials travel to or from: https, or plain http to a loopback host (tests,
    /// sidecars); anywhere else plain http would let a network attacker read or substitute them.
    public static func isKeyServerURL(_ text: String) -> Bool {
        guard let url = ConfigURL(text), !url.hasUserInfo else { return false }
        return url.scheme == "https" || (url.scheme == "http" && isLoopback(url.host))
    }

    /// An Android application id: dot-separated segments of letters, digits and `_`.
    public static func isPackageName(_ text: String) -> Bool {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 255 && segments.allSatisfy { segment in
            !segment.isEmpty && segment.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
        }
    }
}
