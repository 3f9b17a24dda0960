internal import COpenSSL

/// AES-256 as JWE uses it (RFC 7518): key wrap (A256KW, RFC 3394 with the default IV) and GCM (A256GCM, a 96-bit
/// IV and a 128-bit tag). OpenSSL does the cipher work; these functions only check sizes and map results.
///
/// Every failure is nil: a wrong key, a tampered ciphertext and a bad length look the same to the caller, so
/// nothing about which check failed leaks to a client.
public enum AES256 {
    /// RFC 3394 unwrap of `wrapped` (n+1 64-bit blocks) under the 32-byte `kek`; nil when the integrity check
    /// fails (wrong key, tampered bytes) or a size is wrong.
    public static func unwrapKey(_ wrapped: [UInt8], kek: [UInt8]) -> [UInt8]? {
        guard kek.count == 32, wrapped.count >= 24, wrapped.count % 8 == 0, wrapped.count <= 1024 else { return nil }
        return keyWrap(wrapped, kek: kek, encrypt: false, outputCount: wrapped.count - 8)
    }

    /// RFC 3394 wrap of `key` (a multiple of 8 bytes, at least 16) under the 32-byte `kek` (tests, the dev tool).
    public static func wrapKey(_ key: [UInt8], kek: [UInt8]) -> [UInt8]? {
        guard kek.count == 32, key.count >= 16, key.count % 8 == 0, key.count <= 1016 else { return nil }
        return keyWrap(key, kek: kek, encrypt: true, outputCount: key.count + 8)
    }

    private static func keyWrap(_ input: [UInt8], kek: [UInt8], encrypt: Bool, outputCount: Int) -> [UInt8]? {
        guard let ctx = OpenSSLOwned(EVP_CIPHER_CTX_new(), free: { EVP_CIPHER_CTX_free($0) }) else { return nil }
        EVP_CIPHER_CTX_set_flags(ctx.raw, Int32(EVP_CIPHER_CTX_FLAG_WRAP_ALLOW))
        var out = [UInt8](repeating: 0, count: outputCount + 16)
        var written: Int32 = 0
        let ok = kek.withUnsafeBufferPointer { k in
            input.withUnsafeBufferPointer { i in
                out.withUnsafeMutableBufferPointer { o -> Bool in
                    guard EVP_CipherInit_ex(ctx.raw, EVP_aes_256_wrap(), nil, k.baseAddress, nil, encrypt ? 1 : 0) == 1 else { return false }
                    return EVP_CipherUpdate(ctx.raw, o.baseAddress, &written, i.baseAddress, Int32(i.count)) == 1
                }
            }
        }
        guard ok, Int(written) == outputCount else { ERR_clear_error(); return nil }
        var tail: Int32 = 0
        let finished = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx.raw, $0.baseAddress! + Int(written), &tail) }
        guard finished == 1, tail == 0 else { ERR_clear_error(); return nil }
        out.removeLast(out.count - outputCount)
        return out
    }

    /// AES-256-GCM decryption with a 12-byte `iv` and a 16-byte `tag` over `aad`; nil when the tag does not verify.
    public static func gcmOpen(_ ciphertext: [UInt8], key: [UInt8], iv: [UInt8], aad: some Collection<UInt8>, tag: [UInt8]) -> [UInt8]? {
        guard key.count == 32, iv.count == 12, tag.count == 16, ciphertext.count < Int(Int32.max) - 16 else { return nil }
        return gcm(ciphertext, key: key, iv: iv, aad: Array(aad), tag: tag, encrypt: false)?.output
    }

    /// AES-256-GCM encryption (tests, the dev tool): the ciphertext and its 16-byte tag.
    public static func gcmSeal(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8], aad: some Collection<UInt8>) -> (ciphertext: [UInt8], tag: [UInt8])? {
        guard key.count == 32, iv.count == 12, plaintext.count < Int(Int32.max) - 16 else { return nil }
        guard let sealed = gcm(plaintext, key: key, iv: iv, aad: Array(aad), tag: [], encrypt: true) else { return nil }
        return (sealed.output, sealed.tag)
    }

    private static func gcm(_ input: [UInt8], key: [UInt8], iv: [UInt8], aad: [UInt8], tag: [UInt8], encrypt: Bool)
        -> (output: [UInt8], tag: [UInt8])? {
        guard let ctx = OpenSSLOwned(EVP_CIPHER_CTX_new(), free: { EVP_CIPHER_CTX_free($0) }) else { return nil }
        let mode: Int32 = encrypt ? 1 : 0
        var out = [UInt8](repeating: 0, count: input.count + 16)
        var tagOut = tag.isEmpty ? [UInt8](repeating: 0, count: 16) : tag
        var written: Int32 = 0
        var ignored: Int32 = 0
        let ok = key.withUnsafeBufferPointer { k in
            iv.withUnsafeBufferPointer { v in
                aad.withUnsafeBufferPointer { a in
                    input.withUnsafeBufferPointer { i in
                        out.withUnsafeMutableBufferPointer { o in
                            tagOut.withUnsafeMutableBufferPointer { t -> Bool in
                                guard EVP_CipherInit_ex(ctx.raw, EVP_aes_256_gcm(), nil, nil, nil, mode) == 1,
                                      EVP_CIPHER_CTX_ctrl(ctx.raw, EVP_CTRL_GCM_SET_IVLEN, 12, nil) == 1,
                                      EVP_CipherInit_ex(ctx.raw, nil, nil, k.baseAddress, v.baseAddress, mode) == 1 else { return false }
                                if a.count > 0, EVP_CipherUpdate(ctx.raw, nil, &ignored, a.baseAddress, Int32(a.count)) != 1 { return false }
                                if i.count > 0, EVP_CipherUpdate(ctx.raw, o.baseAddress, &written, i.baseAddress, Int32(i.count)) != 1 { return false }
                                if !encrypt, EVP_CIPHER_CTX_ctrl(ctx.raw, EVP_CTRL_GCM_SET_TAG, 16, t.baseAddress) != 1 { return false }
                                var tail: Int32 = 0
                                // Decrypting, Final is where the tag is checked: anything but 1 is a forgery.
                                guard EVP_CipherFinal_ex(ctx.raw, o.baseAddress! + Int(written), &tail) == 1, tail == 0 else { return false }
                                if encrypt, EVP_CIPHER_CTX_ctrl(ctx.raw, EVP_CTRL_GCM_GET_TAG, 16, t.baseAddress) != 1 { return false }
                                return true
                            }
                        }
                    }
                }
            }
        }
        guard ok, Int(written) == input.count else { ERR_clear_error(); return nil }
        out.removeLast(16)
        return (out, tagOut)
    }
}
