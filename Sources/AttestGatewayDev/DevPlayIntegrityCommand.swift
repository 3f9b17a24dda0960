#if canImport(Glibc)
import Glibc
#endif
import Attestation
import GatewayCLI
import GatewayCore
import GatewayCrypto
import JOSE

/// `attest-gateway-dev playintegrity keys|token`: classic Play Integrity tokens with test keys — what Play Console's
/// developer-managed keys and a device would produce (JWE A256KW/A256GCM around JWS ES256), for the demo, the bench
/// and manual tests. The keys are written the way Play Console gives them (base64 AES key, base64 DER EC key).
enum DevPlayIntegrityCommand {
    static let keysHelp = CommandHelp(
        "attest-gateway-dev playintegrity keys", synopsis: ["--out DIR"],
        summary: "Writes test keys as Play Console gives them: DIR/decryption.key, DIR/verification.key, DIR/signing.pem.",
        options: [OptionHelp("--out", "DIR", "where the key files go (required)")])

    static let tokenHelp = CommandHelp(
        "attest-gateway-dev playintegrity token",
        synopsis: ["--keys DIR --package P [--nonce N | --request-hash H]",
                   "[--certificate-sha256 D] [--device LABEL[,LABEL]] [--recognition VERDICT] [--licensing VERDICT] [--at RFC3339]"],
        summary: "Prints one classic Play Integrity token made with the keys in DIR.",
        options: [
            OptionHelp("--keys", "DIR", "the keys from playintegrity keys (required)"),
            OptionHelp("--package", "P", "requestPackageName and packageName (required)"),
            OptionHelp("--nonce", "N", "the verdict's nonce (default random)"),
            OptionHelp("--request-hash", "H", "a requestHash instead of the nonce"),
            OptionHelp("--certificate-sha256", "D", "certificateSha256Digest (default the test certificate's, base64url)"),
            OptionHelp("--device", "LABEL[,LABEL]", "deviceRecognitionVerdict (default MEETS_DEVICE_INTEGRITY)"),
            OptionHelp("--recognition", "VERDICT", "appRecognitionVerdict (default PLAY_RECOGNIZED)"),
            OptionHelp("--licensing", "VERDICT", "appLicensingVerdict (default LICENSED)"),
            OptionHelp("--at", "RFC3339", "timestampMillis (default now)"),
        ])

    static let commands = [keysHelp, tokenHelp]

    static let usage = CommandHelp.usage(commands, notes: """
    keys   Writes DIR/decryption.key (base64 AES-256 key), DIR/verification.key (base64 DER P-256 public key) — the two
           files a play_integrity verifier's decryption_key_file / verification_key_file name — and DIR/signing.pem.
    token  Prints one classic token whose verdict says: requestPackageName and packageName P, timestampMillis now (or
           --at), the nonce (default: random), certificateSha256Digest D (default: SHA-256 of "attest-gateway test
           certificate", base64url), deviceRecognitionVerdict (default MEETS_DEVICE_INTEGRITY), appRecognitionVerdict
           (default PLAY_RECOGNIZED), appLicensingVerdict (default LICENSED).
    DEVELOPMENT ONLY.
    """)

    /// The default signing-certificate digest of minted tokens.
    static let testCertificateDigest = Base64URL.encode(SHA256Hasher.hash(Array("attest-gateway test certificate".utf8)))

    static func run(_ args: [String]) -> Int32 {
        let rest = Array(args.dropFirst())
        switch args.first {
        case "keys": return keys(rest)
        case "token": return token(rest)
        case "--help", "-h": print(usage); return ExitCode.ok
        default: printErr(usage); return ExitCode.usage
        }
    }

    private static func keys(_ args: [String]) -> Int32 {
        guard let options = DevCommand.parse(args, for: keysHelp, context: "playintegrity keys", usage: usage) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let dir = options.values["--out"] else { printErr("playintegrity keys: --out DIR is required\n\n\(usage)"); return ExitCode.usage }
        do {
            let signing = try ECPrivateKey.generate(.p256)
            guard let point = ECPublicKey(uncompressedP256: try signing.uncompressedPublicPoint()) else { return ExitCode.failure }
            mkdir(dir, 0o700)
            try write(dir + "/decryption.key", StandardBase64.encode(SecureRandom.bytes(32)) + "\n")
            try write(dir + "/verification.key", StandardBase64.encode(point.spkiDER) + "\n")
            try write(dir + "/signing.pem", try signing.pemPKCS8())
        } catch {
            printErr("playintegrity keys: \(error)")
            return ExitCode.failure
        }
        print("wrote \(dir)/decryption.key, \(dir)/verification.key, \(dir)/signing.pem")
        return ExitCode.ok
    }

    private static func token(_ args: [String]) -> Int32 {
        guard let options = DevCommand.parse(args, for: tokenHelp, context: "playintegrity token", usage: usage) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let dir = options.values["--keys"], let package = options.values["--package"] else {
            printErr("playintegrity token: --keys and --package are required\n\n\(usage)")
            return ExitCode.usage
        }
        var at = WallClock.unixSeconds()
        if let text = options.values["--at"] {
            guard let parsed = RFC3339.parse(text) else { printErr("playintegrity token: --at must be RFC 3339"); return ExitCode.usage }
            at = parsed
        }
        do {
            guard let aes = StandardBase64.decode(try read(dir + "/decryption.key")), aes.count == 32 else {
                printErr("playintegrity token: \(dir)/decryption.key is not a base64 AES-256 key")
                return ExitCode.failure
            }
            let signing = try ECPrivateKey(pem: try read(dir + "/signing.pem"))
            var request: [(String, JSONValue)] = [("requestPackageName", .string(package)), ("timestampMillis", .string(String(at * 1000)))]
            if let hash = options.values["--request-hash"] {
                request.append(("requestHash", .string(hash)))
            } else {
                request.append(("nonce", .string(options.values["--nonce"] ?? Base64URL.encode(SecureRandom.bytes(32)))))
            }
            let labels = (options.values["--device"] ?? "MEETS_DEVICE_INTEGRITY").split(separator: ",").map { JSONValue.string(String($0)) }
            let verdict: JSONValue = .object(JSONObject([
                ("requestDetails", .object(JSONObject(request))),
                ("appIntegrity", .object(JSONObject([
                    ("appRecognitionVerdict", .string(options.values["--recognition"] ?? "PLAY_RECOGNIZED")),
                    ("packageName", .string(package)),
                    ("certificateSha256Digest", [.string(options.values["--certificate-sha256"] ?? testCertificateDigest)]),
                    ("versionCode", "1"),
                ]))),
                ("deviceIntegrity", .object(JSONObject([("deviceRecognitionVerdict", .array(labels))]))),
                ("accountDetails", .object(JSONObject([("appLicensingVerdict", .string(options.values["--licensing"] ?? "LICENSED"))]))),
            ]))
            let jws = try JWSSigner.signES256(header: ["alg": "ES256"], payload: Array(JSONEncoding.encode(verdict).utf8), key: signing)
            guard let token = CompactJWE.encrypt(Array(jws.utf8), kek: aes) else { return ExitCode.failure }
            print(token)
            return ExitCode.ok
        } catch {
            printErr("playintegrity token: \(error)")
            return ExitCode.failure
        }
    }

    private static func read(_ path: String) throws -> String {
        guard let bytes = SmallFile.read(path) else { throw DevFileError(description: "cannot read \(path)") }
        return String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
    }

    private static func write(_ path: String, _ text: String) throws {
        guard let file = fopen(path, "w") else { throw DevFileError(description: "cannot write \(path)") }
        defer { fclose(file) }
        chmod(path, 0o600)
        let bytes = Array(text.utf8)
        guard fwrite(bytes, 1, bytes.count, file) == bytes.count else { throw DevFileError(description: "cannot write \(path)") }
    }

    struct DevFileError: Error, CustomStringConvertible { let description: String }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        let u = Array(utf8)
        var a = 0, b = u.count
        while a < b, u[a] <= 0x20 { a += 1 }
        while b > a, u[b - 1] <= 0x20 { b -= 1 }
        return String(decoding: u[a..<b], as: UTF8.self)
    }
}
