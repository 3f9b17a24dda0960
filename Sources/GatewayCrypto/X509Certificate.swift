internal import COpenSSL

/// One X.509 certificate parsed from DER. Nothing about it is trusted until `X509ChainVerifier` says so.
///
/// Immutable and safe to share between threads: the `X509` is only read after construction.
public final class X509Certificate: @unchecked Sendable {
    package let x509: OpaquePointer
    /// The DER bytes the certificate was parsed from.
    public let der: [UInt8]
    /// notBefore as unix seconds.
    public let notBefore: Int64
    /// notAfter as unix seconds.
    public let notAfter: Int64

    /// Parses DER; nil when the bytes are not exactly one certificate or its validity times are unreadable.
    public init?(der: [UInt8]) {
        guard !der.isEmpty, der.count < Int(Int32.max) else { return nil }
        var consumed = 0
        let raw = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let cert = d2i_X509(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return cert
        }
        guard let raw else { ERR_clear_error(); return nil }
        // Trailing bytes after the certificate would make `der` ambiguous (and the keyID/log value misleading).
        guard consumed == der.count,
              let nb = Self.unixTime(X509_get0_notBefore(raw)), let na = Self.unixTime(X509_get0_notAfter(raw)) else {
            X509_free(raw)
            ERR_clear_error()
            return nil
        }
        x509 = raw
        self.der = der
        notBefore = nb
        notAfter = na
    }

    deinit { X509_free(x509) }

    /// Parses the first certificate of a PEM text ("BEGIN CERTIFICATE").
    public convenience init?(pem: String) {
        var pem = pem
        let der = pem.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count > 0, utf8.count < Int(Int32.max),
                  let bio = OpenSSLOwned.bio(BIO_new_mem_buf(utf8.baseAddress, Int32(utf8.count))),
                  let cert = OpenSSLOwned(PEM_read_bio_X509(bio.raw, nil, nil, nil), free: { X509_free($0) }) else { return nil }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let length = i2d_X509(cert.raw, &out)
            guard length > 0, let out else { return nil }
            defer { CRYPTO_free(out, #fileID, #line) }
            return Array(UnsafeBufferPointer(start: out, count: Int(length)))
        }
        guard let der else { ERR_clear_error(); return nil }
        self.init(der: der)
    }

    /// The subject public key as an uncompressed P-256 point (65 bytes, `04 ‖ X ‖ Y`); nil for any other key type.
    public func publicKeyUncompressedP256() -> [UInt8]? {
        guard let pkey = X509_get0_pubkey(x509) else { ERR_clear_error(); return nil }
        return ECPublicKey.uncompressedP256Point(pkey)
    }

    /// The content of the extension `oid` (dotted text): the bytes inside its extnValue OCTET STRING, i.e. the
    /// extension's own DER. nil when absent or when `oid` is not a valid numeric OID.
    public func extensionValue(oid: String) -> [UInt8]? {
        // no_name = 1: only the numeric form is accepted, so a short name cannot alias a different OID.
        guard let object = OpenSSLOwned(OBJ_txt2obj(oid, 1), free: { ASN1_OBJECT_free($0) }) else { ERR_clear_error(); return nil }
        let index = X509_get_ext_by_OBJ(x509, object.raw, -1)
        guard index >= 0, X509_get_ext_by_OBJ(x509, object.raw, index) < 0 else { return nil } // absent or duplicated
        guard let ext = X509_get_ext(x509, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        let count = Int(ASN1_STRING_length(data))
        guard count > 0, let bytes = ASN1_STRING_get0_data(data) else { return count == 0 ? [] : nil }
        return Array(UnsafeBufferPointer(start: bytes, count: count))
    }

    /// An ASN1_TIME as unix seconds, via its difference to the epoch (no libc time zone involved).
    private static func unixTime(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time, let epoch = ASN1_TIME_set(nil, 0) else { return nil }
        defer { ASN1_TIME_free(epoch) }
        var days: Int32 = 0, seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, epoch, time) == 1 else { return nil }
        return Int64(days) * 86_400 + Int64(seconds)
    }
}
