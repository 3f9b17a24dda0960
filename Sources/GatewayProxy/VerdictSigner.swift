import Attestation
import GatewayConfig
import GatewayCore
import GatewayCrypto
import HTTP1
import JOSE
import Observability
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `verdict_token`: each verified request reaches its upstream with an ES256 JWT of the gateway's verdict
/// (PROTOCOL.md Additions "Verdict token"), so an upstream that is reachable other ways than through the gateway
/// can check that a request was verified, for what, and when, with the key set served at admin `/jwks` (and
/// `jwks_path`). The key is the configured PEM file, or one generated at start. Immutable; shared by the loops.
public final class VerdictSigner: Sendable {
    let config: VerdictTokenConfig
    /// The field name as sent upstream, and lower-cased (stripped from clients' requests).
    let header: [UInt8]
    let headerLower: [UInt8]
    let kid: String
    /// `{"keys":[…]}`, the public key only.
    let jwks: String
    private let key: ECPrivateKey

    /// What `serve` would refuse in an existing `key_file` (check-config); nil: usable, or absent (generated).
    public static func keyFileProblem(_ path: String) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        guard let key = try? ECPrivateKey(pem: text), let point = try? key.uncompressedPublicPoint(), point.count == 65 else {
            return "\(path) is not a PEM P-256 private key"
        }
        return nil
    }

    init(config: VerdictTokenConfig) throws(ProxyRuntime.StartupError) {
        self.config = config
        header = Array(config.header.utf8)
        headerLower = Array(config.header.lowercased().utf8)
        var loaded: ECPrivateKey? = nil
        if let path = config.keyFile, let text = try? String(contentsOfFile: path, encoding: .utf8) {
            do { loaded = try ECPrivateKey(pem: text) } catch {
                throw .init(key: "verdict_token.key_file", message: "\(path) is not a PEM P-256 private key")
            }
        }
        let key: ECPrivateKey
        if let loaded {
            key = loaded
        } else {
            do { key = try ECPrivateKey.generate(.p256) } catch {
                throw .init(key: "verdict_token", message: "cannot generate a P-256 key")
            }
            Logger.warn("verdict_token: signing with a key generated at start (the JWKS changes per restart)",
                        ["key_file": config.keyFile ?? "-"])
        }
        let point: [UInt8]
        do { point = try key.uncompressedPublicPoint() } catch {
            throw .init(key: "verdict_token.key_file", message: "the key is not a P-256 key")
        }
        guard point.count == 65 else { throw .init(key: "verdict_token.key_file", message: "the key is not a P-256 key") }
        let x = Base64URL.encode(Array(point[1..<33])), y = Base64URL.encode(Array(point[33..<65]))
        // RFC 7638 thumbprint: SHA-256 of the required members in lexicographic order, no whitespace.
        let thumbprint = "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(x)\",\"y\":\"\(y)\"}"
        kid = Base64URL.encode(SHA256Hasher.hash(Array(thumbprint.utf8)))
        jwks = JSONEncoding.encode(["keys": [["kty": "EC", "crv": "P-256", "x": .string(x), "y": .string(y),
                                              "kid": .string(kid), "use": "sig", "alg": "ES256"]]])
        self.key = key
    }

    /// The token for a verified request: nil when signing failed (the request is then refused, never forwarded
    /// without the token an upstream may require).
    func token(upstream: String, route: String, verifier: String, credential: PassedCredential, requestID: String,
               method: String, target: String, now: Int64) -> String? {
        var keyID: JSONValue = .null
        var risk: JSONValue = .null
        for f in credential.fields {
            let name = f.name.description
            if name == "X-Attest-Key-Id" { keyID = .string(f.value) }
            if name == "X-Attest-Risk-Metric", let n = Int(f.value) { risk = .number(JSONNumber(Int64(n))) }
        }
        let claims: JSONValue = [
            "iss": "attest-gateway", "aud": .string(upstream),
            "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + Int64(config.ttlMillis / 1000))),
            "verdict": "verified", "route": .string(route), "verifier": .string(verifier),
            "app_id": credential.appID.map { .string($0) } ?? .null, "key_id": keyID, "risk": risk,
            "request_id": .string(requestID), "method": .string(method), "target": .string(target),
        ]
        return try? JWSSigner.signES256(claims: claims, kid: kid, key: key)
    }
}
