internal import COpenSSL

/// An EC private key held in an `EVP_PKEY`, freed in `deinit` only: the `.p8` key that signs the gateway's ES256
/// tokens for Apple's servers (DeviceCheck, the App Attest data server), and in tests the simulated devices' P-256
/// keys and simulated Apple CAs' P-384 keys. Signing with one `EVP_PKEY` from several threads is safe (OpenSSL 3
/// keys are immutable after creation; each signature has its own context).
public final class ECPrivateKey: @unchecked Sendable {
    /// P-256 (App Attest credential keys, Apple's `.p8` keys), P-384 (Apple's App Attest root and intermediate).
    public enum Curve: String, Sendable {
        case p256 = "P-256"
        case p384 = "P-384"
    }

    package let pkey: OpaquePointer

    private init(owning pkey: OpaquePointer) {
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// A fresh key from OpenSSL's generator.
    public static func generate(_ curve: Curve) throws -> ECPrivateKey {
        guard let ctx = OpenSSLOwned.pkeyContext(EVP_PKEY_CTX_new_from_name(nil, "EC", nil)),
              EVP_PKEY_keygen_init(ctx.raw) == 1,
              EVP_PKEY_CTX_set_group_name(ctx.raw, curve.rawValue) == 1 else {
            throw CryptoError(openSSL: "preparing \(curve.rawValue) key generation")
        }
        var out: OpaquePointer? = nil
        guard EVP_PKEY_generate(ctx.raw, &out) == 1, let key = OpenSSLOwnedKey(out) else {
            throw CryptoError(openSSL: "generating \(curve.rawValue) key")
        }
        return ECPrivateKey(owning: key.take())
    }

    /// A key from unencrypted PEM (PKCS#8 or SEC 1); anything but an EC key is refused.
    public convenience init(pem: String) throws {
        guard let key = EVPKeyIO.readPrivatePEM(pem) else { throw CryptoError(openSSL: "reading EC private key PEM") }
        guard EVP_PKEY_is_a(key.pointer, "EC") == 1 else { throw CryptoError(policy: "private key is not an EC key") }
        self.init(owning: key.take())
    }

    /// Unencrypted PKCS#8 PEM: the secret, written only to files the simulator owns (mode 0600).
    public func pemPKCS8() throws -> String {
        guard let pem = EVPKeyIO.writePrivatePEM(pkey) else { throw CryptoError(openSSL: "writing EC private key PEM") }
        return pem
    }

    /// The public point as OpenSSL encodes it by default, uncompressed: `04 ‖ X ‖ Y` (65 bytes for P-256).
    public func uncompressedPublicPoint() throws -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 133)  // room for P-521, the largest named curve
        var length = 0
        let ok = point.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_octet_string_param(pkey, shim_OSSL_PKEY_PARAM_PUB_KEY(), $0.baseAddress, $0.count, &length)
        }
        guard ok == 1, length > 0, point[0] == 0x04 else { throw CryptoError(openSSL: "reading EC public point") }
        return Array(point.prefix(length))
    }

    /// A DER ECDSA signature over SHA-256(`message`): OpenSSL hashes `message` itself, as a device's Secure
    /// Enclave does with the App Attest nonce.
    public func signSHA256(_ message: [UInt8]) throws -> [UInt8] {
        guard let ctx = OpenSSLOwned.mdContext(), EVP_DigestSignInit(ctx.raw, nil, EVP_sha256(), nil, pkey) == 1 else {
            throw CryptoError(openSSL: "initialising ECDSA signing")
        }
        var length = 0
        let sized = message.withUnsafeBufferPointer { EVP_DigestSign(ctx.raw, nil, &length, $0.baseAddress, $0.count) }
        guard sized == 1 else { throw CryptoError(openSSL: "sizing ECDSA signature") }
        var signature = [UInt8](repeating: 0, count: length)
        let ok = message.withUnsafeBufferPointer { m in
            signature.withUnsafeMutableBufferPointer { s in EVP_DigestSign(ctx.raw, s.baseAddress, &length, m.baseAddress, m.count) }
        }
        guard ok == 1 else { throw CryptoError(openSSL: "ECDSA signing") }
        return Array(signature.prefix(length))
    }

    /// A JWS ES256 signature (RFC 7518 §3.4): the 64-byte `R ‖ S` over SHA-256(`message`), not DER. P-256 only.
    public func signES256(_ message: [UInt8]) throws -> [UInt8] {
        let der = try signSHA256(message)
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig = OpenSSLOwned(parsed, free: { ECDSA_SIG_free($0) }) else { throw CryptoError(openSSL: "reading ECDSA signature") }
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
            guard let r = ECDSA_SIG_get0_r(sig.raw), let s = ECDSA_SIG_get0_s(sig.raw), let base = o.baseAddress else { return false }
            return BN_bn2binpad(r, base, 32) == 32 && BN_bn2binpad(s, base + 32, 32) == 32
        }
        guard ok else { throw CryptoError(policy: "ES256 needs a P-256 key") }
        return out
    }
}
