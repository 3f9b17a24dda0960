import Attestation
import GatewayCrypto

/// The `receipt` target: App Attest receipts (CMS SignedData, BER) through OpenSSL's CMS and ASN.1 readers and the
/// receipt field parser, plus a full verification against the built-in Apple Root CA - G3.
///
/// Invariants: a decoded receipt's key id is SHA-256 of its attested key; the verification of bytes that do not
/// even decode fails; whatever verifies also decodes to the same fields.
enum ReceiptHarness {
    static let verifier = AppAttestReceiptVerifier(root: AppAttestRoots.appleRootG3)

    static func run(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        _ = ASN1.elements(of: bytes, set: true)
        _ = ASN1.elements(of: bytes, set: false)
        let decoded = AppAttestReceiptVerifier.decode(bytes)
        if case .success(let r) = decoded {
            fuzzCheck(r.keyID == SHA256Hasher.hash(r.attestedPublicKey), "receipt key id is not SHA-256 of its key")
            let verified = verifier.verify(bytes, appID: r.appID, keyID: r.keyID)
            if case .success(let v) = verified {
                fuzzCheck(v == r, "verified fields differ from decoded ones")
            }
        } else {
            fuzzCheck((try? verifier.verify(bytes, appID: "", keyID: []).get()) == nil, "verified what does not decode")
        }
    }
}
