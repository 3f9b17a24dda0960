import GatewayCrypto

/// Mints compact RS256 JWS tokens. Dev tools and tests only: the gateway verifies, it never issues.
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
}
