internal import COpenSSL

/// An RSA public key for RS256 (RSASSA-PKCS1-v1_5 with SHA-256) verification.
///
/// Immutable and safe to share between threads: the `EVP_PKEY` is reference counted by OpenSSL and only read after
/// construction. Verification is prepared once per key — a verify context with PKCS#1 v1.5 padding and SHA-256 set,
/// and SHA-256 fetched once per process — and each verification duplicates that context (`EVP_PKEY_CTX_dup`)
/// instead of building one: OpenSSL 3 looks up the provider's algorithms on every init, which cost more than the
/// RSA operation's own overhead on the request path.
///
/// Policy, enforced by every initialiser: a plain RSA key (not RSA-PSS), modulus of 2048…8192 bits, odd; public
/// exponent odd, at least 3 and at most 64 bits.
public final class RSAPublicKey: @unchecked Sendable {
    /// Smaller moduli are factorable in practice or close to it; no issuer we accept uses them.
    public static let minimumBits = 2048
    /// Larger moduli are legal RSA but make each verification (on the request path) needlessly expensive, so an
    /// attacker-influenced key set could turn them into a CPU sink.
    public static let maximumBits = 8192

    let pkey: OpaquePointer
    /// The prepared verification (`PreparedVerify`); nil when OpenSSL could not prepare it: each verification then
    /// builds its own context (the path used before).
    private let prepared: PreparedVerify?
    /// Modulus size in bits.
    public let bits: Int
    /// Modulus size in bytes: an RS256 signature has exactly this length.
    public let signatureLength: Int

    /// Takes ownership of `pkey` (freed in `deinit`, also when a convenience initialiser throws afterwards).
    private init(owning pkey: OpaquePointer) {
        self.pkey = pkey
        bits = Int(EVP_PKEY_get_bits(pkey))
        signatureLength = Int(EVP_PKEY_get_size(pkey))
        prepared = PreparedVerify(pkey, rsaPKCS1Padding: true)
    }

    deinit { EVP_PKEY_free(pkey) }

    /// A key from its modulus and public exponent, big-endian unsigned (as in a JWK's `n` and `e`).
    /// Leading zero bytes are ignored.
    public convenience init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
        let n = modulus.drop { $0 == 0 }, e = exponent.drop { $0 == 0 }
        let nBits = n.isEmpty ? 0 : n.count * 8 - n.first!.leadingZeroBitCount
        guard nBits >= Self.minimumBits else { throw CryptoError(policy: "RSA modulus of \(nBits) bits is below \(Self.minimumBits)") }
        guard nBits <= Self.maximumBits else { throw CryptoError(policy: "RSA modulus of \(nBits) bits is above \(Self.maximumBits)") }
        guard n.last! & 1 == 1 else { throw CryptoError(policy: "RSA modulus is even") }
        // e = 1 makes "verification" the identity; an even e is not a valid RSA exponent. Cap it at 64 bits as
        // OpenSSL does for large moduli, so no key makes the public operation slow.
        guard let eLast = e.last, eLast & 1 == 1, e.count <= 8, !(e.count == 1 && eLast < 3) else {
            throw CryptoError(policy: "RSA public exponent must be odd, at least 3 and at most 64 bits")
        }
        guard let key = Self.build(modulus: Array(n), exponent: Array(e)) else {
            throw CryptoError(openSSL: "building RSA public key from n and e")
        }
        self.init(owning: key.take())
        try checkPolicy()
    }

    /// A key from SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
    public convenience init(pem: String) throws(CryptoError) {
        guard let key = EVPKeyIO.readPublicPEM(pem) else { throw CryptoError(openSSL: "reading public key PEM") }
        self.init(owning: key.take())
        try checkPolicy()
    }

    /// SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`), as `init(pem:)` reads it.
    public func pem() -> String {
        // Writing a valid in-memory key to a memory BIO fails only when allocation fails.
        guard let pem = EVPKeyIO.writePublicPEM(pkey) else { fatalError(CryptoError(openSSL: "writing public key PEM").description) }
        return pem
    }

    /// A public-only copy of a private key's public half: the private material is not shared with the verifier.
    convenience init(publicHalfOf pkey: OpaquePointer) throws(CryptoError) {
        guard let n = EVPKeyIO.bigEndianParameter(pkey, shim_OSSL_PKEY_PARAM_RSA_N()),
              let e = EVPKeyIO.bigEndianParameter(pkey, shim_OSSL_PKEY_PARAM_RSA_E()) else {
            throw CryptoError(openSSL: "reading RSA n and e")
        }
        try self.init(modulus: n, exponent: e)
    }

    private func checkPolicy() throws(CryptoError) {
        guard EVPKeyIO.isRSA(pkey) else { throw CryptoError(policy: "key is not a plain RSA key") }
        guard bits >= Self.minimumBits, bits <= Self.maximumBits else {
            throw CryptoError(policy: "RSA modulus of \(bits) bits is outside \(Self.minimumBits)…\(Self.maximumBits)")
        }
        guard let e = EVPKeyIO.bigEndianParameter(pkey, shim_OSSL_PKEY_PARAM_RSA_E()), let last = e.last, last & 1 == 1,
              e.count <= 8, !(e.count == 1 && last < 3) else {
            throw CryptoError(policy: "RSA public exponent must be odd, at least 3 and at most 64 bits")
        }
    }

    /// EVP_PKEY_fromdata with n and e: the OpenSSL 3 way to build a key from its numbers.
    private static func build(modulus: [UInt8], exponent: [UInt8]) -> OpenSSLOwnedKey? {
        guard let nBN = OpenSSLOwned.bignum(BN_bin2bn(modulus, Int32(modulus.count), nil)),
              let eBN = OpenSSLOwned.bignum(BN_bin2bn(exponent, Int32(exponent.count), nil)),
              let builder = OpenSSLOwned.paramBuilder(),
              OSSL_PARAM_BLD_push_BN(builder.raw, shim_OSSL_PKEY_PARAM_RSA_N(), nBN.raw) == 1,
              OSSL_PARAM_BLD_push_BN(builder.raw, shim_OSSL_PKEY_PARAM_RSA_E(), eBN.raw) == 1,
              let params = OpenSSLOwnedParams(OSSL_PARAM_BLD_to_param(builder.raw)),
              let ctx = OpenSSLOwned.pkeyContext(EVP_PKEY_CTX_new_from_name(nil, "RSA", nil)),
              EVP_PKEY_fromdata_init(ctx.raw) == 1 else { return nil }
        var out: OpaquePointer? = nil
        guard EVP_PKEY_fromdata(ctx.raw, &out, shim_EVP_PKEY_PUBLIC_KEY(), params.raw) == 1 else {
            EVP_PKEY_free(out)
            return nil
        }
        return OpenSSLOwnedKey(out)
    }

    /// Verifies an RSASSA-PKCS1-v1_5 SHA-256 signature over `message`. Runs on the request path.
    public func verifyRS256(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        // A PKCS#1 v1.5 signature is exactly the modulus length; refuse anything else before touching OpenSSL.
        guard signature.count == signatureLength, let sig = signature.baseAddress else { return false }
        if let prepared { return prepared.verify(signature: signature, message: message) }
        guard let ctx = OpenSSLOwned.mdContext() else { return false }
        guard EVP_DigestVerifyInit(ctx.raw, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            return false
        }
        // Only 1 is success: EVP_DigestVerify returns 0 for a bad signature and a negative value for an error,
        // and treating "non-zero" as success is a classic forgery bug.
        let result = EVP_DigestVerify(ctx.raw, sig.assumingMemoryBound(to: UInt8.self), signature.count,
                                      message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count)
        // A failed verify leaves entries on the thread's error queue; clear them so they neither pile up nor
        // confuse the next OpenSSL call on this thread.
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    /// Array convenience for `verifyRS256(signature:message:)`.
    public func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
        signature.withUnsafeBytes { s in message.withUnsafeBytes { m in verifyRS256(signature: s, message: m) } }
    }
}
