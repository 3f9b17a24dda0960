internal import COpenSSL
import GatewayCrypto

/// What one certificate says, in OpenSSL's own vocabulary: the signer (`CertificateIssuer`) does all encoding.
struct CertificateRequest {
    /// Subject RDNs in order, e.g. `[("CN", "…"), ("O", "…")]`.
    var subject: [(field: String, value: String)]
    /// Validity, unix seconds.
    var notBefore: Int64
    var notAfter: Int64
    /// Standard extensions in OpenSSL's configuration syntax, e.g. `(NID_basic_constraints, "critical,CA:TRUE")`.
    var extensions: [(nid: Int32, value: String)] = []
    /// Non-critical extensions by dotted OID whose value (the extnValue content) is the given DER.
    var customExtensions: [(oid: String, der: [UInt8])] = []
}

/// Issues X.509 v3 certificates with OpenSSL's X509 API (never hand-encoded DER) for the simulated App Attest CA.
enum CertificateIssuer {
    enum Digest {
        case sha256
        case sha384
    }

    /// Signs `request` for `subjectKey`'s public half with `signerKey`. `issuer` nil: self-signed (a root).
    static func issue(
        _ request: CertificateRequest, subjectKey: OpaquePointer, issuer: X509Certificate?, signerKey: ECPrivateKey, digest: Digest
    ) throws -> X509Certificate {
        guard let x509 = OpenSSLOwned(X509_new(), free: { X509_free($0) }) else { throw CryptoError(openSSL: "X509_new") }
        let cert = x509.raw
        guard X509_set_version(cert, Int(X509_VERSION_3)) == 1 else { throw CryptoError(openSSL: "X509_set_version") }
        try setRandomSerial(cert)
        guard ASN1_TIME_set(X509_getm_notBefore(cert), time_t(request.notBefore)) != nil,
              ASN1_TIME_set(X509_getm_notAfter(cert), time_t(request.notAfter)) != nil else {
            throw CryptoError(openSSL: "setting certificate validity")
        }
        let subject = X509_get_subject_name(cert)
        for (field, value) in request.subject {
            let added = Array(value.utf8).withUnsafeBufferPointer {
                X509_NAME_add_entry_by_txt(subject, field, MBSTRING_UTF8, $0.baseAddress, Int32($0.count), -1, 0)
            }
            guard added == 1 else { throw CryptoError(openSSL: "adding subject \(field)") }
        }
        let issuerName = issuer.map { X509_get_subject_name($0.x509) } ?? subject
        guard X509_set_issuer_name(cert, issuerName) == 1, X509_set_pubkey(cert, subjectKey) == 1 else {
            throw CryptoError(openSSL: "setting issuer name and public key")
        }
        try withExtendedLifetime(issuer) {
            var context = X509V3_CTX()
            X509V3_set_ctx(&context, issuer?.x509 ?? cert, cert, nil, nil, 0)
            for (nid, value) in request.extensions {
                guard let ext = OpenSSLOwned(X509V3_EXT_nconf_nid(nil, &context, nid, value), free: { X509_EXTENSION_free($0) }),
                      X509_add_ext(cert, ext.raw, -1) == 1 else {
                    throw CryptoError(openSSL: "adding extension \(nid) = \(value)")
                }
            }
        }
        for (oid, der) in request.customExtensions { try addCustomExtension(cert, oid: oid, der: der) }
        let md = digest == .sha256 ? EVP_sha256() : EVP_sha384()
        guard X509_sign(cert, signerKey.pkey, md) > 0 else { throw CryptoError(openSSL: "X509_sign") }
        return try certificate(cert)
    }

    /// A positive 64-bit random serial, as CAs are asked to use (RFC 5280 §4.1.2.2, CA/B Forum entropy rule).
    private static func setRandomSerial(_ cert: OpaquePointer) throws {
        var bytes = SecureRandom.bytes(8)
        bytes[0] &= 0x7F
        bytes[7] |= 0x01  // never zero
        guard let serial = OpenSSLOwned.bignum(BN_bin2bn(bytes, Int32(bytes.count), nil)),
              BN_to_ASN1_INTEGER(serial.raw, X509_get_serialNumber(cert)) != nil else {
            throw CryptoError(openSSL: "setting serial number")
        }
    }

    /// Adds a non-critical extension `oid` whose extnValue OCTET STRING holds `der`.
    private static func addCustomExtension(_ cert: OpaquePointer, oid: String, der: [UInt8]) throws {
        // no_name = 1: numeric OIDs only.
        guard let object = OpenSSLOwned(OBJ_txt2obj(oid, 1), free: { ASN1_OBJECT_free($0) }) else {
            throw CryptoError(openSSL: "OBJ_txt2obj \(oid)")
        }
        let value = ASN1_OCTET_STRING_new()
        defer { ASN1_OCTET_STRING_free(value) }
        guard let value, ASN1_OCTET_STRING_set(value, der, Int32(der.count)) == 1,
              let ext = OpenSSLOwned(X509_EXTENSION_create_by_OBJ(nil, object.raw, 0, value), free: { X509_EXTENSION_free($0) }),
              X509_add_ext(cert, ext.raw, -1) == 1 else {
            throw CryptoError(openSSL: "adding extension \(oid)")
        }
    }

    /// The signed certificate as the gateway's own immutable `X509Certificate` (via its DER).
    private static func certificate(_ cert: OpaquePointer) throws -> X509Certificate {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(cert, &out)
        guard length > 0, let out else { throw CryptoError(openSSL: "i2d_X509") }
        defer { CRYPTO_free(out, #fileID, #line) }
        guard let parsed = X509Certificate(der: Array(UnsafeBufferPointer(start: out, count: Int(length)))) else {
            throw CryptoError(policy: "issued certificate does not parse")
        }
        return parsed
    }
}
