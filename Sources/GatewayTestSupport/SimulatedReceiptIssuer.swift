internal import COpenSSL
public import GatewayCore
public import GatewayCrypto
/// A stand-in for Apple's receipt signing (Apple Root CA - G3 → Apple Application Integration CA 5 - G1 → the
/// fraud-receipt signer): CMS SignedData over the receipt SET, without signed attributes, the chain embedded — as
/// Apple's receipts are. Point `receipt_root_ca` at `rootCertificate`. **Test and demo use only.**
public final class SimulatedReceiptIssuer: @unchecked Sendable {
    public let rootCertificate: X509Certificate
    let intermediateCertificate: X509Certificate
    let signerCertificate: X509Certificate
    let signerKey: ECPrivateKey

    init(root: X509Certificate, intermediate: X509Certificate, signer: X509Certificate, signerKey: ECPrivateKey) {
        rootCertificate = root
        intermediateCertificate = intermediate
        signerCertificate = signer
        self.signerKey = signerKey
    }

    public static func generate(at unixTime: Int64 = WallClock.unixSeconds(), validityDays: Int = 3650) throws -> SimulatedReceiptIssuer {
        let notBefore = unixTime - 3600, notAfter = unixTime + Int64(validityDays) * 86_400
        func name(_ cn: String) -> [(field: String, value: String)] { [("CN", cn), ("O", "attest-gateway simulation")] }
        let rootKey = try ECPrivateKey.generate(.p384)
        let root = try CertificateIssuer.issue(
            CertificateRequest(subject: name("Simulated Apple Root CA - G3"), notBefore: notBefore, notAfter: notAfter,
                               extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_subject_key_identifier, "hash"),
                                            (NID_key_usage, "critical,keyCertSign,cRLSign")]),
            subjectKey: rootKey.pkey, issuer: nil, signerKey: rootKey, digest: .sha384)
        let intermediateKey = try ECPrivateKey.generate(.p384)
        let intermediate = try CertificateIssuer.issue(
            CertificateRequest(subject: name("Simulated Apple Application Integration CA 5 - G1"), notBefore: notBefore, notAfter: notAfter,
                               extensions: [(NID_basic_constraints, "critical,CA:TRUE,pathlen:0"), (NID_authority_key_identifier, "keyid:always"),
                                            (NID_subject_key_identifier, "hash"), (NID_key_usage, "critical,keyCertSign,cRLSign")]),
            subjectKey: intermediateKey.pkey, issuer: root, signerKey: rootKey, digest: .sha384)
        let signerKey = try ECPrivateKey.generate(.p256)
        let signer = try CertificateIssuer.issue(
            CertificateRequest(subject: name("Simulated Application Attestation Fraud Receipt Signing"), notBefore: notBefore,
                               notAfter: notAfter,
                               extensions: [(NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature")]),
            subjectKey: signerKey.pkey, issuer: intermediate, signerKey: intermediateKey, digest: .sha384)
        return SimulatedReceiptIssuer(root: root, intermediate: intermediate, signer: signer, signerKey: signerKey)
    }

    /// A receipt's fields (PROTOCOL.md "App Attest receipts").
    public struct Fields: Sendable {
        public var appID: String
        /// Field 3: the App Attest leaf certificate of the key (DER).
        public var attestedCertificate: [UInt8]
        public var clientHash: [UInt8]
        public var token: String
        /// `ATTEST` or `RECEIPT`.
        public var kind: String
        /// `sandbox` or `production`.
        public var environment: String
        public var createdAt: Int64
        public var riskMetric: Int?
        public var notBefore: Int64?
        public var expiresAt: Int64?

        public init(appID: String, attestedCertificate: [UInt8], clientHash: [UInt8], token: String, kind: String,
                    environment: String, createdAt: Int64, riskMetric: Int? = nil, notBefore: Int64? = nil, expiresAt: Int64? = nil) {
            self.appID = appID
            self.attestedCertificate = attestedCertificate
            self.clientHash = clientHash
            self.token = token
            self.kind = kind
            self.environment = environment
            self.createdAt = createdAt
            self.riskMetric = riskMetric
            self.notBefore = notBefore
            self.expiresAt = expiresAt
        }
    }

    /// The receipt as DER CMS: SignedData (no signed attributes) over the SET OF SEQUENCE { type, 1, value }.
    public func receipt(_ f: Fields) throws -> [UInt8] {
        var attributes: [(Int, [UInt8])] = [(2, Array(f.appID.utf8)), (3, f.attestedCertificate), (4, f.clientHash),
                                            (5, Array(f.token.utf8)), (6, Array(f.kind.utf8)), (7, Array(f.environment.utf8)),
                                            (12, Array(RFC3339.format(f.createdAt).utf8))]
        if let m = f.riskMetric { attributes.append((17, Array(String(m).utf8))) }
        if let t = f.notBefore { attributes.append((19, Array(RFC3339.format(t).utf8))) }
        if let t = f.expiresAt { attributes.append((21, Array(RFC3339.format(t).utf8))) }
        let content = try Self.der(tag: V_ASN1_SET, attributes.map { type, value in
            try Self.der(tag: V_ASN1_SEQUENCE, [try Self.integer(type), try Self.integer(1), try Self.octetString(value)])
        })
        return try sign(content)
    }

    private func sign(_ content: [UInt8]) throws -> [UInt8] {
        try withExtendedLifetime((signerCertificate, intermediateCertificate, rootCertificate, signerKey)) {
            guard let data = content.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
                throw CryptoError(openSSL: "receipt content BIO")
            }
            defer { BIO_free(data) }
            let chain = shim_sk_X509_new_null()
            defer { shim_sk_X509_free(chain) }
            _ = shim_sk_X509_push(chain, intermediateCertificate.x509)
            _ = shim_sk_X509_push(chain, rootCertificate.x509)
            let flags = UInt32(CMS_BINARY | CMS_NOATTR | CMS_NOSMIMECAP)
            guard let cms = CMS_sign(signerCertificate.x509, signerKey.pkey, chain, data, flags) else {
                throw CryptoError(openSSL: "CMS_sign")
            }
            defer { CMS_ContentInfo_free(cms) }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let length = i2d_CMS_ContentInfo(cms, &out)
            guard length > 0, let out else { throw CryptoError(openSSL: "encoding the receipt") }
            defer { CRYPTO_free(out, #fileID, #line) }
            return Array(UnsafeBufferPointer(start: out, count: Int(length)))
        }
    }

    private static func integer(_ value: Int) throws -> [UInt8] {
        guard let i = ASN1_INTEGER_new() else { throw CryptoError(openSSL: "ASN1_INTEGER_new") }
        defer { ASN1_INTEGER_free(i) }
        ASN1_INTEGER_set_int64(i, Int64(value))
        return try encode { i2d_ASN1_INTEGER(i, &$0) }
    }

    private static func octetString(_ bytes: [UInt8]) throws -> [UInt8] {
        guard let o = ASN1_OCTET_STRING_new(), ASN1_OCTET_STRING_set(o, bytes, Int32(bytes.count)) == 1 else {
            throw CryptoError(openSSL: "ASN1_OCTET_STRING")
        }
        defer { ASN1_OCTET_STRING_free(o) }
        return try encode { i2d_ASN1_OCTET_STRING(o, &$0) }
    }

    private static func encode(_ i2d: (inout UnsafeMutablePointer<UInt8>?) -> Int32) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d(&out)
        guard n > 0, let out else { throw CryptoError(openSSL: "DER encoding") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }

    /// A constructed `tag` (SET or SEQUENCE) around `parts`, header written by OpenSSL's `ASN1_put_object`.
    private static func der(tag: Int32, _ parts: [[UInt8]]) throws -> [UInt8] {
        let body = parts.flatMap { $0 }
        let total = ASN1_object_size(1, Int32(body.count), tag)
        guard total > 0 else { throw CryptoError(policy: "receipt too large") }
        var out = [UInt8](repeating: 0, count: Int(total))
        out.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            ASN1_put_object(&cursor, 1, Int32(body.count), tag, V_ASN1_UNIVERSAL)
            body.withUnsafeBufferPointer { cursor?.update(from: $0.baseAddress!, count: $0.count) }
        }
        return out
    }
}
