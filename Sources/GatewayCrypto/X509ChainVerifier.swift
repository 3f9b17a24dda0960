internal import COpenSSL

/// Verifies a certificate chain against one pinned root at a given time.
///
/// Security choices: the trust store holds the pinned root only (never the system CAs), so a certificate from
/// any other CA cannot pass; the verification time is the caller's (injected clock), never OpenSSL's wall clock;
/// partial chains are not allowed, so an intermediate can never act as a trust anchor.
public enum X509ChainVerifier {
    /// true when `leaf` chains through `intermediates` to `root`, every certificate is valid at `unixTime`, and
    /// all signatures and CA constraints check out.
    public static func verify(leaf: X509Certificate, intermediates: [X509Certificate], root: X509Certificate, at unixTime: Int64) -> Bool {
        let ok = withExtendedLifetime((leaf, intermediates, root)) { () -> Bool in
            guard let store = OpenSSLOwned(X509_STORE_new(), free: { X509_STORE_free($0) }),
                  X509_STORE_add_cert(store.raw, root.x509) == 1,
                  let stack = OpenSSLOwned(shim_sk_X509_new_null(), free: { shim_sk_X509_free($0) }),
                  let ctx = OpenSSLOwned(X509_STORE_CTX_new(), free: { X509_STORE_CTX_free($0) }) else { return false }
            for certificate in intermediates {
                guard shim_sk_X509_push(stack.raw, certificate.x509) > 0 else { return false }
            }
            guard X509_STORE_CTX_init(ctx.raw, store.raw, leaf.x509, stack.raw) == 1,
                  let param = X509_STORE_CTX_get0_param(ctx.raw) else { return false }
            X509_VERIFY_PARAM_set_time(param, time_t(unixTime))
            return X509_verify_cert(ctx.raw) == 1
        }
        if !ok { ERR_clear_error() }
        return ok
    }
}
