import Foundation
import Testing
import Attestation
import GatewayCore
import GatewayCrypto

/// One receipt vector of shared/vectors/appattest-receipts (see its README, copied beside the files).
struct ReceiptVector: CustomStringConvertible, Sendable {
    let name: String
    let cms: [UInt8]
    let appID: String
    let keyID: [UInt8]
    let environment: String
    let kind: String
    let riskMetric: Int?
    let createdAt: Int64
    let notBefore: Int64?
    let expiresAt: Int64?
    let token: String
    let attestation: [UInt8]?
    let isAttStmtReceipt: Bool

    var description: String { name }

    static let directory = Bundle.module.url(forResource: "AppAttestReceiptVectors", withExtension: nil)!

    static let all: [ReceiptVector] = {
        let names = try! FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") }.sorted()
        return names.map { name in
            let json = try! JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent(name))) as! [String: Any]
            let belongs = json["belongs_to"] as! [String: Any]
            let expected = json["expected"] as! [String: Any]
            let decoded = json["decoded"] as! [String: Any]
            func time(_ key: String) -> Int64? { (expected[key] as? String).flatMap(RFC3339.parse) }
            return ReceiptVector(
                name: name, cms: [UInt8](Data(base64Encoded: json["receipt_base64"] as! String)!),
                appID: belongs["app_id"] as! String,
                keyID: [UInt8](Data(base64Encoded: belongs["key_id_base64"] as! String)!),
                environment: belongs["environment"] as! String, kind: expected["type"] as! String,
                riskMetric: expected["risk_metric"] as? Int, createdAt: time("creation_time")!,
                notBefore: time("not_before"), expiresAt: time("expiration_time"), token: decoded["token"] as! String,
                attestation: (belongs["attestation_base64"] as? String).map { [UInt8](Data(base64Encoded: $0)!) },
                isAttStmtReceipt: belongs["is_attstmt_receipt_of_that_attestation"] as? Bool ?? false)
        }
    }()
}

@Suite struct AppAttestReceiptTests {
    let verifier = AppAttestReceiptVerifier(root: AppAttestRoots.appleRootG3)

    @Test func thereAreTwentyReceipts() {
        #expect(ReceiptVector.all.count == 20)
        #expect(ReceiptVector.all.filter { $0.kind == "ATTEST" }.count == 7)
    }

    @Test func builtInRootIsTheVectorsAppleRootG3() throws {
        let pem = try String(contentsOf: ReceiptVector.directory.appendingPathComponent("apple-root-ca-g3.pem"), encoding: .utf8)
        let copy = try #require(X509Certificate(pem: pem))
        #expect(copy.der == AppAttestRoots.appleRootG3.der)
        #expect(hexString(SHA256Hasher.hash(copy.der)) == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
    }

    @Test(arguments: ReceiptVector.all)
    func receiptVerifiesAndParses(_ v: ReceiptVector) throws {
        let r = try verifier.verify(v.cms, appID: v.appID, keyID: v.keyID, environment: .development).get()
        #expect(r.kind.rawValue == v.kind)
        #expect(r.riskMetric == v.riskMetric)
        #expect(r.environment == "sandbox")
        #expect(r.createdAt == v.createdAt)
        #expect(r.notBefore == v.notBefore)
        #expect(r.expiresAt == v.expiresAt)
        #expect(r.token == v.token)
        #expect(r.keyID == v.keyID)
        if v.kind == "ATTEST" { #expect(r.notBefore == nil && r.riskMetric == nil) }
    }

    @Test(arguments: ReceiptVector.all)
    func aFlippedPayloadByteFails(_ v: ReceiptVector) throws {
        // Flip a byte of the app id inside the signed content: the signature must no longer verify.
        let needle = Array(v.appID.utf8)
        let at = try #require(firstRange(of: needle, in: v.cms))
        var tampered = v.cms
        tampered[at + 3] ^= 0x01
        let result = verifier.verify(tampered, appID: v.appID, keyID: v.keyID)
        #expect(result.failure == .untrusted)
    }

    @Test(arguments: ReceiptVector.all)
    func wrongAppKeyOrEnvironmentFail(_ v: ReceiptVector) {
        #expect(verifier.verify(v.cms, appID: v.appID + "x", keyID: v.keyID).failure == .appIDMismatch)
        var otherKey = v.keyID
        otherKey[0] ^= 0x01
        #expect(verifier.verify(v.cms, appID: v.appID, keyID: otherKey).failure == .keyMismatch)
        #expect(verifier.verify(v.cms, appID: v.appID, keyID: v.keyID, environment: .production).failure == .wrongEnvironment)
    }

    @Test func anotherRootIsUntrusted() {
        let v = ReceiptVector.all[0]
        #expect(AppAttestReceiptVerifier(root: AppAttestRoots.apple).verify(v.cms, appID: v.appID, keyID: v.keyID).failure == .untrusted)
    }

    @Test func garbageIsMalformed() {
        #expect(AppAttestReceiptVerifier.decode([0x30, 0x03, 0x02, 0x01, 0x01]).failure != nil)
        #expect(AppAttestReceiptVerifier.decode([]).failure != nil)
        let v = ReceiptVector.all[0]
        #expect(AppAttestReceiptVerifier.decode(Array(v.cms.prefix(v.cms.count / 2))).failure != nil)
    }

    /// The receipt in each attestation's attStmt is the ATTEST receipt of the vectors (same bytes).
    @Test(arguments: ReceiptVector.all.filter { $0.isAttStmtReceipt })
    func attestationsCarryTheirAttestReceipt(_ v: ReceiptVector) throws {
        let attestation = try #require(v.attestation)
        #expect(firstRange(of: v.cms, in: attestation) != nil)
    }

    func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] && Array(haystack[i..<i + needle.count]) == needle {
            return i
        }
        return nil
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
