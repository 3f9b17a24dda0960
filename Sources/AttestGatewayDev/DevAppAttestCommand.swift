import Attestation
import Foundation
import GatewayCLI
import GatewayCore
import GatewayCrypto
import GatewayTestSupport
import JOSE

/// `attest-gateway-dev appattest …`: a simulated App Attest device and Apple CA for the end-to-end tests and
/// `make demo`. Each command prints JSON lines in the exact shape a client sends to the gateway.
enum DevAppAttestCommand {
    static let caHelp = CommandHelp(
        "attest-gateway-dev appattest ca", synopsis: ["--dir DIR"],
        summary: "Creates a simulated App Attestation CA in DIR unless one is there; prints its root certificate's path.",
        options: [OptionHelp("--dir", "DIR", "the CA's directory (required)")])

    static let attestHelp = CommandHelp(
        "attest-gateway-dev appattest attest",
        synopsis: ["--dir DIR --ca CA_DIR --team-id T --bundle-id B --challenge TEXT",
                   "[--environment ENV] [--validation-category N] [--bundle-version V] [--new-key]"],
        summary: "Attests the simulated device's key and prints the registration request body.",
        options: [
            OptionHelp("--dir", "DIR", "the device's directory (created with a new key when it holds none; required)"),
            OptionHelp("--ca", "CA_DIR", "the CA that issues the leaf (from appattest ca; required)"),
            OptionHelp("--team-id", "T", "the Apple team id (required)"),
            OptionHelp("--bundle-id", "B", "the bundle id (required)"),
            OptionHelp("--challenge", "TEXT", "clientDataHash = SHA-256(TEXT) (required)"),
            OptionHelp("--environment", "ENV", "production (default) or development"),
            OptionHelp("--validation-category", "N", "add the iOS 27 validation-category extension (N as 4 bytes little-endian)"),
            OptionHelp("--bundle-version", "V", "add the iOS 27 bundle-version extension"),
            OptionHelp("--new-key", nil, "always a new key (as after a reinstall), replacing a saved device"),
        ])

    static let assertHelp = CommandHelp(
        "attest-gateway-dev appattest assert",
        synopsis: ["--dir DIR",
                   "(--client-data-file FILE | --challenge TEXT | --method M --target T [--body-file FILE] [--timestamp N])",
                   "[--count N] [--counter START]"],
        summary: "Prints assertion headers signed by the simulated device, one JSON line per assertion.",
        options: [
            OptionHelp("--dir", "DIR", "the device's directory (from appattest attest; required)"),
            OptionHelp("--client-data-file", "FILE", "clientData is this file's bytes"),
            OptionHelp("--challenge", "TEXT", "binding: challenge — clientData is TEXT"),
            OptionHelp("--method", "M", "binding: request — the request's method"),
            OptionHelp("--target", "T", "binding: request — the request target"),
            OptionHelp("--body-file", "FILE", "binding: request — the body (default empty)"),
            OptionHelp("--timestamp", "N", "binding: request — unix seconds (default now)"),
            OptionHelp("--count", "N", "how many assertions, 1 to 10000 (default 1)"),
            OptionHelp("--counter", "START", "the first counter (default the saved counter plus 1)"),
        ])

    static let receiptHelp = CommandHelp(
        "attest-gateway-dev appattest receipt", synopsis: ["--ca CA_DIR --receipt FILE --risk-metric N [--not-before-in SECONDS]"],
        summary: "Prints (standard base64) a RECEIPT receipt for a key, signed by the CA's simulated receipt signer.",
        options: [
            OptionHelp("--ca", "CA_DIR", "the CA whose receipt signer signs (required)"),
            OptionHelp("--receipt", "FILE", "a receipt naming the key, base64 or raw CMS, e.g. the attestation's (required)"),
            OptionHelp("--risk-metric", "N", "the new receipt's risk metric (required)"),
            OptionHelp("--not-before-in", "SECONDS", "its not-before, from now (default 86400)"),
        ])

    static let commands = [caHelp, attestHelp, assertHelp, receiptHelp]

    static let usage = CommandHelp.usage(commands, notes: """
    DEVELOPMENT ONLY — whoever holds the CA's keys can attest any key for any app.
    ca      Creates a simulated App Attestation root and intermediate CA in DIR unless one is there, and prints
            the root certificate's path (DIR/root.pem) for a verifier's root_ca.
    attest  Uses the device saved in DIR, or creates one with a new P-256 key (--new-key: always a new key, as
            after a reinstall), attests it with clientDataHash = SHA-256(TEXT), its leaf issued by the CA in
            CA_DIR, and prints the registration request body {"keyId","challenge","token"}. --validation-category
            (a number, written as 4 bytes little-endian: 1 = h'01000000') and --bundle-version add the iOS 27
            authenticator-data extensions, here and in later assertions; without them there are none.
            An existing device for another team, bundle or environment is an error unless --new-key is given.
    assert  Prints N (--count, default 1) lines of request headers {"X-App-Attest-Key-Id","X-App-Attest-Assertion",
            and "X-App-Attest-Timestamp" or "X-App-Attest-Challenge"}, the counter increasing from the saved one
            plus 1 (or from --counter START), and saves the last counter in DIR. clientData is the file's bytes,
            the challenge's UTF-8 (binding: challenge; --method/--target are then allowed and unused), or
            METHOD\\nTARGET\\nTIMESTAMP\\nhex SHA-256(body) (binding: request; TIMESTAMP defaults to now, the body
            to empty).
    receipt Prints (standard base64) a RECEIPT receipt as Apple's data server returns it, for the key the receipt
            in FILE (base64 or raw CMS, e.g. the attestation's) names: same app id, certificate and token, created
            now, not-before in SECONDS (default 86400), expiring in 90 days, with risk metric N; signed by the
            CA's simulated receipt signer (a stand-in for Apple's data server in tests).
    """)

    static func run(_ args: [String]) -> Int32 {
        let rest = Array(args.dropFirst())
        switch args.first {
        case "ca": return ca(rest)
        case "attest": return attest(rest)
        case "assert": return assert(rest)
        case "receipt": return receipt(rest)
        case "--help", "-h": print(usage); return ExitCode.ok
        default: printErr(usage); return ExitCode.usage
        }
    }

    private static func parse(_ args: [String], for help: CommandHelp) -> Options? {
        DevCommand.parse(args, for: help, context: "dev appattest", usage: usage)
    }

    /// The values of `names`, or nil after reporting the first one missing.
    private static func required(_ options: Options, _ names: [String], command: String) -> [String]? {
        var values: [String] = []
        for name in names {
            guard let value = options.values[name], !value.isEmpty else {
                printErr("dev appattest \(command): \(name) is required\n\n\(usage)")
                return nil
            }
            values.append(value)
        }
        return values
    }

    private static func ca(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: caHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let dir = required(options, ["--dir"], command: "ca")?[0] else { return ExitCode.usage }
        do {
            if !SimulatedAppAttestCA.exists(in: dir) { try SimulatedAppAttestCA.generate().save(to: dir) }
            print(SimulatedAppAttestCA.rootCertificatePath(in: dir))
            return ExitCode.ok
        } catch {
            printErr("dev appattest ca: \(error)")
            return ExitCode.failure
        }
    }

    private static func receipt(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: receiptHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let values = required(options, ["--ca", "--receipt", "--risk-metric"], command: "receipt"),
              let metric = Int(values[2]), metric >= 0, let notBeforeIn = Int64(options.values["--not-before-in"] ?? "86400") else {
            printErr("dev appattest receipt: --risk-metric and --not-before-in must be numbers\n\n\(usage)")
            return ExitCode.usage
        }
        do {
            guard let issuer = try SimulatedAppAttestCA.load(from: values[0]).receipts else {
                printErr("dev appattest receipt: \(values[0]) has no receipt signer (re-create the CA)")
                return ExitCode.failure
            }
            guard let data = FileManager.default.contents(atPath: values[1]) else {
                printErr("dev appattest receipt: cannot read \(values[1])")
                return ExitCode.failure
            }
            let raw = Array(data)
            let text = String(decoding: raw, as: UTF8.self).filter { !$0.isWhitespace }
            let old = try AppAttestReceiptVerifier.decode(StandardBase64.decode(text) ?? raw).get()
            let now = WallClock.unixSeconds()
            let cms = try issuer.receipt(.init(
                appID: old.appID, attestedCertificate: old.attestedCertificate, clientHash: old.clientHash, token: old.token,
                kind: "RECEIPT", environment: old.environment, createdAt: now, riskMetric: metric, notBefore: now + notBeforeIn,
                expiresAt: now + 90 * 86_400))
            print(StandardBase64.encode(cms))
            return ExitCode.ok
        } catch {
            printErr("dev appattest receipt: \(error)")
            return ExitCode.failure
        }
    }

    private static func attest(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: attestHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let r = required(options, ["--dir", "--ca", "--team-id", "--bundle-id", "--challenge"], command: "attest") else {
            return ExitCode.usage
        }
        let (dir, caDir, teamID, bundleID, challenge) = (r[0], r[1], r[2], r[3], r[4])
        guard let environment = AppAttestEnvironment(rawValue: options.values["--environment"] ?? "production") else {
            printErr("dev appattest attest: --environment must be production or development")
            return ExitCode.usage
        }
        var extensions = SimulatedAppAttestExtensions(bundleVersion: options.values["--bundle-version"])
        if let category = options.values["--validation-category"] {
            guard let number = UInt32(category) else {
                printErr("dev appattest attest: --validation-category must be a number from 0 to 4294967295")
                return ExitCode.usage
            }
            extensions.validationCategory = SimulatedAppAttestExtensions.validationCategory(number)
        }
        guard SimulatedAppAttestCA.exists(in: caDir) else {
            printErr("dev appattest attest: no CA in \(caDir) (create one with: attest-gateway-dev appattest ca --dir \(caDir))")
            return ExitCode.failure
        }
        do {
            let ca = try SimulatedAppAttestCA.load(from: caDir)
            let device: SimulatedAppAttestDevice
            if SimulatedAppAttestDevice.exists(in: dir) && !options.flags.contains("--new-key") {
                device = try SimulatedAppAttestDevice.load(from: dir)
                guard device.teamID == teamID, device.bundleID == bundleID, device.environment == environment else {
                    printErr("dev appattest attest: the device in \(dir) is for \(device.appID) (\(device.environment.rawValue)); "
                             + "pass --new-key to replace it")
                    return ExitCode.failure
                }
                device.extensions = extensions
            } else {
                device = try SimulatedAppAttestDevice(teamID: teamID, bundleID: bundleID, environment: environment, extensions: extensions)
            }
            let attestation = try device.attest(clientDataHash: SHA256Hasher.hash(Array(challenge.utf8)), ca: ca)
            try device.save(to: dir)
            printJSON([("keyId", device.keyID), ("challenge", challenge), ("token", StandardBase64.encode(attestation))])
            return ExitCode.ok
        } catch {
            printErr("dev appattest attest: \(error)")
            return ExitCode.failure
        }
    }

    private static func assert(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: assertHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let dir = required(options, ["--dir"], command: "assert")?[0] else { return ExitCode.usage }
        let binding: ClientDataBinding
        switch ClientDataBinding.from(options) {
        case .success(let b): binding = b
        case .failure(let e): printErr("dev appattest assert: \(e.message)\n\n\(usage)"); return ExitCode.usage
        }
        var count = 1
        if let text = options.values["--count"] {
            guard let n = Int(text), (1...10_000).contains(n) else {
                printErr("dev appattest assert: --count must be a number from 1 to 10000")
                return ExitCode.usage
            }
            count = n
        }
        var start: UInt32? = nil
        if let text = options.values["--counter"] {
            guard let n = UInt32(text), UInt64(n) + UInt64(count) - 1 <= UInt64(UInt32.max) else {
                printErr("dev appattest assert: --counter must be a number from 0 to 4294967295 (minus --count - 1)")
                return ExitCode.usage
            }
            start = n
        }
        guard SimulatedAppAttestDevice.exists(in: dir) else {
            printErr("dev appattest assert: no device in \(dir) (create one with: attest-gateway-dev appattest attest --dir \(dir) …)")
            return ExitCode.failure
        }
        do {
            let device = try SimulatedAppAttestDevice.load(from: dir)
            let clientData = try binding.clientData()
            var lines: [[(String, String)]] = []
            for i in 0..<count {
                let assertion = try device.assert(clientData: clientData, counter: start.map { $0 + UInt32(i) })
                lines.append([("X-App-Attest-Key-Id", device.keyID), ("X-App-Attest-Assertion", StandardBase64.encode(assertion))]
                             + binding.header)
            }
            // Saved before printing, so no printed assertion has a counter the next run could reuse.
            try device.save(to: dir)
            for line in lines { printJSON(line) }
            return ExitCode.ok
        } catch {
            printErr("dev appattest assert: \(error)")
            return ExitCode.failure
        }
    }

    private static func printJSON(_ members: [(String, String)]) {
        print(JSONEncoding.encode(.object(JSONObject(members.map { ($0.0, JSONValue.string($0.1)) }))))
    }
}

/// What an assertion's clientData is, from `dev appattest assert`'s options (PROTOCOL.md "assertion binding").
private enum ClientDataBinding {
    /// The bytes of a file, as given.
    case file(String)
    /// binding: challenge — the challenge's UTF-8.
    case challenge(String)
    /// binding: request — METHOD \n target \n timestamp \n lowercase hex SHA-256(body).
    case request(method: String, target: String, bodyFile: String?, timestamp: Int64)

    static func from(_ options: Options) -> Result<ClientDataBinding, UsageError> {
        let v = options.values
        if let file = v["--client-data-file"] {
            let others = ["--method", "--target", "--body-file", "--timestamp", "--challenge"].filter { v[$0] != nil }
            guard others.isEmpty else { return .failure(UsageError(message: "--client-data-file excludes \(others.joined(separator: ", "))")) }
            return .success(.file(file))
        }
        if let challenge = v["--challenge"] {
            let others = ["--body-file", "--timestamp"].filter { v[$0] != nil }
            guard others.isEmpty else { return .failure(UsageError(message: "--challenge excludes \(others.joined(separator: ", "))")) }
            return .success(.challenge(challenge))
        }
        guard let method = v["--method"], !method.isEmpty, let target = v["--target"], !target.isEmpty else {
            return .failure(UsageError(message: "give --client-data-file, --challenge, or --method and --target"))
        }
        var timestamp = WallClock.unixSeconds()
        if let text = v["--timestamp"] {
            guard let t = Int64(text), t >= 0 else { return .failure(UsageError(message: "--timestamp must be unix seconds")) }
            timestamp = t
        }
        return .success(.request(method: method, target: target, bodyFile: v["--body-file"], timestamp: timestamp))
    }

    func clientData() throws -> [UInt8] {
        switch self {
        case .file(let path): return try Self.read(path)
        case .challenge(let challenge): return Array(challenge.utf8)
        case .request(let method, let target, let bodyFile, let timestamp):
            let body = try bodyFile.map(Self.read) ?? []
            return Array("\(method)\n\(target)\n\(timestamp)\n\(hexString(SHA256Hasher.hash(body)))".utf8)
        }
    }

    /// The header naming what was bound, beside the key id and assertion (none for a client-data file).
    var header: [(String, String)] {
        switch self {
        case .file: []
        case .challenge(let challenge): [("X-App-Attest-Challenge", challenge)]
        case .request(_, _, _, let timestamp): [("X-App-Attest-Timestamp", String(timestamp))]
        }
    }

    private static func read(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw ReadFailure(description: "cannot read \(path)") }
        return Array(data)
    }

    private struct ReadFailure: Error, CustomStringConvertible {
        let description: String
    }
}
