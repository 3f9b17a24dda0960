import GatewayCrypto
import JOSE

/// One 2048-bit key pair generated per test run; no key material is committed.
let issuerKey: RSAPrivateKey = try! RSAPrivateKey.generate()

/// Claims shaped like a Firebase App Check token.
let appCheckClaims: JSONValue = [
    "iss": "https://firebaseappcheck.googleapis.com/123456789",
    "sub": "1:123456789:ios:abcdef",
    "aud": ["projects/123456789", "projects/demo"],
    "iat": 1_700_000_000,
    "exp": 1_700_003_600,
]

enum TestTokens {
    /// A correctly signed RS256 token under the default header.
    static func good(kid: String = "k1") -> String {
        try! JWSSigner.signRS256(claims: appCheckClaims, kid: kid, key: issuerKey)
    }

    /// `header.payload.signature` from raw JSON texts and raw signature bytes, for forgeries.
    static func assemble(header: String, claims: String, signature: [UInt8]) -> String {
        Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + "." + Base64URL.encode(signature)
    }

    static func b64(_ text: String) -> String { Base64URL.encode(Array(text.utf8)) }

    /// HMAC-SHA256 (RFC 2104) built from SHA256Hasher, to forge HS256 tokens as an attacker would.
    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? SHA256Hasher.hash(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = SHA256Hasher.hash(k.map { $0 ^ 0x36 } + message)
        return SHA256Hasher.hash(k.map { $0 ^ 0x5C } + inner)
    }
}
