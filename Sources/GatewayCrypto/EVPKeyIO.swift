internal import COpenSSL

/// The few `EVP_PKEY` operations the key classes need: PEM in and out, and reading big-number parameters. Package-wide
/// so GatewayTestSupport's simulated App Attest keys and certificates share them.
package enum EVPKeyIO {
    /// Runs `read` over a read-only memory BIO on `pem`'s bytes; the BIO does not copy, so it lives inside the
    /// closure that keeps the string's storage alive.
    package static func readPEM(_ pem: String, _ read: (OpaquePointer) -> OpaquePointer?) -> OpenSSLOwnedKey? {
        var pem = pem
        let raw = pem.withUTF8 { (utf8) -> OpaquePointer? in
            guard utf8.count > 0, utf8.count < Int(Int32.max) else { return nil }
            guard let bio = OpenSSLOwned.bio(BIO_new_mem_buf(utf8.baseAddress, Int32(utf8.count))) else { return nil }
            return read(bio.raw)
        }
        return OpenSSLOwnedKey(raw)
    }

    /// A public key from SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY").
    static func readPublicPEM(_ pem: String) -> OpenSSLOwnedKey? {
        readPEM(pem) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
    }

    /// A private key from PKCS#8 or traditional PEM. Encrypted PEM is refused by a callback that supplies no
    /// password: with a nil callback OpenSSL would prompt on the controlling terminal, which a server must never do.
    package static func readPrivatePEM(_ pem: String) -> OpenSSLOwnedKey? {
        readPEM(pem) { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) }
    }

    /// Unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY") of `pkey`.
    package static func writePrivatePEM(_ pkey: OpaquePointer) -> String? {
        writePEM { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
    }

    /// SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY") of `pkey`.
    static func writePublicPEM(_ pkey: OpaquePointer) -> String? {
        writePEM { PEM_write_bio_PUBKEY($0, pkey) }
    }

    /// Runs `write` into a memory BIO and returns what it wrote.
    package static func writePEM(_ write: (OpaquePointer) -> Int32) -> String? {
        guard let bio = OpenSSLOwned.bio(BIO_new(BIO_s_mem())) else { return nil }
        guard write(bio.raw) == 1 else { return nil }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = shim_BIO_get_mem_data(bio.raw, &data)
        guard length > 0, let data else { return nil }
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A big-number parameter ("n", "e") as big-endian bytes without leading zeros.
    static func bigEndianParameter(_ pkey: OpaquePointer, _ name: UnsafePointer<CChar>) -> [UInt8]? {
        var raw: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pkey, name, &raw) == 1, let bn = OpenSSLOwned.bignum(raw) else { return nil }
        let count = Int(shim_BN_num_bytes(bn.raw))
        var out = [UInt8](repeating: 0, count: count)
        let written = out.withUnsafeMutableBufferPointer { BN_bn2bin(bn.raw, $0.baseAddress) }
        return Int(written) == count ? out : nil
    }

    /// Whether `pkey` is a plain RSA key (not RSA-PSS, EC, …).
    static func isRSA(_ pkey: OpaquePointer) -> Bool { EVP_PKEY_is_a(pkey, "RSA") == 1 }
}
