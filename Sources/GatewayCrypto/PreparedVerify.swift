internal import COpenSSL

/// A signature check over SHA-256 prepared once per public key: a verify context with the digest (and for RSA the
/// PKCS#1 v1.5 padding) set, which each verification duplicates (`EVP_PKEY_CTX_dup`) instead of building a context
/// with `EVP_DigestVerifyInit` — OpenSSL 3 looks up the provider's algorithms on every init, which costs more than
/// the hashing and, for RSA, the public operation's own overhead. The template is never written after construction
/// (duplicating it only takes references on the key and the algorithm), so one instance serves every thread.
final class PreparedVerify: @unchecked Sendable {
    /// SHA-256, fetched once (an explicit fetch: the implicit one behind `EVP_sha256()` repeats the lookup per use).
    nonisolated(unsafe) private static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// `EVP_PKEY_verify_init` done, digest and padding set; never used itself, only duplicated.
    private let template: OpaquePointer
    private let md: OpaquePointer

    /// Nil when OpenSSL cannot prepare it (the key's owner then builds a context per verification).
    /// `rsaPKCS1Padding`: set RSASSA-PKCS1-v1_5 padding (RS256); false for ECDSA.
    init?(_ pkey: OpaquePointer, rsaPKCS1Padding: Bool) {
        guard let md = Self.sha256, let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
        guard EVP_PKEY_verify_init(ctx) == 1,
              !rsaPKCS1Padding || EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1,
              EVP_PKEY_CTX_set_signature_md(ctx, md) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            ERR_clear_error()
            return nil
        }
        template = ctx
        self.md = md
    }

    deinit { EVP_PKEY_CTX_free(template) }

    /// SHA-256 of `message`, then the signature check on a duplicate of the template. Only 1 from OpenSSL is
    /// success (0: a bad signature, negative: an error); a failure's error queue entries are cleared.
    func verify(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        var digest = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &digest) { out -> Bool in
            let d = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var length: UInt32 = 0
            guard EVP_Digest(message.baseAddress, message.count, d, &length, md, nil) == 1, length == 32,
                  let ctx = EVP_PKEY_CTX_dup(template) else {
                ERR_clear_error()
                return false
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            let result = EVP_PKEY_verify(ctx, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count, d, 32)
            if result != 1 { ERR_clear_error() }
            return result == 1
        }
    }
}
