internal import COpenSSL

extension ECPublicKey {
    /// A P-256 key from SubjectPublicKeyInfo PEM ("BEGIN PUBLIC KEY"), as `openssl ec -pubout` writes it; nil for
    /// any other key type or curve.
    public convenience init?(pem: String) {
        guard let key = EVPKeyIO.readPublicPEM(pem) else { ERR_clear_error(); return nil }
        guard let point = Self.uncompressedP256Point(key.pointer) else { return nil }
        // Re-imported through the SPKI path, so the point goes through the same on-curve check as every other key.
        self.init(uncompressedP256: point)
    }

    /// The key of `pkey` as an uncompressed P-256 point (65 bytes, `04 ‖ X ‖ Y`); nil for any other key type or curve.
    static func uncompressedP256Point(_ pkey: OpaquePointer) -> [UInt8]? {
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else { ERR_clear_error(); return nil }
        var group = [CChar](repeating: 0, count: 64)
        var groupLength = 0
        guard group.withUnsafeMutableBufferPointer({
            EVP_PKEY_get_utf8_string_param(pkey, shim_OSSL_PKEY_PARAM_GROUP_NAME(), $0.baseAddress, $0.count, &groupLength)
        }) == 1, String(decoding: group.prefix(groupLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else {
            ERR_clear_error()
            return nil
        }
        // The encoded point follows the key's point-conversion format, which is uncompressed unless someone
        // changed it; the length and leading 0x04 check below catch that case.
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        let ok = point.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_octet_string_param(pkey, shim_OSSL_PKEY_PARAM_PUB_KEY(), $0.baseAddress, $0.count, &length)
        }
        guard ok == 1, length == 65, point[0] == 0x04 else { ERR_clear_error(); return nil }
        return point
    }
}

extension ECPublicKey {
    /// A P-256 key from DER SubjectPublicKeyInfo (what Play Console gives, in base64, as the verification key);
    /// nil for any other key type or curve, or trailing bytes.
    public convenience init?(spkiDER der: [UInt8]) {
        guard !der.isEmpty, der.count <= 4096 else { return nil }
        var consumed = 0
        let raw = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let key = d2i_PUBKEY(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return key
        }
        guard let key = OpenSSLOwnedKey(raw) else { ERR_clear_error(); return nil }
        guard consumed == der.count, let point = Self.uncompressedP256Point(key.pointer) else { return nil }
        self.init(uncompressedP256: point)
    }

    /// The DER SubjectPublicKeyInfo of this key.
    public var spkiDER: [UInt8] { Self.spkiPrefix + uncompressedPoint }
}
