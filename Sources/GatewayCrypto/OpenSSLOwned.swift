internal import COpenSSL

/// Owns one OpenSSL object for the length of a scope and frees it exactly once, in `deinit`.
///
/// Noncopyable so that ownership cannot be duplicated (no double free) and so that it costs no heap allocation:
/// it is used on the verification hot path for the per-call `EVP_MD_CTX`.
package struct OpenSSLOwned: ~Copyable {
    package let raw: OpaquePointer
    private let free: (OpaquePointer) -> Void

    /// nil when `raw` is nil (OpenSSL's allocation failed); `free` must be a non-capturing closure.
    package init?(_ raw: OpaquePointer?, free: @escaping (OpaquePointer) -> Void) {
        guard let raw else { return nil }
        self.raw = raw
        self.free = free
    }

    deinit { free(raw) }
}

extension OpenSSLOwned {
    package static func mdContext() -> OpenSSLOwned? { OpenSSLOwned(EVP_MD_CTX_new()) { EVP_MD_CTX_free($0) } }
    package static func bignum(_ raw: OpaquePointer?) -> OpenSSLOwned? { OpenSSLOwned(raw) { BN_free($0) } }
    package static func pkeyContext(_ raw: OpaquePointer?) -> OpenSSLOwned? { OpenSSLOwned(raw) { EVP_PKEY_CTX_free($0) } }
    package static func paramBuilder() -> OpenSSLOwned? { OpenSSLOwned(OSSL_PARAM_BLD_new()) { OSSL_PARAM_BLD_free($0) } }
    package static func bio(_ raw: OpaquePointer?) -> OpenSSLOwned? { OpenSSLOwned(raw) { _ = BIO_free($0) } }
}

/// Owns an `OSSL_PARAM` array (a concrete C struct, so not an `OpaquePointer`) for the length of a scope.
struct OpenSSLOwnedParams: ~Copyable {
    let raw: UnsafeMutablePointer<OSSL_PARAM>

    init?(_ raw: UnsafeMutablePointer<OSSL_PARAM>?) {
        guard let raw else { return nil }
        self.raw = raw
    }

    deinit { OSSL_PARAM_free(raw) }
}

/// Owns an `EVP_PKEY` until it is handed to the key object that keeps it (`take()`), or frees it on an early exit.
package struct OpenSSLOwnedKey: ~Copyable {
    private let raw: OpaquePointer

    package init?(_ raw: OpaquePointer?) {
        guard let raw else { return nil }
        self.raw = raw
    }

    /// Read access without giving up ownership.
    package var pointer: OpaquePointer { raw }

    /// Transfers ownership to the caller, whose `deinit` must free it.
    package consuming func take() -> OpaquePointer {
        let raw = self.raw
        discard self
        return raw
    }

    deinit { EVP_PKEY_free(raw) }
}
