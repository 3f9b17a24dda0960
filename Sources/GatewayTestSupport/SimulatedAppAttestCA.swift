internal import COpenSSL
public import GatewayCore
public import GatewayCrypto
/// A stand-in for Apple's App Attestation CA: a self-signed root, one intermediate, and leaves issued for device
/// keys with the nonce extension, shaped like Apple's (P-384 root and intermediate signing with SHA-384; P-256
/// leaves signed with ECDSA-SHA256; the same basic-constraints and key-usage extensions).
///
/// Point a verifier's `root_ca` at `rootCertificatePEM` (or pass `rootCertificate`) and the gateway's real
/// verifier accepts this CA's attestations: **test and demo use only** — whoever holds these keys can attest any
/// key for any app.
public final class SimulatedAppAttestCA: @unchecked Sendable {
    /// The root, self-signed, `CA:TRUE`.
    public let rootCertificate: X509Certificate
    /// The intermediate ("CA 1"), `CA:TRUE, pathlen:0`, signed by the root.
    public let intermediateCertificate: X509Certificate
    let rootKey: ECPrivateKey
    let intermediateKey: ECPrivateKey
    /// Apple's other hat: signing the receipts that attestations carry (nil for a CA saved before receipts existed,
    /// whose devices then carry opaque receipt bytes).
    public let receipts: SimulatedReceiptIssuer?

    /// The nonce extension's OID: 1.2.840.113635.100.8.2.
    public static let nonceExtensionOID = "1.2.840.113635.100.8.2"

    init(rootCertificate: X509Certificate, rootKey: ECPrivateKey, intermediateCertificate: X509Certificate, intermediateKey: ECPrivateKey,
         receipts: SimulatedReceiptIssuer? = nil) {
        self.receipts = receipts
        self.rootCertificate = rootCertificate
        self.rootKey = rootKey
        self.intermediateCertificate = intermediateCertificate
        self.intermediateKey = intermediateKey
    }

    /// A new root and intermediate, valid from an hour before `unixTime` for `validityDays`.
    public static func generate(at unixTime: Int64 = WallClock.unixSeconds(), validityDays: Int = 3650) throws -> SimulatedAppAttestCA {
        let notBefore = unixTime - 3600, notAfter = unixTime + Int64(validityDays) * 86_400
        let rootKey = try ECPrivateKey.generate(.p384)
        let root = try CertificateIssuer.issue(
            CertificateRequest(
                subject: name("Simulated App Attestation Root CA"), notBefore: notBefore, notAfter: notAfter,
                extensions: [(NID_basic_constraints, "critical,CA:TRUE"), (NID_subject_key_identifier, "hash"),
                             (NID_key_usage, "critical,keyCertSign,cRLSign")]),
            subjectKey: rootKey.pkey, issuer: nil, signerKey: rootKey, digest: .sha384)
        let intermediateKey = try ECPrivateKey.generate(.p384)
        let intermediate = try CertificateIssuer.issue(
            CertificateRequest(
                subject: name("Simulated App Attestation CA 1"), notBefore: notBefore, notAfter: notAfter,
                extensions: [(NID_basic_constraints, "critical,CA:TRUE,pathlen:0"), (NID_authority_key_identifier, "keyid:always"),
                             (NID_subject_key_identifier, "hash"), (NID_key_usage, "critical,keyCertSign,cRLSign")]),
            subjectKey: intermediateKey.pkey, issuer: root, signerKey: rootKey, digest: .sha384)
        return SimulatedAppAttestCA(rootCertificate: root, rootKey: rootKey, intermediateCertificate: intermediate, intermediateKey: intermediateKey,
                                    receipts: try SimulatedReceiptIssuer.generate(at: unixTime, validityDays: validityDays))
    }

    /// The root as PEM ("BEGIN CERTIFICATE"), for a verifier's `root_ca` file.
    public var rootCertificatePEM: String { Self.pem(rootCertificate) }

    /// The root as DER.
    public var rootCertificateDER: [UInt8] { rootCertificate.der }

    /// A leaf for the device key `publicKey` (uncompressed P-256 point) certifying `nonce` (32 bytes), as Apple's
    /// server issues it during attestation: subject CN = hex SHA-256 of the key, valid from an hour before
    /// `unixTime` for `validityDays` (Apple's leaves have been valid for 3 days and, lately, for months).
    /// Returns the DER the attestation's `x5c[0]` carries.
    public func issueLeaf(publicKey: [UInt8], nonce: [UInt8], at unixTime: Int64 = WallClock.unixSeconds(), validityDays: Int = 3) throws -> [UInt8] {
        guard nonce.count == 32 else { throw CryptoError(policy: "App Attest nonce must be 32 bytes, got \(nonce.count)") }
        guard let key = ECPublicKey(uncompressedP256: publicKey) else { throw CryptoError(policy: "not an uncompressed P-256 point") }
        let leaf = try withExtendedLifetime(key) {
            try CertificateIssuer.issue(
                CertificateRequest(
                    subject: [("CN", hexString(SHA256Hasher.hash(publicKey))), ("OU", "AAA Certification")] + Self.organisation,
                    notBefore: unixTime - 3600, notAfter: unixTime + Int64(validityDays) * 86_400,
                    extensions: [(NID_basic_constraints, "critical,CA:FALSE"),
                                 (NID_key_usage, "critical,digitalSignature,nonRepudiation,keyEncipherment,dataEncipherment")],
                    customExtensions: [(Self.nonceExtensionOID, try Self.nonceExtensionDER(nonce))]),
                subjectKey: key.pkey, issuer: intermediateCertificate, signerKey: intermediateKey, digest: .sha256)
        }
        return leaf.der
    }

    /// `SEQUENCE { [1] EXPLICIT OCTET STRING (nonce) }` — `30 24 A1 22 04 20 …` for 32 bytes — written with
    /// OpenSSL's DER primitives (`i2d_ASN1_OCTET_STRING`, `ASN1_put_object`).
    static func nonceExtensionDER(_ nonce: [UInt8]) throws -> [UInt8] {
        let octets = ASN1_OCTET_STRING_new()
        defer { ASN1_OCTET_STRING_free(octets) }
        guard let octets, ASN1_OCTET_STRING_set(octets, nonce, Int32(nonce.count)) == 1 else {
            throw CryptoError(openSSL: "building nonce OCTET STRING")
        }
        var inner: UnsafeMutablePointer<UInt8>? = nil
        let innerLength = i2d_ASN1_OCTET_STRING(octets, &inner)
        guard innerLength > 0, let inner else { throw CryptoError(openSSL: "encoding nonce OCTET STRING") }
        defer { CRYPTO_free(inner, #fileID, #line) }
        let taggedLength = ASN1_object_size(1, innerLength, 1)
        let totalLength = ASN1_object_size(1, taggedLength, V_ASN1_SEQUENCE)
        var der = [UInt8](repeating: 0, count: Int(totalLength))
        der.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            ASN1_put_object(&cursor, 1, taggedLength, V_ASN1_SEQUENCE, V_ASN1_UNIVERSAL)
            ASN1_put_object(&cursor, 1, innerLength, 1, V_ASN1_CONTEXT_SPECIFIC)
            cursor?.update(from: inner, count: Int(innerLength))
        }
        return der
    }

    private static let organisation: [(field: String, value: String)] = [("O", "attest-gateway simulation"), ("ST", "Test")]

    private static func name(_ commonName: String) -> [(field: String, value: String)] { [("CN", commonName)] + organisation }

    static func pem(_ certificate: X509Certificate) -> String {
        // Writing a parsed certificate to a memory BIO fails only when allocation fails.
        guard let pem = withExtendedLifetime(certificate, { EVPKeyIO.writePEM { PEM_write_bio_X509($0, certificate.x509) } }) else {
            fatalError(CryptoError(openSSL: "writing certificate PEM").description)
        }
        return pem
    }
}
