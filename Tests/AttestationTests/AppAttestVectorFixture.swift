import Foundation
import GatewayCrypto

/// One conformance vector from AppAttestVectors/ (see its README for the fields).
struct AppAttestVector: Sendable, CustomStringConvertible {
    struct Assertion: Sendable {
        let assertion: [UInt8]
        let clientData: [UInt8]
        let publicKey: [UInt8]
        let previousCounter: UInt32
        let expectedCounter: UInt32
    }

    let name: String
    let appID: String
    let environment: String?
    let keyID: String?
    let clientDataHash: [UInt8]?
    let attestation: [UInt8]?
    let verifyAt: Int64?
    let leafNotBefore: Int64?
    let leafNotAfter: Int64?
    let expectedPublicKey: [UInt8]?
    let assertions: [Assertion]

    var description: String { name }

    static let directory = Bundle.module.url(forResource: "AppAttestVectors", withExtension: nil)!

    static let root: X509Certificate = {
        let pem = try! String(contentsOf: directory.appendingPathComponent("apple-app-attest-root-ca.pem"), encoding: .utf8)
        return X509Certificate(pem: pem)!
    }()

    static let all: [AppAttestVector] = {
        let names = try! FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") }.sorted()
        return names.map { load(directory.appendingPathComponent($0)) }
    }()

    static let withAttestation: [AppAttestVector] = all.filter { $0.attestation != nil }
    static let withAssertions: [AppAttestVector] = all.filter { !$0.assertions.isEmpty }

    static func named(_ name: String) -> AppAttestVector { all.first { $0.name == name }! }

    private static func load(_ url: URL) -> AppAttestVector {
        let json = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
        func bytes(_ v: Any?) -> [UInt8]? { (v as? String).flatMap { Data(base64Encoded: $0) }.map { Array($0) } }
        func time(_ v: Any?) -> Int64? { (v as? String).map(parseTime) }
        let assertions = (json["assertions"] as? [[String: Any]] ?? []).map {
            Assertion(assertion: bytes($0["assertion"])!, clientData: bytes($0["clientData"])!, publicKey: bytes($0["publicKey"])!,
                      previousCounter: UInt32($0["previousCounter"] as! Int), expectedCounter: UInt32($0["expectedCounter"] as! Int))
        }
        return AppAttestVector(
            name: json["name"] as! String, appID: json["appId"] as! String, environment: json["environment"] as? String,
            keyID: json["keyId"] as? String, clientDataHash: bytes(json["clientDataHash"]), attestation: bytes(json["attestation"]),
            verifyAt: time(json["verifyAt"]), leafNotBefore: time(json["leafNotBefore"]), leafNotAfter: time(json["leafNotAfter"]),
            expectedPublicKey: bytes(json["expectedPublicKey"]), assertions: assertions)
    }

    /// `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` to unix seconds (fraction dropped).
    static func parseTime(_ s: String) -> Int64 {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return Int64(formatter.date(from: String(s.prefix(19)) + "Z")!.timeIntervalSince1970)
    }
}

/// The offset of the first occurrence of `needle` in `haystack` (to flip one byte of a field in the CBOR bytes).
func firstOffset(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard needle.count <= haystack.count else { return nil }
    return (0...(haystack.count - needle.count)).first { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
}

/// `bytes` with the byte at `offset` XORed with 0x01.
func flipped(_ bytes: [UInt8], at offset: Int) -> [UInt8] {
    var copy = bytes
    copy[offset] ^= 0x01
    return copy
}
