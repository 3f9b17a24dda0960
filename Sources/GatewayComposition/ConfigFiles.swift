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

    /// A Play Console key file: base64 (standard or URL alphabet, whitespace and line breaks ignored) of the key's bytes.
    static func base64File(_ path: String, key: String, what: String) throws(ProxyRuntime.StartupError) -> [UInt8] {
        guard let bytes = try? KeySetSources.file(path: path, maxBytes: 64 * 1024)().body else {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read \(path)")
        }
        let text = String(decoding: bytes.filter { $0 > 0x20 }, as: UTF8.self)
        guard let decoded = StandardBase64.decode(text) ?? Base64URL.decode(text) ?? StandardBase64.decode(Self.padded(text)) else {
            throw ProxyRuntime.StartupError(key: key, message: "\(path) is not base64 (\(what), as Play Console gives it)")
        }
        return decoded
    }

    private static func padded(_ text: String) -> String { text + String(repeating: "=", count: (4 - text.utf8.count % 4) % 4) }

    /// The classic-token keys of a `play_integrity` verifier (nil when it has none).
    static func playIntegrityKeys(_ c: PlayIntegrityVerifierConfig, base: String) throws(ProxyRuntime.StartupError) -> PlayIntegrityClassicKeys? {
        guard let decryption = c.decryptionKeyFile, let verification = c.verificationKeyFile else { return nil }
        let aes = try base64File(decryption, key: base + ".decryption_key_file", what: "an AES-256 key")
        guard aes.count == 32 else {
            throw ProxyRuntime.StartupError(key: base + ".decryption_key_file", message: "\(decryption) holds \(aes.count) bytes, not a 32-byte AES-256 key")
        }
        let der = try base64File(verification, key: base + ".verification_key_file", what: "a DER EC public key")
        guard let ec = ECPublicKey(spkiDER: der), let keys = PlayIntegrityClassicKeys(decryptionKey: aes, verificationKey: ec) else {
            throw ProxyRuntime.StartupError(key: base + ".verification_key_file",
                                            message: "\(verification) is not a P-256 public key (base64 of DER SubjectPublicKeyInfo)")
        }
        return keys
    }

    /// A Google service account key file (JSON), read now. `usesTokenURI`: no `token_url` is configured, so the
    /// file's `token_uri` is where the signed assertion (good for an hour) goes: https, or http to loopback only.
    static func serviceAccount(_ path: String, key: String, usesTokenURI: Bool) throws(ProxyRuntime.StartupError) -> GoogleServiceAccount {
        guard let bytes = try? KeySetSources.file(path: path, maxBytes: 64 * 1024)().body else {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read \(path)")
        }
        let account: GoogleServiceAccount
        do { account = try GoogleServiceAccount.parse(bytes) } catch {
            throw ProxyRuntime.StartupError(key: key, message: "\(path) is not a service account key file: \(error)")
        }
        if usesTokenURI, let uri = account.tokenURI, !ConfigValue.isKeyServerURL(uri) {
            throw ProxyRuntime.StartupError(key: key, message: "\(path): token_uri \(uri) must use https (plain http only for loopback hosts)")
        }
        return account
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
