internal import COpenSSL
import GatewayCrypto

/// A CA saved as four PEM files in one directory, so the e2e tests, `make demo` and the gateway's `root_ca` share it.
extension SimulatedAppAttestCA {
    /// The root certificate's file name; a verifier's `root_ca` points at `<directory>/root.pem`.
    public static let rootCertificateFile = "root.pem"
    static let rootKeyFile = "root-key.pem"
    static let intermediateCertificateFile = "intermediate.pem"
    static let intermediateKeyFile = "intermediate-key.pem"
    /// The receipt signer's root (a verifier's `receipt_root_ca`), intermediate, and signer certificate and key.
    public static let receiptRootCertificateFile = "receipt-root.pem"
    static let receiptIntermediateFile = "receipt-intermediate.pem"
    static let receiptSignerFile = "receipt-signer.pem"
    static let receiptSignerKeyFile = "receipt-signer-key.pem"

    /// The path of the root certificate in `directory`.
    public static func rootCertificatePath(in directory: String) -> String {
        SimulatorFiles.path(directory, rootCertificateFile)
    }

    /// Whether `directory` holds a saved CA (its root certificate, at least).
    public static func exists(in directory: String) -> Bool {
        SimulatorFiles.exists(rootCertificatePath(in: directory))
    }

    /// Writes the root and intermediate certificates and keys into `directory` (created if needed; keys mode 0600).
    public func save(to directory: String) throws {
        try SimulatorFiles.createDirectory(directory)
        try SimulatorFiles.write(try rootKey.pemPKCS8(), to: SimulatorFiles.path(directory, Self.rootKeyFile), secret: true)
        try SimulatorFiles.write(try intermediateKey.pemPKCS8(), to: SimulatorFiles.path(directory, Self.intermediateKeyFile), secret: true)
        try SimulatorFiles.write(Self.pem(intermediateCertificate), to: SimulatorFiles.path(directory, Self.intermediateCertificateFile))
        if let receipts {
            try SimulatorFiles.write(try receipts.signerKey.pemPKCS8(), to: SimulatorFiles.path(directory, Self.receiptSignerKeyFile), secret: true)
            try SimulatorFiles.write(Self.pem(receipts.signerCertificate), to: SimulatorFiles.path(directory, Self.receiptSignerFile))
            try SimulatorFiles.write(Self.pem(receipts.intermediateCertificate), to: SimulatorFiles.path(directory, Self.receiptIntermediateFile))
            try SimulatorFiles.write(Self.pem(receipts.rootCertificate), to: SimulatorFiles.path(directory, Self.receiptRootCertificateFile))
        }
        // The root last: `exists(in:)` looks for it, so a half-written directory does not count as a CA.
        try SimulatorFiles.write(rootCertificatePEM, to: Self.rootCertificatePath(in: directory))
    }

    /// Reads a CA written by `save(to:)`; each certificate must match its key.
    public static func load(from directory: String) throws -> SimulatedAppAttestCA {
        func pair(_ certificateFile: String, _ keyFile: String) throws -> (X509Certificate, ECPrivateKey) {
            let path = SimulatorFiles.path(directory, certificateFile)
            guard let certificate = X509Certificate(pem: try SimulatorFiles.read(path)) else {
                throw SimulatorFiles.Failure(description: "\(path): not a PEM certificate")
            }
            let key = try ECPrivateKey(pem: try SimulatorFiles.read(SimulatorFiles.path(directory, keyFile)))
            guard withExtendedLifetime((certificate, key), { X509_check_private_key(certificate.x509, key.pkey) }) == 1 else {
                ERR_clear_error()
                throw SimulatorFiles.Failure(description: "\(path): certificate does not match \(keyFile)")
            }
            return (certificate, key)
        }
        let (root, rootKey) = try pair(rootCertificateFile, rootKeyFile)
        let (intermediate, intermediateKey) = try pair(intermediateCertificateFile, intermediateKeyFile)
        var receipts: SimulatedReceiptIssuer? = nil
        if SimulatorFiles.exists(SimulatorFiles.path(directory, receiptRootCertificateFile)) {
            func certificate(_ file: String) throws -> X509Certificate {
                let path = SimulatorFiles.path(directory, file)
                guard let c = X509Certificate(pem: try SimulatorFiles.read(path)) else {
                    throw SimulatorFiles.Failure(description: "\(path): not a PEM certificate")
                }
                return c
            }
            let (signer, signerKey) = try pair(receiptSignerFile, receiptSignerKeyFile)
            receipts = SimulatedReceiptIssuer(root: try certificate(receiptRootCertificateFile),
                                              intermediate: try certificate(receiptIntermediateFile), signer: signer, signerKey: signerKey)
        }
        return SimulatedAppAttestCA(rootCertificate: root, rootKey: rootKey, intermediateCertificate: intermediate, intermediateKey: intermediateKey,
                                    receipts: receipts)
    }
}
