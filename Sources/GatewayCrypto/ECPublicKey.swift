internal import COpenSSL

/// An ECDSA P-256 public key for ES256 verification (App Attest credential keys).
///
/// Immutable and safe to share between threads: the `EVP_PKEY` is only read after construction and every
/// verification uses its own context, duplicated from the one prepared per key (`PreparedVerify`).
public final class ECPublicKey: @unchecked Sendable {
    package let pkey: OpaquePointer
    /// The 65-byte uncompressed point `04 ‖ X ‖ Y` the key was built from.
    public let uncompressedPoint: [UInt8]
    /// The prepared verification (`PreparedVerify`); nil when OpenSSL could not prepare it: each verification then
    /// builds its own context.
    private let prepared: PreparedVerify?

    /// Takes ownership of `pkey` (freed in `deinit`).
    init(owning pkey: OpaquePointer, point: [UInt8]) {
        self.pkey = pkey
        self.uncompressedPoint = point
        prepared = PreparedVerify(pkey, rsaPKCS1Padding: false)
    }

    deinit { EVP_PKEY_free(pkey) }

    /// DER SubjectPublicKeyInfo prefix for id-ecPublicKey / prime256v1 with a 66-byte BIT STRING (0 unused bits
    /// + 65-byte point). Building the SPKI ourselves and letting `d2i_PUBKEY` decode it means OpenSSL checks that
    /// the point is on the curve, which a hand-rolled key import could forget.
    static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
        0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// A key from an uncompressed P-256 point (`04 ‖ X ‖ Y`, 65 bytes); nil when it is not a point on the curve.
    public convenience init?(uncompressedP256 point: [UInt8]) {
        guard point.count == 65, point[0] == 0x04 else { return nil }
        let der = Self.spkiPrefix + point
        let raw = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key = OpenSSLOwnedKey(raw) else { ERR_clear_error(); return nil }
        guard EVP_PKEY_is_a(key.pointer, "EC") == 1 else { return nil }
        self.init(owning: key.take(), point: point)
    }

    /// Verifies a DER ECDSA signature over SHA-256(`message`) — the normal ES256 meaning, in which OpenSSL hashes
    /// `message` itself. App Attest assertions sign the 32-byte nonce *as a message*, so it is hashed once more here.
    public func verifyES256(derSignature: [UInt8], message: [UInt8]) -> Bool {
        guard !derSignature.isEmpty else { return false }
        if let prepared {
            return derSignature.withUnsafeBytes { s in message.withUnsafeBytes { m in prepared.verify(signature: s, message: m) } }
        }
        guard let ctx = OpenSSLOwned.mdContext() else { return false }
        guard EVP_DigestVerifyInit(ctx.raw, nil, EVP_sha256(), nil, pkey) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = derSignature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in
                EVP_DigestVerify(ctx.raw, s.baseAddress, s.count, m.baseAddress, m.count)
            }
        }
        // Only 1 is success: 0 is a bad signature and a negative value an error.
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    /// Verifies a DER ECDSA signature over `digest` used directly as the hash (no further hashing). Not used by
    /// the gateway: it exists so tests can prove that App Attest's nonce is *not* the signed digest.
    package func verifyPrehashed(derSignature: [UInt8], digest: [UInt8]) -> Bool {
        guard !derSignature.isEmpty, digest.count == 32,
              let ctx = OpenSSLOwned.pkeyContext(EVP_PKEY_CTX_new(pkey, nil)),
              EVP_PKEY_verify_init(ctx.raw) == 1 else {
            ERR_clear_error()
            return false
        }
        let result = derSignature.withUnsafeBufferPointer { s in
            digest.withUnsafeBufferPointer { d in EVP_PKEY_verify(ctx.raw, s.baseAddress, s.count, d.baseAddress, d.count) }
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    /// Verifies a JWS ES256 signature (`R ‖ S`, 64 bytes) over SHA-256(`message`); OpenSSL re-encodes it as DER.
    public func verifyES256(rawSignature: [UInt8], message: [UInt8]) -> Bool {
        guard rawSignature.count == 64, let sig = OpenSSLOwned(ECDSA_SIG_new(), free: { ECDSA_SIG_free($0) }) else { return false }
        let r = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = rawSignature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig.raw, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return false
        }
        var derPointer: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(sig.raw, &derPointer)
        guard length > 0, let derPointer else { return false }
        defer { CRYPTO_free(derPointer, #fileID, #line) }
        return verifyES256(derSignature: Array(UnsafeBufferPointer(start: derPointer, count: Int(length))), message: message)
    }
}
