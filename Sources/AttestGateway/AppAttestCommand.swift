import Attestation
import GatewayCLI
import GatewayCore
import GatewayCrypto
import JOSE

/// `attest-gateway appattest …`: verifies one App Attest attestation or assertion offline with the gateway's own
/// verifiers and prints why it passed or failed ("why was this device rejected?"). Time, root and counter come
/// from the command line instead of the clock and the state store.
enum AppAttestCommand {
    static let attestationHelp = CommandHelp(
        "attest-gateway appattest verify-attestation",
        synopsis: ["--attestation FILE --key-id BASE64 --team-id T --bundle-id B",
                   "(--challenge TEXT | --client-data-hash HEX) [--environment ENV] [--at RFC3339] [--root-ca PEM]"],
        summary: "Verifies one App Attest attestation offline and prints the verdict and its fields as JSON.",
        options: [
            OptionHelp("--attestation", "FILE", "the attestation object, raw CBOR or base64 (\"-\": standard input)"),
            OptionHelp("--key-id", "BASE64", "the key id the app sent (standard base64 of 32 bytes)"),
            OptionHelp("--team-id", "T", "the Apple team id (the App ID is T.B)"),
            OptionHelp("--bundle-id", "B", "the bundle id"),
            OptionHelp("--challenge", "TEXT", "clientDataHash = SHA-256(TEXT), as the gateway's registration computes it"),
            OptionHelp("--client-data-hash", "HEX", "the clientDataHash as given"),
            OptionHelp("--environment", "ENV", "the aaguid accepted: production (default), development or any"),
            OptionHelp("--at", "RFC3339", "the verification time (default now)"),
            OptionHelp("--root-ca", "PEM", "the trust anchor (default the built-in Apple App Attestation Root CA)"),
        ])

    static let assertionHelp = CommandHelp(
        "attest-gateway appattest verify-assertion",
        synopsis: ["--assertion FILE --client-data FILE --team-id T --bundle-id B",
                   "(--public-key PEM | --attestation FILE) [--previous-counter N]"],
        summary: "Verifies one App Attest assertion offline against a key and prints the verdict and its fields as JSON.",
        options: [
            OptionHelp("--assertion", "FILE", "the assertion object, raw CBOR or base64 (\"-\": standard input)"),
            OptionHelp("--client-data", "FILE", "the exact bytes the app hashed"),
            OptionHelp("--team-id", "T", "the Apple team id (the App ID is T.B)"),
            OptionHelp("--bundle-id", "B", "the bundle id"),
            OptionHelp("--public-key", "PEM", "the key, a P-256 \"BEGIN PUBLIC KEY\" PEM file"),
            OptionHelp("--attestation", "FILE", "take the key from this attestation's leaf certificate (its chain not checked)"),
            OptionHelp("--previous-counter", "N", "the highest counter accepted so far, 0 to 4294967295 (default 0)"),
        ])

    static let usage = CommandHelp.usage([attestationHelp, assertionHelp], notes: """
    An attestation or assertion FILE holds the raw CBOR or its base64 text; a --client-data FILE holds the exact
    bytes the app hashed. "-" reads standard input (for one FILE or PEM at most). --challenge hashes TEXT with
    SHA-256, as the gateway's registration does; --client-data-hash is used as given. --at is RFC 3339, e.g.
    2026-04-21T12:00:00Z. --attestation (verify-assertion) takes the key from that attestation's leaf certificate
    without checking its chain (verify the attestation itself with verify-attestation).

    Prints one JSON object: "verified"; when false, "reason" (the gateway's reason code) and "detail" (the check
    that failed); and every field that could be decoded. Exit 0 verified, 1 rejected, 2 usage error.
    """)

    static func run(_ args: [String]) -> Int32 {
        let rest = Array(args.dropFirst())
        switch args.first {
        case "verify-attestation": return command("verify-attestation", attestationHelp, rest, verifyAttestation)
        case "verify-assertion": return command("verify-assertion", assertionHelp, rest, verifyAssertion)
        case "--help", "-h": print(usage); return ExitCode.ok
        default: printErr(usage); return ExitCode.usage
        }
    }

    /// Parses `args`, runs `body` and turns a usage error into a message and exit code 2.
    private static func command(_ name: String, _ help: CommandHelp, _ args: [String],
                                _ body: (Options) throws(UsageError) -> Int32) -> Int32 {
        do throws(UsageError) {
            let options = try Options.parse(args, for: help).get()
            if options.help { print(usage); return ExitCode.ok }
            return try body(options)
        } catch {
            printErr("appattest \(name): \(error.message)\n\n\(usage)")
            return ExitCode.usage
        }
    }

    private static func verifyAttestation(_ options: Options) throws(UsageError) -> Int32 {
        try atMostOneStandardInput(options, "--attestation", "--root-ca")
        let keyID = try required(options, "--key-id")
        let appID = try appID(options)
        let clientDataHash: [UInt8]
        switch try oneOf(options, "--challenge", "--client-data-hash") {
        case ("--challenge", let text): clientDataHash = SHA256Hasher.hash(Array(text.utf8))
        case (_, let hex):
            guard let bytes = decodeHex(hex) else { throw UsageError(message: "--client-data-hash must be hex") }
            clientDataHash = bytes
        }
        let environment: AppAttestEnvironmentPolicy
        switch options.values["--environment"] ?? "production" {
        case "production": environment = .production
        case "development": environment = .development
        case "any": environment = .any
        case let other: throw UsageError(message: "--environment must be production, development or any, not \"\(other)\"")
        }
        var at = WallClock.unixSeconds()
        if let text = options.values["--at"] {
            guard let parsed = RFC3339.parse(text) else { throw UsageError(message: "--at must be RFC 3339, e.g. 2026-04-21T12:00:00Z") }
            at = parsed
        }
        var root = AppAttestRoots.apple
        if let path = options.values["--root-ca"] {
            guard let certificate = X509Certificate(pem: String(decoding: try readInput(path, option: "--root-ca"), as: UTF8.self)) else {
                throw UsageError(message: "--root-ca \(path): not a PEM certificate")
            }
            root = certificate
        }
        let attestation = cborOrBase64(try readInput(try required(options, "--attestation"), option: "--attestation"))

        let (claims, result) = AppAttestAttestationVerifier().verifyAndDecode(
            attestation: attestation, keyID: keyID, clientDataHash: clientDataHash, appID: appID,
            environment: environment, root: root, at: at)
        var fields: [(String, JSONValue)] = [("app_id", .string(appID))]
        if let claims { fields += attestationFields(claims) }
        return emit(result.failure, fields)
    }

    private static func verifyAssertion(_ options: Options) throws(UsageError) -> Int32 {
        let appID = try appID(options)
        try atMostOneStandardInput(options, "--assertion", "--client-data", "--attestation", "--public-key")
        var previousCounter: UInt32 = 0
        if let text = options.values["--previous-counter"] {
            guard let n = UInt32(text) else { throw UsageError(message: "--previous-counter must be 0…\(UInt32.max)") }
            previousCounter = n
        }
        let key = try oneOf(options, "--public-key", "--attestation")
        let assertion = cborOrBase64(try readInput(try required(options, "--assertion"), option: "--assertion"))
        let clientData = try readInput(try required(options, "--client-data"), option: "--client-data")

        let fields: [(String, JSONValue)] = [("app_id", .string(appID))]
        let publicKey: [UInt8]
        var environment: AppAttestEnvironment?
        if key.option == "--public-key" {
            let pem = String(decoding: try readInput(key.value, option: "--public-key"), as: UTF8.self)
            guard let parsed = ECPublicKey(pem: pem) else { throw UsageError(message: "--public-key \(key.value): not a P-256 public key PEM") }
            publicKey = parsed.uncompressedPoint
        } else {
            // The key as the attestation certifies it; the chain is deliberately not checked here.
            let claims: AppAttestAttestationClaims
            switch AppAttestAttestationClaims.decode(attestation: cborOrBase64(try readInput(key.value, option: "--attestation"))) {
            case .failure(let failure): return emit(failure, fields)
            case .success(let decoded): claims = decoded
            }
            guard let certified = claims.certifiedPublicKey else { return emit(.badCertificate, fields) }
            publicKey = certified
            environment = claims.environment
        }

        let (authData, result) = AppAttestAssertionVerifier().verifyAndDecode(
            assertion: assertion, clientData: clientData, publicKey: publicKey, appID: appID, previousCounter: previousCounter)
        return emit(result.failure, fields + assertionFields(
            authData, publicKey: publicKey, environment: environment, previousCounter: previousCounter))
    }

    private static func required(_ options: Options, _ name: String) throws(UsageError) -> String {
        guard let value = options.values[name] else { throw UsageError(message: "\(name) is required") }
        return value
    }

    /// Standard input can be read once only.
    private static func atMostOneStandardInput(_ options: Options, _ names: String...) throws(UsageError) {
        let stdin = names.filter { options.values[$0] == "-" }
        guard stdin.count <= 1 else { throw UsageError(message: "only one of \(stdin.joined(separator: ", ")) can be \"-\"") }
    }

    /// Exactly one of two alternative options and its value.
    private static func oneOf(_ options: Options, _ a: String, _ b: String) throws(UsageError) -> (option: String, value: String) {
        switch (options.values[a], options.values[b]) {
        case (let value?, nil): return (a, value)
        case (nil, let value?): return (b, value)
        default: throw UsageError(message: "exactly one of \(a) and \(b) is required")
        }
    }

    /// `TEAM.bundle` from --team-id and --bundle-id.
    private static func appID(_ options: Options) throws(UsageError) -> String {
        let team = try required(options, "--team-id"), bundle = try required(options, "--bundle-id")
        guard !team.isEmpty, !bundle.isEmpty else { throw UsageError(message: "--team-id and --bundle-id must not be empty") }
        return team + "." + bundle
    }
}

extension Result {
    /// The failure, nil on success.
    fileprivate var failure: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
