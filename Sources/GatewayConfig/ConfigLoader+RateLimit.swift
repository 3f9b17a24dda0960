/// `rate_limit` on routes and `registration_rate_limit` on verifiers with registration endpoints.
extension ConfigLoader {
    /// `{key: client_address, rate: 20/s, burst: 40}`; `keys`: whether `key` may be given (routes). nil for an
    /// invalid value (reported) and for `rate: 0` when `allowsOff` (turned off).
    static func decodeRateLimit(_ map: MappingReader, keys: Bool, allowsOff: Bool) -> (config: RateLimitConfig?, valid: Bool) {
        map.rejectUnknownKeys(allowed: keys ? ["key", "rate", "burst"] : ["rate", "burst"])
        let key = keys ? map.oneOf("key", [RateLimitKey.clientAddress, .appID, .keyID]) : nil
        guard let text = map.string("rate", required: true) else { return (nil, false) }
        guard let perSecond = parseRate(text) else {
            map.report("invalid rate \"\(text)\" (use 20/s, 600/m or 1000/h\(allowsOff ? ", or 0 to turn it off" : ""))", key: "rate")
            return (nil, false)
        }
        if perSecond == 0 {
            guard allowsOff else {
                map.report("must be greater than 0", key: "rate")
                return (nil, false)
            }
            return (nil, true)
        }
        let burst = map.int("burst", min: 1, max: 1_000_000)
        if map.contains("burst") && burst == nil { return (nil, false) }
        var config = RateLimitConfig(ratePerSecond: perSecond, burst: burst ?? max(1, Int(perSecond.rounded(.up))))
        if let key { config.key = key }
        return (config, true)
    }

    /// `N/s`, `N/m`, `N/h` (N a positive integer, at most 1 000 000) as tokens per second; `0` as 0.
    static func parseRate(_ text: String) -> Double? {
        if text == "0" { return 0 }
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let n = ConfigValue.decimal(parts[0]), n > 0, n <= 1_000_000 else { return nil }
        switch parts[1] {
        case "s": return Double(n)
        case "m": return Double(n) / 60
        case "h": return Double(n) / 3600
        default: return nil
        }
    }

    /// A verifier's `registration_rate_limit`: the default when absent.
    static func registrationRateLimit(_ map: MappingReader) -> RateLimitConfig?? {
        guard map.contains("registration_rate_limit") else { return .some(.registrationDefault) }
        guard let nested = map.mapping("registration_rate_limit") else { return nil }
        let decoded = decodeRateLimit(nested, keys: false, allowsOff: true)
        return decoded.valid ? .some(decoded.config) : nil
    }
}
