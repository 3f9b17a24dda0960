internal import COpenSSL

/// CMS SignedData (RFC 5652) as Apple signs App Attest receipts: BER or DER, the content encapsulated, the signer's
/// chain embedded. Parsing and verification are OpenSSL's (`d2i_CMS_ContentInfo`, `CMS_verify`).
public enum CMSSignedData {
    /// The encapsulated content, **not verified** (for reading a field the verification needs, e.g. its time).
    /// nil when `ber` is not one SignedData with attached content.
    public static func unverifiedContent(_ ber: [UInt8]) -> [UInt8]? {
        withContentInfo(ber) { cms -> [UInt8]? in
            guard let slot = CMS_get0_content(cms), let octets = slot.pointee else { return nil }
            return bytes(of: UnsafePointer(octets))
        }
    }

    /// The encapsulated content when the signature over it verifies with the signer certificate, and that
    /// certificate chains (through the embedded certificates, which are only ever untrusted intermediates) to
    /// `root` with every certificate valid at `unixTime`. The trust store holds `root` alone.
    public static func verifiedContent(_ ber: [UInt8], root: X509Certificate, at unixTime: Int64) -> [UInt8]? {
        let result: [UInt8]? = withExtendedLifetime(root) {
            withContentInfo(ber) { cms in
                guard let store = OpenSSLOwned(X509_STORE_new(), free: { X509_STORE_free($0) }),
                      X509_STORE_add_cert(store.raw, root.x509) == 1,
                      let param = X509_STORE_get0_param(store.raw),
                      let out = OpenSSLOwned.bio(BIO_new(BIO_s_mem())) else { return nil }
                X509_VERIFY_PARAM_set_time(param, time_t(unixTime))
                // Apple's receipt signer certificates carry no S/MIME key usage: any purpose, as `openssl cms
                // -verify -purpose any` (the chain, validity and signatures are still checked).
                X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_ANY)
                guard CMS_verify(cms, nil, store.raw, nil, out.raw, UInt32(CMS_BINARY)) == 1 else { return nil }
                var data: UnsafeMutablePointer<CChar>? = nil
                let n = shim_BIO_get_mem_data(out.raw, &data)
                guard n >= 0, let data else { return n == 0 ? [] : nil }
                return Array(UnsafeRawBufferPointer(start: data, count: n).bindMemory(to: UInt8.self))
            }
        }
        if result == nil { ERR_clear_error() }
        return result
    }

    private static func withContentInfo<R>(_ ber: [UInt8], _ body: (OpaquePointer) -> R?) -> R? {
        guard !ber.isEmpty, ber.count < Int(Int32.max) else { return nil }
        let parsed = ber.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_CMS_ContentInfo(nil, &cursor, buffer.count)
        }
        guard let cms = OpenSSLOwned(parsed, free: { CMS_ContentInfo_free($0) }) else { ERR_clear_error(); return nil }
        guard let type = CMS_get0_type(cms.raw), OBJ_obj2nid(type) == NID_pkcs7_signed else { return nil }
        return body(cms.raw)
    }

    static func bytes(of string: UnsafePointer<ASN1_STRING>) -> [UInt8]? {
        let n = Int(ASN1_STRING_length(string))
        guard n >= 0 else { return nil }
        guard n > 0, let p = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: p, count: n))
    }
}

/// DER collections decoded by OpenSSL's ASN.1 reader.
public enum ASN1 {
    /// One element of a SEQUENCE or SET OF ANY, as far as the receipt format needs.
    public enum Element: Sendable, Equatable {
        case integer(Int64)
        case octetString([UInt8])
        case utf8String(String)
        /// A constructed SEQUENCE: its whole DER encoding.
        case sequence([UInt8])
        case other(tag: Int32)
    }

    /// The elements of a DER `SET OF` (`set: true`) or `SEQUENCE OF` ANY; nil unless `der` is exactly that.
    public static func elements(of der: [UInt8], set: Bool) -> [Element]? {
        guard !der.isEmpty, der.count < Int(Int32.max) else { return nil }
        var consumed = 0
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let stack = set ? d2i_ASN1_SET_ANY(nil, &cursor, buffer.count) : d2i_ASN1_SEQUENCE_ANY(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return stack
        }
        guard let stack = parsed else { ERR_clear_error(); return nil }
        defer { shim_sk_ASN1_TYPE_pop_free(stack) }
        guard consumed == der.count else { return nil }
        var out: [Element] = []
        for i in 0..<shim_sk_ASN1_TYPE_num(stack) {
            guard let t = shim_sk_ASN1_TYPE_value(stack, i) else { return nil }
            let tag = ASN1_TYPE_get(t)
            let string = shim_ASN1_TYPE_string(t)
            switch tag {
            case V_ASN1_INTEGER:
                var value: Int64 = 0
                guard let string, ASN1_INTEGER_get_int64(&value, string) == 1 else { return nil }
                out.append(.integer(value))
            case V_ASN1_OCTET_STRING:
                guard let string, let b = CMSSignedData.bytes(of: string) else { return nil }
                out.append(.octetString(b))
            case V_ASN1_UTF8STRING:
                guard let string, let b = CMSSignedData.bytes(of: string) else { return nil }
                out.append(.utf8String(String(decoding: b, as: UTF8.self)))
            case V_ASN1_SEQUENCE:
                guard let string, let b = CMSSignedData.bytes(of: string) else { return nil }
                out.append(.sequence(b))
            default:
                out.append(.other(tag: tag))
            }
        }
        return out
    }
}
