import Attestation
import GatewayCLI
import GatewayComposition
import GatewayCore
import GatewayProxy
import JOSE

/// `attest-gateway playintegrity verify`: decodes one Play Integrity token with the gateway's own code (locally
/// with the classic keys, or through Google with a service account) and prints the verdict and the decision the
/// gateway's policy makes on it ("why was this device rejected?").
enum PlayIntegrityCommand {
    static let help = CommandHelp(
        "attest-gateway playintegrity verify",
        synopsis: ["--token FILE --package P", "(--decryption-key FILE --verification-key FILE | --service-account FILE)",
                   "[--certificate-sha256 D[,D…]] [--request-hash H | --nonce N] [--at RFC3339]",
                   "[--min-device-integrity LABEL] [--app-recognition V[,V…]] [--max-skew DURATION]",
                   "[--api-base-url URL] [--token-url URL] [--ca-file PEM] [--timeout DURATION]"],
        summary: "Decodes one Play Integrity token and prints the verdict and the gateway policy's decision as JSON.",
        options: [
            OptionHelp("--token", "FILE", "the token text, whitespace ignored (\"-\": standard input)"),
            OptionHelp("--package", "P", "the Android package name the token must be for"),
            OptionHelp("--decryption-key", "FILE", "Play Console's base64 AES key (classic tokens, with --verification-key)"),
            OptionHelp("--verification-key", "FILE", "Play Console's base64 DER EC public key (classic tokens)"),
            OptionHelp("--service-account", "FILE", "a Google service-account key file: other tokens go to decodeIntegrityToken"),
            OptionHelp("--certificate-sha256", "D[,D…]", "the allowed signing-certificate digests, base64url or hex (default: not checked)"),
            OptionHelp("--request-hash", "H", "must match the token's requestHash (or a classic token's nonce)"),
            OptionHelp("--nonce", "N", "must match the token's nonce"),
            OptionHelp("--at", "RFC3339", "the policy's clock (default now)"),
            OptionHelp("--min-device-integrity", "LABEL", "the weakest device label accepted (default MEETS_DEVICE_INTEGRITY)"),
            OptionHelp("--app-recognition", "V[,V…]", "the appRecognitionVerdict values accepted (default PLAY_RECOGNIZED)"),
            OptionHelp("--max-skew", "DURATION", "how far timestampMillis may be from --at, either way (default 5m)"),
            OptionHelp("--api-base-url", "URL", "Google's Play Integrity API, as api_base_url in gateway.yml"),
            OptionHelp("--token-url", "URL", "the service account's token endpoint, as token_url"),
            OptionHelp("--ca-file", "PEM", "the trust anchor for both URLs, as ca_file"),
            OptionHelp("--timeout", "DURATION", "per call to Google (default 10s)"),
        ])

    static let usage = CommandHelp.usage([help], notes: """
    A token of five dot-separated parts with --decryption-key / --verification-key (Play Console's base64 AES key and
    base64 DER EC public key files) is decoded locally; any other goes to Google's decodeIntegrityToken with the
    --service-account key file (--api-base-url, --token-url and --ca-file point it elsewhere, as in gateway.yml). The
    policy is the gateway's with its defaults: --certificate-sha256 is checked when given, --request-hash or --nonce
    against the token's requestHash / nonce when given.

    Prints one JSON object: "verified"; when false, "reason" (the gateway's reason code); "verdict" (the decoded payload,
    when it decoded); "checked" (which optional checks ran). Exit 0 verified, 1 rejected, 2 usage error.
    """)

    static func run(_ args: [String]) -> Int32 {
        switch args.first {
        case "verify":
            do throws(UsageError) {
                let options = try Options.parse(Array(args.dropFirst()), for: help).get()
                if options.help { print(usage); return ExitCode.ok }
                return try verify(options)
            } catch {
                printErr("playintegrity verify: \(error.message)\n\n\(usage)")
                return ExitCode.usage
            }
        case "--help", "-h": print(usage); return ExitCode.ok
        default: printErr(usage); return ExitCode.usage
        }
    }

    private static func verify(_ options: Options) throws(UsageError) -> Int32 {
        guard let tokenPath = options.values["--token"], let package = options.values["--package"] else {
            throw UsageError(message: "--token and --package are required")
        }
        guard PlayIntegrityTool.isPackageName(package) else {
            throw UsageError(message: "--package \(package): not an Android package name (letters, digits, \"_\" and \".\")")
        }
        if options.values["--request-hash"] != nil && options.values["--nonce"] != nil {
            throw UsageError(message: "at most one of --request-hash and --nonce")
        }
        var at = WallClock.unixSeconds()
        if let text = options.values["--at"] {
            guard let parsed = RFC3339.parse(text) else { throw UsageError(message: "--at must be RFC 3339, e.g. 2026-04-21T12:00:00Z") }
            at = parsed
        }
        let digests = try list(options, "--certificate-sha256").map { text throws(UsageError) -> String in
            guard let d = PlayIntegrityTool.certificateDigest(text) else { throw UsageError(message: "--certificate-sha256 \(text): not a SHA-256 digest") }
            return d
        }
        var maxSkew: Int64 = 300_000
        if let text = options.values["--max-skew"] {
            guard let millis = PlayIntegrityTool.durationMillis(text) else { throw UsageError(message: "--max-skew must be a duration (30s, 5m)") }
            maxSkew = Int64(millis)
        }
        let minDevice = options.values["--min-device-integrity"] ?? "MEETS_DEVICE_INTEGRITY"
        guard PlayIntegrityPolicy.deviceLabels.contains(minDevice) else {
            throw UsageError(message: "--min-device-integrity must be one of \(PlayIntegrityPolicy.deviceLabels.joined(separator: ", "))")
        }
        let recognition = options.values["--app-recognition"] == nil ? ["PLAY_RECOGNIZED"] : try list(options, "--app-recognition")
        var timeout = 10_000
        if let text = options.values["--timeout"] {
            guard let millis = PlayIntegrityTool.durationMillis(text), millis > 0 else {
                throw UsageError(message: "--timeout must be a duration (10s, 1m)")
            }
            timeout = millis
        }
        let verifier: PlayIntegrityVerifier
        do {
            verifier = try PlayIntegrityTool.verifier(
                package: package, decryptionKey: options.values["--decryption-key"], verificationKey: options.values["--verification-key"],
                serviceAccount: options.values["--service-account"], apiBaseURL: options.values["--api-base-url"],
                tokenURL: options.values["--token-url"], caFile: options.values["--ca-file"],
                timeoutMillis: timeout)
        } catch {
            throw UsageError(message: error.description)
        }
        let text = try AppAttestCommand.readInput(tokenPath, option: "--token").filter { $0 > 0x20 }

        var members: [(String, JSONValue)] = []
        var log: [String] = []
        // --at is the policy's clock only: the service account's assertion to Google carries the real time.
        let payload = verifier.decodePayloadBlocking(text, now: WallClock.unixSeconds(), log: { log.append($0) })
        var checked: [(String, JSONValue)] = [("certificate", .bool(!digests.isEmpty))]
        let reason: VerificationStatus?
        switch payload {
        case .failure(let status): reason = status
        case .success(let object):
            members.append(("verdict", .object(object)))
            let policy = PlayIntegrityPolicy(packageName: package, certificateDigests: digests, appRecognition: recognition,
                                             minDeviceIntegrity: minDevice, maxSkewMillis: maxSkew)
            reason = PlayIntegrityTool.decide(object, policy: policy, skipCertificate: digests.isEmpty, at: at,
                                              requestHash: options.values["--request-hash"], nonce: options.values["--nonce"])
            checked.append(("binding", .bool(options.values["--request-hash"] != nil || options.values["--nonce"] != nil)))
        }
        var head: [(String, JSONValue)] = [("verified", .bool(reason == nil))]
        if let reason { head.append(("reason", .string(reason.code))) }
        if !log.isEmpty { head.append(("detail", .string(log.joined(separator: "; ")))) }
        print(JSONEncoding.encode(.object(JSONObject(head + [("package", .string(package))] + members + [("checked", .object(JSONObject(checked)))]))))
        return reason == nil ? ExitCode.ok : ExitCode.failure
    }

    private static func list(_ options: Options, _ name: String) throws(UsageError) -> [String] {
        guard let text = options.values[name] else { return [] }
        let items = text.split(separator: ",").map(String.init)
        guard !items.isEmpty, !items.contains(where: \.isEmpty) else { throw UsageError(message: "\(name) must be a comma-separated list") }
        return items
    }
}
