import GatewayCore
import GatewayCrypto
import GatewayPosix
import GatewayProxy
import HTTP1
import JOSE

/// DEVELOPMENT ONLY: an App Check–shaped token issuer for trying the gateway without a device. It holds RSA keys
/// generated at start (never written anywhere), serves them as a JWKS and mints RS256 tokens with the claims
/// Firebase App Check puts in its tokens. Anyone who can reach it can mint tokens: bind it to loopback only.
///
/// - `GET /jwks` (also `/v1/jwks`): the key set, `Cache-Control: max-age=300`.
/// - `POST /token` with optional JSON `{"app_id":…,"ttl":seconds,"limited_use":bool,"expired":bool}` →
///   `{"token":…,"ttl":…}`.
/// - `POST /rotate`: a new signing key joins the set (`?retire=1`: older keys leave it).
final class DevIssuer: Sendable {
    struct Options: Sendable {
        var projectNumber = "123456789012"
        var projectID: String? = "demo-project"
        var appID = "1:123456789012:ios:0123456789abcdef"
        init() {}
    }

    private struct Keys {
        var all: [(kid: String, key: RSAPrivateKey)]
    }

    let options: Options
    private let keys: AnnotatedMutex<Keys>

    init(options: Options) throws(CryptoError) {
        self.options = options
        keys = AnnotatedMutex(Keys(all: [(Self.newKid(), try RSAPrivateKey.generate(bits: 2048))]))
    }

    private static func newKid() -> String {
        "dev-" + hexString(SecureRandom.bytes(6))
    }

    /// The JWKS document.
    func jwksJSON() -> String {
        let entries = keys.withLock { k in k.all.map { $0.key.jwk(kid: $0.kid) } }
        return "{\"keys\":[" + entries.joined(separator: ",") + "]}"
    }

    /// Adds a key and signs with it from now on; `retire` drops the older ones.
    func rotate(retire: Bool) throws(CryptoError) -> String {
        let key = try RSAPrivateKey.generate(bits: 2048)
        let kid = Self.newKid()
        keys.withLock { k in
            if retire { k.all.removeAll() }
            k.all.append((kid, key))
        }
        return kid
    }

    /// Mints a token for `appID` valid for `ttl` seconds from `now` (or one that expired an hour ago).
    func mint(appID: String?, ttl: Int64, limitedUse: Bool, expired: Bool, now: Int64) throws(CryptoError) -> String {
        let (kid, key) = keys.withLock { k in k.all[k.all.count - 1] }
        let iat = expired ? now - 7_200 : now
        let exp = expired ? now - 3_600 : now + ttl
        var audience: [JSONValue] = [.string("projects/" + options.projectNumber)]
        if let id = options.projectID { audience.append(.string("projects/" + id)) }
        var members: [(String, JSONValue)] = [
            ("sub", .string(appID ?? options.appID)),
            ("aud", .array(audience)),
            ("provider", .string("debug")),
            ("iss", .string("https://firebaseappcheck.googleapis.com/" + options.projectNumber)),
            ("exp", .number(JSONNumber(exp))),
            ("iat", .number(JSONNumber(iat))),
        ]
        if limitedUse { members.append(("jti", .string(Base64URL.encode(SecureRandom.bytes(16))))) }
        let header: JSONValue = .object(JSONObject([("alg", .string("RS256")), ("typ", .string("JWT")), ("kid", .string(kid))]))
        return try JWSSigner.signRS256(header: header, claims: .object(JSONObject(members)), key: key)
    }
}

/// Serves a `DevIssuer` over HTTP (one handler per connection).
final class DevIssuerHandler: SmallHTTPHandler {
    let issuer: DevIssuer
    private var head: HTTP1RequestHead?
    private var body: [UInt8] = []

    init(issuer: DevIssuer) { self.issuer = issuer }

    func begin(_ head: HTTP1RequestHead) {
        self.head = head
        body.removeAll(keepingCapacity: true)
    }

    func body(_ bytes: UnsafeRawBufferPointer) {
        if body.count + bytes.count <= 64 * 1024 { body.append(contentsOf: bytes) }
    }

    func end() -> String {
        guard let h = head else { return Self.json(500, "{\"error\":\"internal\"}") }
        let method = h.string(h.method)
        let target = h.string(h.target)
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        switch (method, path) {
        case ("GET", "/jwks"), ("GET", "/v1/jwks"):
            return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: public, max-age=300\r\n" +
                "Content-Length: \(issuer.jwksJSON().utf8.count)\r\n\r\n" + issuer.jwksJSON()
        case ("POST", "/token"):
            var appID: String? = nil, ttl: Int64 = 3_600, limited = false, expired = false
            if !body.isEmpty {
                guard case .object(let o)? = try? StrictJSON.parse(body) else {
                    return Self.json(400, "{\"error\":\"body must be a JSON object\"}")
                }
                if case .string(let s)? = o["app_id"] { appID = s }
                if case .number(let n)? = o["ttl"], let v = n.int64, v > 0, v <= 7 * 86_400 { ttl = v }
                if case .bool(let b)? = o["limited_use"] { limited = b }
                if case .bool(let b)? = o["expired"] { expired = b }
            }
            guard let token = try? issuer.mint(appID: appID, ttl: ttl, limitedUse: limited, expired: expired,
                                               now: WallClock.unixSeconds()) else {
                return Self.json(500, "{\"error\":\"signing failed\"}")
            }
            return Self.json(200, "{\"token\":\"\(token)\",\"ttl\":\(ttl)}")
        case ("POST", "/rotate"):
            guard let kid = try? issuer.rotate(retire: target.contains("retire=1")) else {
                return Self.json(500, "{\"error\":\"key generation failed\"}")
            }
            return Self.json(200, "{\"kid\":\"\(kid)\"}")
        default:
            return Self.json(404, "{\"error\":\"not_found\"}")
        }
    }

    static func json(_ status: Int, _ body: String) -> String {
        let phrase = status == 200 ? "OK" : status == 404 ? "Not Found" : status == 400 ? "Bad Request" : "Error"
        return "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
    }
}

extension SmallHTTPServer {
    /// The development App Check issuer on `address`.
    static func devIssuer(address: SocketAddress, issuer: DevIssuer) throws(PosixError) -> SmallHTTPServer {
        try SmallHTTPServer(address: address) { DevIssuerHandler(issuer: issuer) }
    }
}
