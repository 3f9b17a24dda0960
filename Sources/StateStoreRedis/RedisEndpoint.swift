import StateStore

/// Where and how to reach Redis, parsed from `state.url`: `redis[s]://[user:password@]host:port[/db]`.
///
/// A password alone (`redis://:secret@host:6379`) authenticates as the default user (`AUTH password`); user and
/// password together use ACL auth (`AUTH user password`). User and password may be percent-encoded. `rediss://`
/// is Redis over TLS (the port still defaults to 6379: Redis has no standard TLS port). `description` never
/// contains the password.
struct RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    var host: String
    var port: Int32
    var user: String?
    var password: String?
    var database: Int
    /// `rediss://`: TLS.
    var tls: Bool

    var description: String { "\(tls ? "rediss" : "redis")://\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)" }

    init(host: String, port: Int32, user: String?, password: String?, database: Int, tls: Bool = false) {
        self.tls = tls
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
    }

    /// Parses `url`; a malformed URL is the configuration's fault, hence `.invalid`.
    init(parsing url: String) throws(StateStoreError) {
        func invalid(_ why: String) -> StateStoreError { StateStoreError(.invalid, "state.url: \(why)") }
        // The scheme is case-insensitive (RFC 3986), as the configuration check takes it.
        let head = url.prefix(9).lowercased()
        tls = head.hasPrefix("rediss://")
        let scheme = tls ? "rediss://" : "redis://"
        guard head.hasPrefix(scheme) else { throw invalid("must start with redis:// or rediss://") }
        var rest = Substring(url.dropFirst(scheme.count))

        // Credentials: everything before the last "@" (a password may itself contain "@" only percent-encoded,
        // but splitting at the last one is the forgiving choice).
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = credentials.firstIndex(of: ":") else {
                throw invalid("credentials must be user:password or :password")
            }
            let user = try Self.percentDecoded(credentials[..<colon], invalid("bad percent-encoding in user"))
            let password = try Self.percentDecoded(credentials[credentials.index(after: colon)...],
                                                   invalid("bad percent-encoding in password"))
            guard !password.isEmpty else { throw invalid("empty password") }
            self.user = user.isEmpty ? nil : user
            self.password = password
        } else {
            user = nil
            password = nil
        }

        // Database: an optional "/n" suffix.
        database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard db.allSatisfy(\.isASCII), let n = Int(db), n >= 0, n < 1 << 16 else {
                    throw invalid("database must be a non-negative integer")
                }
                database = n
            }
        }

        // Host and port; an IPv6 literal comes in brackets.
        var hostPart = rest
        port = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unterminated IPv6 literal") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected :port after IPv6 literal") }
                port = try Self.port(after.dropFirst(), invalid("port must be 1-65535"))
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            port = try Self.port(rest[rest.index(after: colon)...], invalid("port must be 1-65535"))
        }
        guard !hostPart.isEmpty else { throw invalid("missing host") }
        guard !hostPart.contains(where: { $0 == "?" || $0 == "#" || $0.isWhitespace }) else {
            throw invalid("unexpected characters in host")
        }
        host = String(hostPart)
    }

    private static func port(_ s: Substring, _ error: StateStoreError) throws(StateStoreError) -> Int32 {
        guard s.allSatisfy(\.isASCII), let p = Int32(s), (1...65535).contains(p) else { throw error }
        return p
    }

    /// Decodes `%XX` escapes; any other byte passes through.
    private static func percentDecoded(_ s: Substring, _ error: StateStoreError) throws(StateStoreError) -> String {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == UInt8(ascii: "%") else { out.append(b); continue }
            guard bytes.count >= 2, let hi = hexValue(bytes.removeFirst()), let lo = hexValue(bytes.removeFirst())
            else { throw error }
            out.append(hi << 4 | lo)
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
