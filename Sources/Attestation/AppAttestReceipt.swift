import GatewayCore
public import GatewayCrypto
/// An App Attest receipt: a CMS SignedData from Apple (the `attStmt.receipt` of an attestation, or a refreshed one
/// from the App Attest data server) whose content is a `SET OF SEQUENCE { type INTEGER, version INTEGER,
/// value OCTET STRING }`. Only `AppAttestReceiptVerifier` builds a verified one.
public struct AppAttestReceipt: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable {
        /// Issued with the attestation.
        case attest = "ATTEST"
        /// Issued by the data server, carrying the fraud (risk) metric.
        case receipt = "RECEIPT"
    }

    /// Field 2: `TEAMID.bundle.id`.
    public let appID: String
    /// Field 3's certificate (the App Attest leaf credential certificate of the key), DER.
    public let attestedCertificate: [UInt8]
    /// The uncompressed P-256 point of that certificate.
    public let attestedPublicKey: [UInt8]
    /// SHA-256 of `attestedPublicKey`: the App Attest key id.
    public let keyID: [UInt8]
    /// Field 4: the attestation's clientDataHash (ATTEST; a lossy re-encoding of it in RECEIPTs — compare nothing).
    public let clientHash: [UInt8]
    /// Field 5: Apple's opaque token for this key.
    public let token: String
    /// Field 6.
    public let kind: Kind
    /// Field 7: `sandbox` (development) or `production`.
    public let environment: String
    /// Field 12, unix seconds.
    public let createdAt: Int64
    /// Field 17, RECEIPT only.
    public let riskMetric: Int?
    /// Field 19, RECEIPT only: no refresh before it.
    public let notBefore: Int64?
    /// Field 21.
    public let expiresAt: Int64?
}

public enum AppAttestReceiptFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not a CMS SignedData with content, or the content is not the receipt SET.
    case malformed(String)
    /// The signature or the chain to the pinned root (at the receipt's creation time) does not verify.
    case untrusted
    /// Field 2 is not the key's app id.
    case appIDMismatch
    /// Field 3's key is not the key this receipt is checked for.
    case keyMismatch
    /// Field 7 does not match the expected environment.
    case wrongEnvironment

    public var description: String {
        switch self {
        case .malformed(let why): "receipt: malformed (\(why))"
        case .untrusted: "receipt: signature or chain does not verify"
        case .appIDMismatch: "receipt: app id mismatch"
        case .keyMismatch: "receipt: attested key mismatch"
        case .wrongEnvironment: "receipt: wrong environment"
        }
    }
}

/// Verifies receipts (PROTOCOL.md "App Attest receipts"): CMS signature and chain to the pinned Apple Root CA - G3
/// at the receipt's own creation time (field 12), then the fields.
public struct AppAttestReceiptVerifier: Sendable {
    public let root: X509Certificate

    public init(root: X509Certificate) { self.root = root }

    /// The fields of `cms` without checking the signature (to report on a rejected receipt; never to trust).
    public static func decode(_ cms: [UInt8]) -> Result<AppAttestReceipt, AppAttestReceiptFailure> {
        guard let content = CMSSignedData.unverifiedContent(cms) else { return .failure(.malformed("not a CMS SignedData with content")) }
        return parse(content)
    }

    /// Verifies `cms` and checks that it names `appID` and the key `keyID` (32 bytes) and, when given, the
    /// environment (`production`, or `development` = Apple's `sandbox`).
    public func verify(_ cms: [UInt8], appID: String, keyID: [UInt8], environment: AppAttestEnvironment? = nil)
        -> Result<AppAttestReceipt, AppAttestReceiptFailure> {
        let unverified: AppAttestReceipt
        switch Self.decode(cms) {
        case .failure(let f): return .failure(f)
        case .success(let r): unverified = r
        }
        guard let content = CMSSignedData.verifiedContent(cms, root: root, at: unverified.createdAt) else { return .failure(.untrusted) }
        // Parse what was verified (the same bytes; parsing again keeps "verified" and "read" one thing).
        guard case .success(let receipt) = Self.parse(content) else { return .failure(.malformed("verified content")) }
        guard receipt.appID == appID else { return .failure(.appIDMismatch) }
        guard receipt.keyID == keyID else { return .failure(.keyMismatch) }
        if let environment {
            let expected = environment == .development ? "sandbox" : "production"
            guard receipt.environment == expected else { return .failure(.wrongEnvironment) }
        }
        return .success(receipt)
    }

    /// The receipt fields from the SET; required: 2, 3, 4, 5, 6, 7, 12.
    static func parse(_ content: [UInt8]) -> Result<AppAttestReceipt, AppAttestReceiptFailure> {
        guard let set = ASN1.elements(of: content, set: true) else { return .failure(.malformed("content is not a SET")) }
        var fields: [Int64: [UInt8]] = [:]
        for element in set {
            guard case .sequence(let der) = element, let parts = ASN1.elements(of: der, set: false), parts.count == 3,
                  case .integer(let type) = parts[0], case .integer = parts[1], case .octetString(let value) = parts[2] else {
                return .failure(.malformed("an attribute is not SEQUENCE { INTEGER, INTEGER, OCTET STRING }"))
            }
            guard fields[type] == nil else { return .failure(.malformed("field \(type) repeated")) }
            fields[type] = value
        }
        func text(_ n: Int64) -> String? { fields[n].flatMap { String(validating: $0, as: UTF8.self) } }
        func time(_ n: Int64) -> Int64? { text(n).flatMap(RFC3339.parse) }
        guard let appID = text(2) else { return .failure(.malformed("no app id (2)")) }
        guard let certificateDER = fields[3], let certificate = X509Certificate(der: certificateDER),
              let publicKey = certificate.publicKeyUncompressedP256() else {
            return .failure(.malformed("no attested P-256 certificate (3)"))
        }
        guard let clientHash = fields[4], let token = text(5) else { return .failure(.malformed("no client hash (4) or token (5)")) }
        guard let kindText = text(6), let kind = AppAttestReceipt.Kind(rawValue: kindText) else {
            return .failure(.malformed("no receipt type (6)"))
        }
        guard let environment = text(7), let createdAt = time(12) else { return .failure(.malformed("no environment (7) or creation time (12)")) }
        var riskMetric: Int? = nil
        if let metric = text(17) {
            guard let value = Int(metric), value >= 0 else { return .failure(.malformed("risk metric (17) is not a number")) }
            riskMetric = value
        }
        if fields[19] != nil && time(19) == nil { return .failure(.malformed("not-before (19) is not a time")) }
        if fields[21] != nil && time(21) == nil { return .failure(.malformed("expiry (21) is not a time")) }
        return .success(AppAttestReceipt(
            appID: appID, attestedCertificate: certificateDER, attestedPublicKey: publicKey,
            keyID: SHA256Hasher.hash(publicKey), clientHash: clientHash, token: token, kind: kind,
            environment: environment, createdAt: createdAt, riskMetric: riskMetric, notBefore: time(19), expiresAt: time(21)))
    }
}

/// Apple Root CA - G3, the anchor of receipt chains (`receipt_root_ca: builtin`).
extension AppAttestRoots {
    /// Valid 2014-04-30 to 2039-04-30; SHA-256 of the DER
    /// `63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179` (Apple publishes it at
    /// https://www.apple.com/certificateauthority/AppleRootCA-G3.cer). A test checks it against the vectors' copy.
    public static let appleRootG3PEM = """
        -----BEGIN CERTIFICATE-----
        MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwS
        QXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u
        IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN
        MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS
        b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9y
        aXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49
        AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf
        TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517
        IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr
        MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA
        MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4
        at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM
        6BgD56KyKA==
        -----END CERTIFICATE-----
        """
    public static let appleRootG3: X509Certificate = X509Certificate(pem: appleRootG3PEM)!
}
