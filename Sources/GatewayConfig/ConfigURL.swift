import Foundation
/// A URL as far as the configuration needs one: `scheme://host[:port][/path][?query]`.
///
/// Deliberately small and strict (no Foundation `URL` leniency): the result decides where the gateway sends
/// traffic and fetches keys from, so anything unusual is rejected rather than guessed.
struct ConfigURL: Sendable, Equatable {
    var scheme: String
    /// Host without brackets, lower-cased.
    var host: String
    var port: UInt16?
    /// Path as written, possibly empty; never includes the query.
    var path: String
    var query: String?
    var hasUserInfo: Bool

    /// Parses `text`; nil when it is not `scheme://authority…` with a valid host and port.
    init?(_ text: String) {
        guard let separator = text.range(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound]
        guard !scheme.isEmpty, scheme.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) }) else {
            return nil
        }
        self.scheme = scheme.lowercased()
        var rest = text[separator.upperBound...]
        if rest.contains("#") || rest.contains(" ") { return nil }
        if let question = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: question)...])
            rest = rest[..<question]
        } else {
            query = nil
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        path = String(rest[authorityEnd...])
        hasUserInfo = authority.contains("@")
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }

        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            let inner = authority[authority.index(after: authority.startIndex)..<close]
            guard ConfigValue.isIPv6(inner) else { return nil }
            host = inner.lowercased()
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else {
            var hostPart = authority
            if let colon = authority.lastIndex(of: ":") {
                hostPart = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            }
            guard ConfigValue.isHostName(hostPart) else { return nil }
            host = hostPart.lowercased()
        }
        if let portText {
            guard portText.count <= 5, let value = ConfigValue.decimal(portText), value >= 1, value <= 65_535 else {
                return nil
            }
            port = UInt16(value)
        } else {
            port = nil
        }
    }
}
