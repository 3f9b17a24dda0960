public import GatewayCrypto
/// The one signature algorithm the gateway accepts: RS256, pinned.
///
/// The token's own `alg` never chooses how it is verified. Anything but exactly "RS256" (none, HS256, RS512,
/// ES256, "rs256", a missing or non-string alg) is refused, so "alg confusion" attacks — `none`, or HS256 with the
/// RSA public key used as the HMAC secret — have no code path that could accept them.
public enum JWSAlgorithm {
    /// Whether the header's `alg` is exactly the string "RS256".
    public static func isRS256(_ jws: UnverifiedJWS) -> Bool {
        guard let alg = jws.algorithm else { return false }
        // Byte comparison: Swift's `==` on String uses canonical equivalence, which must play no part in
        // choosing an algorithm.
        return alg.utf8.elementsEqual("RS256".utf8)
    }

    /// Whether the header names critical extensions (RFC 7515 §4.1.11). The gateway understands none, and the RFC
    /// requires rejecting a token whose `crit` lists an extension the recipient does not process — e.g. RFC 7797's
    /// `b64: false`, which changes what the signature covers.
    public static func hasCriticalExtensions(_ jws: UnverifiedJWS) -> Bool {
        jws.header["crit"] != nil
    }
}

extension UnverifiedJWS {
    /// True only when `alg` is exactly "RS256", no `crit` header is present, and the signature verifies over
    /// `signingInput` with `key`. Header fields that name keys (`jwk`, `jku`, `x5u`, `x5c`) are ignored: the caller
    /// picks `key` from its own trusted key set.
    public func verifiesRS256(with key: RSAPublicKey) -> Bool {
        guard JWSAlgorithm.isRS256(self), !JWSAlgorithm.hasCriticalExtensions(self) else { return false }
        return key.verifyRS256(signature: signature, message: signingInput)
    }
}
