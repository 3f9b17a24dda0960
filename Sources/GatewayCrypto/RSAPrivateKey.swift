internal import COpenSSL

/// An RSA private key for minting RS256 tokens (the dev issuer and tests); the gateway itself only verifies.
///
/// Immutable after construction and safe to share between threads; each signature uses its own `EVP_MD_CTX`.
public final class RSAPrivateKey: @unchecked Sendable {
    private let pkey: OpaquePointer
    /// The public half as a separate, public-only key.
    public let publicKey: RSAPublicKey

    private init(owning pkey: OpaquePointer, publicKey: RSAPublicKey) {
        self.pkey = pkey
        self.publicKey = publicKey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Adopts `key` after checking it is RSA and its public half passes `RSAPublicKey`'s policy.
    private convenience init(adopting key: consuming OpenSSLOwnedKey) throws(CryptoError) {
        guard EVPKeyIO.isRSA(key.pointer) else { throw CryptoError(policy: "key is not a plain RSA key") }
        let publicKey = try RSAPublicKey(publicHalfOf: key.pointer)
        self.init(owning: key.take(), publicKey: publicKey)
    }

    /// A fresh key with public exponent 65537. `bits` below `RSAPublicKey.minimumBits` is refused.
    public static func generate(bits: Int = 2048) throws(CryptoError) -> RSAPrivateKey {
        guard bits >= RSAPublicKey.minimumBits, bits <= RSAPublicKey.maximumBits else {
            throw CryptoError(policy: "RSA key size \(bits) is outside \(RSAPublicKey.minimumBits)…\(RSAPublicKey.maximumBits)")
        }
        guard let ctx = OpenSSLOwned.pkeyContext(EVP_PKEY_CTX_new_from_name(nil, "RSA", nil)),
              EVP_PKEY_keygen_init(ctx.raw) == 1,
              EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.raw, Int32(bits)) == 1 else {
            throw CryptoError(openSSL: "preparing RSA key generation")
        }
        var out: OpaquePointer? = nil
        guard EVP_PKEY_generate(ctx.raw, &out) == 1, let key = OpenSSLOwnedKey(out) else {
            throw CryptoError(openSSL: "generating RSA key")
        }
        return try RSAPrivateKey(adopting: key)
    }

    /// A key from PEM: PKCS#8 (`BEGIN PRIVATE KEY`) or traditional (`BEGIN RSA PRIVATE KEY`); not encrypted.
    public convenience init(pem: String) throws(CryptoError) {
        guard let key = EVPKeyIO.readPrivatePEM(pem) else { throw CryptoError(openSSL: "reading private key PEM") }
        try self.init(adopting: key)
    }

    /// Unencrypted PKCS#8 PEM. Handle with care: this is the secret.
    public func pemPKCS8() -> String {
        // Writing a valid in-memory key to a memory BIO fails only when allocation fails.
        guard let pem = EVPKeyIO.writePrivatePEM(pkey) else { fatalError(CryptoError(openSSL: "writing PKCS#8 PEM").description) }
        return pem
    }

    /// The modulus, big-endian without a leading zero.
    public var modulus: [UInt8] { EVPKeyIO.bigEndianParameter(pkey, shim_OSSL_PKEY_PARAM_RSA_N()) ?? [] }

    /// The public exponent, big-endian without a leading zero.
    public var exponent: [UInt8] { EVPKeyIO.bigEndianParameter(pkey, shim_OSSL_PKEY_PARAM_RSA_E()) ?? [] }

    /// An RSASSA-PKCS1-v1_5 SHA-256 signature over `message`, `publicKey.signatureLength` bytes long.
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let ctx = OpenSSLOwned.mdContext(),
              EVP_DigestSignInit(ctx.raw, nil, EVP_sha256(), nil, pkey) == 1 else {
            throw CryptoError(openSSL: "initialising RS256 signing")
        }
        var length = 0
        var signature = [UInt8](repeating: 0, count: publicKey.signatureLength)
        let ok = message.withUnsafeBufferPointer { m in
            signature.withUnsafeMutableBufferPointer { s in
                length = s.count
                return EVP_DigestSign(ctx.raw, s.baseAddress, &length, m.baseAddress, m.count)
            }
        }
        guard ok == 1 else { throw CryptoError(openSSL: "RS256 signing") }
        return Array(signature.prefix(length))
    }
}
