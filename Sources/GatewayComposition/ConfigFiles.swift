import Attestation
import GatewayConfig
import GatewayCore
import GatewayCrypto
import GatewayProxy
import JOSE
import KeySetCache
import OutboundHTTP

/// The files and key sets a configuration names, read the same way by `serve` (at start-up and reload) and by
/// `check-config` (ConfigFileCheck), so a file that would stop one stops the other.
enum ConfigFiles {
    /// `builtin`, or a PEM certificate file read now (a bad one stops start-up, naming `key`).
    static func certificate(_ setting: String, builtin: X509Certificate, key: String) throws(ProxyRuntime.StartupError) -> X509Certificate {
        if setting == "builtin" { return builtin }
        guard let bytes = try? KeySetSources.file(path: setting)().body,
              let cert = X509Certificate(pem: String(decoding: bytes, as: UTF8.self)) else {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read a PEM certificate from \(setting)")
        }
        return cert
    }

    /// An Apple `.p8` key (PKCS#8 PEM, EC) read now (a bad one stops start-up, naming `key`).
    static func appleKey(_ path: String, key: String) throws(ProxyRuntime.StartupError) -> ECPrivateKey {
        do {
            let pem = try KeySetSources.file(path: path, maxBytes: 64 * 1024)().body
            return try ECPrivateKey(pem: String(decoding: pem, as: UTF8.self))
        } catch {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read an EC private key (.p8) from \(path): \(error)")
        }
    }

    /// The key set of an App Check verifier: from `jwks_file` (read by the first refresh) or `jwks_url` (fetched by
    /// the refresher; nothing is fetched here).
    static func keySet(_ c: AppCheckVerifierConfig, onEvent: (@Sendable (KeySetEvent) -> Void)?) -> KeySetCache<JWKS> {
        let fetch: @Sendable () throws -> KeySetFetch
        if let file = c.jwksFile {
            fetch = KeySetSources.file(path: file)
        } else {
            let url = c.jwksURL ?? "https://firebaseappcheck.googleapis.com/v1/jwks"
            fetch = KeySetSources.adapting(CurlHTTPClient().keySetFetch(url: url, timeoutMillis: 10_000))
        }
        return KeySetCache<JWKS>(
            policy: .init(maxAgeSeconds: c.jwksMaxAgeMillis / 1000),
            clock: { WallClock.unixSeconds() },
            fetch: fetch,
            parse: { bytes in try JWKS.parse(bytes) },
            onEvent: onEvent,
            countKeys: { $0.keys.count })
    }
}
