public import GatewayCrypto
extension RSAPrivateKey {
    /// The public half as a JWK (RFC 7517/7518) for the dev issuer's key set and tests:
    /// `{"kty":"RSA","kid":…,"use":"sig","alg":"RS256","n":…,"e":…}`. Never contains private material.
    public func jwk(kid: String) -> String {
        JSONEncoding.encode(jwkValue(kid: kid))
    }

    /// The same JWK as a `JSONValue`, e.g. to assemble `{"keys":[…]}`.
    public func jwkValue(kid: String) -> JSONValue {
        [
            "kty": "RSA",
            "kid": .string(kid),
            "use": "sig",
            "alg": "RS256",
            "n": .string(Base64URL.encode(modulus)),
            "e": .string(Base64URL.encode(exponent)),
        ]
    }
}
