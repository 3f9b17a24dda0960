public import GatewayCrypto
/// Mints compact JWS tokens: RS256 for the dev tools and tests (the gateway verifies App Check tokens, it never
/// issues them), ES256 for the gateway's own tokens to Apple's servers (DeviceCheck, the App Attest data server).
public enum JWSSigner {
    /// `<b64url(header)>.<b64url(claims)>.<b64url(signature)>`, with the JSON written compactly. `header` is used
    /// as given (its `alg` is not checked, so tests can mint tokens that must be refused).
    public static func signRS256(header: JSONValue, claims: JSONValue, key: RSAPrivateKey) throws(CryptoError) -> String {
        let signingInput = Base64URL.encode(Array(JSONEncoding.encode(header).utf8)) + "."
            + Base64URL.encode(Array(JSONEncoding.encode(claims).utf8))
        let signature = try key.signRS256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The default header `{"alg":"RS256","typ":"JWT","kid":kid}`.
    public static func defaultHeader(kid: String) -> JSONValue {
        ["alg": "RS256", "typ": "JWT", "kid": .string(kid)]
    }

    /// Signs `claims` under the default header for `kid`.
    public static func signRS256(claims: JSONValue, kid: String, key: RSAPrivateKey) throws(CryptoError) -> String {
        try signRS256(header: defaultHeader(kid: kid), claims: claims, key: key)
    }

    /// ES256 (RFC 7518 §3.4, the signature as `R ‖ S`) under `{"alg":"ES256","kid":kid}` — the shape Apple's
    /// DeviceCheck and App Attest servers take in their `Authorization` header.
    public static func signES256(claims: JSONValue, kid: String, key: ECPrivateKey) throws -> String {
        let header: JSONValue = ["alg": "ES256", "kid": .string(kid)]
        let signingInput = Base64URL.encode(Array(JSONEncoding.encode(header).utf8)) + "."
            + Base64URL.encode(Array(JSONEncoding.encode(claims).utf8))
        let signature = try key.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// ES256 over `payload` under `header` as given (Play Integrity's `{"alg":"ES256"}`; tests mint refused ones).
    public static func signES256(header: JSONValue, payload: [UInt8], key: ECPrivateKey) throws -> String {
        let signingInput = Base64URL.encode(Array(JSONEncoding.encode(header).utf8)) + "." + Base64URL.encode(payload)
        let signature = try key.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}
