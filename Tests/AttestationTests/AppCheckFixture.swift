import Attestation
import GatewayCrypto
import JOSE
import KeySetCache

/// A verifier wired to a key set held in memory, with keys generated at test time, and a token minter.
final class AppCheckFixture: @unchecked Sendable {
    static let projectNumber = "123456789012"
    static let appID = "1:123456789012:ios:abc"
    /// One key for the whole test run: RSA key generation is the slow part.
    static let sharedKey: RSAPrivateKey = try! RSAPrivateKey.generate(bits: 2048)
    static let otherKey: RSAPrivateKey = try! RSAPrivateKey.generate(bits: 2048)

    let key = AppCheckFixture.sharedKey
    let kid = "k1"
    let now: Int64 = 1_800_000_000
    let keys: KeySetCache<JWKS>
    let verifier: AppCheckVerifier

    init(appIDs: [String]? = nil, projectID: String? = "demo", jwks: (@Sendable () -> String)? = nil, load: Bool = true) {
        let kid = self.kid
        let key = self.key
        let document = jwks ?? { "{\"keys\":[" + key.jwk(kid: kid) + "]}" }
        keys = KeySetCache<JWKS>(
            policy: .init(maxAgeSeconds: 3600), clock: { 1_800_000_000 },
            fetch: { KeySetFetch(body: Array(document().utf8), maxAgeSeconds: nil) },
            parse: { try JWKS.parse($0) }, countKeys: { $0.keys.count })
        if load { keys.refreshIfDue(force: true) }
        let policy = AppCheckPolicy(projectNumber: Self.projectNumber, projectID: projectID, appIDs: appIDs, clockSkewSeconds: 60)
        verifier = AppCheckVerifier(name: "firebase", policy: policy, headerName: "X-Firebase-AppCheck", keys: keys)
    }

    /// Claims as Firebase issues them, with `changes` applied (a nil value removes a claim).
    func claims(_ changes: [String: JSONValue?] = [:]) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("sub", .string(Self.appID)),
            ("aud", ["projects/123456789012", "projects/demo"]),
            ("provider", "debug"),
            ("iss", .string("https://firebaseappcheck.googleapis.com/" + Self.projectNumber)),
            ("exp", .number(JSONNumber(now + 3600))),
            ("iat", .number(JSONNumber(now - 10))),
            ("jti", "abc"),
        ]
        for (k, v) in changes {
            members.removeAll { $0.0 == k }
            if let v { members.append((k, v)) }
        }
        return .object(JSONObject(members))
    }

    func token(header: JSONValue? = nil, claims: JSONValue? = nil, key: RSAPrivateKey? = nil) -> String {
        try! JWSSigner.signRS256(header: header ?? JWSSigner.defaultHeader(kid: kid), claims: claims ?? self.claims(),
                                 key: key ?? self.key)
    }

    func verify(_ token: String, at time: Int64? = nil, cache: VerifiedTokenCache? = nil) -> AppCheckOutcome {
        Array(token.utf8).withUnsafeBytes { verifier.verify(token: $0, now: time ?? now, cache: cache) }
    }
}
