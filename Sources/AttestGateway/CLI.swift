#if canImport(Glibc)
import Glibc
#endif
import GatewayCore

/// Exit codes (documented in docs/cli.md): 0 success, 1 failure (bad configuration, cannot bind, runtime error),
/// 2 usage error.
enum ExitCode {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
}

/// The `attest-gateway` command line: parses the command and hands off to it.
enum CLI {
    static let usage = """
    attest-gateway — app-integrity edge gateway (Firebase App Check, Apple App Attest, DeviceCheck)

    Usage:
      attest-gateway serve [--config FILE] [--workers N] [--no-access-log]
      attest-gateway check-config [--config FILE]
      attest-gateway version
      attest-gateway appattest verify-attestation --attestation FILE --key-id BASE64 --team-id T --bundle-id B
          (--challenge TEXT | --client-data-hash HEX) [--environment production|development|any] [--at RFC3339]
          [--root-ca PEM]
      attest-gateway appattest verify-assertion --assertion FILE --client-data FILE --team-id T --bundle-id B
          (--public-key PEM | --attestation FILE) [--previous-counter N]
      attest-gateway dev echo --listen HOST:PORT      (development only)
      attest-gateway <command> --help

    Exit codes: 0 success, 1 failure (configuration, start-up or runtime error; appattest: rejected), 2 usage error.
    """

    static func run(_ args: [String]) -> Int32 {
        guard let command = args.first else {
            printErr(usage)
            return ExitCode.usage
        }
        let rest = Array(args.dropFirst())
        switch command {
        case "serve": return ServeCommand.run(rest)
        case "check-config": return CheckConfigCommand.run(rest)
        case "version", "--version":
            if rest.contains("--help") || rest.contains("-h") { print("Usage: attest-gateway version\n\nPrints the version."); return ExitCode.ok }
            print("attest-gateway \(GatewayCore.version)")
            return ExitCode.ok
        case "dev": return DevCommand.run(rest)
        case "appattest": return AppAttestCommand.run(rest)
        case "--help", "-h", "help":
            print(usage)
            return ExitCode.ok
        default:
            printErr("attest-gateway: unknown command \"\(command)\"\n\n\(usage)")
            return ExitCode.usage
        }
    }
}

/// Parsed `--flag value` options; unknown flags are usage errors.
struct Options {
    var values: [String: String] = [:]
    var flags: Set<String> = []
    var help = false

    /// `valued`: flags taking a value; `booleans`: flags without one.
    static func parse(_ args: [String], valued: Set<String>, booleans: Set<String> = []) -> Result<Options, UsageError> {
        var o = Options()
        var i = 0
        while i < args.count {
            let a = args[i]
            if a == "--help" || a == "-h" { o.help = true; i += 1; continue }
            var name = a
            var inline: String? = nil
            if let eq = a.firstIndex(of: "="), a.hasPrefix("--") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            if valued.contains(name) {
                if let inline { o.values[name] = inline; i += 1; continue }
                guard i + 1 < args.count else { return .failure(UsageError(message: "\(name) needs a value")) }
                o.values[name] = args[i + 1]
                i += 2
            } else if booleans.contains(name) && inline == nil {
                o.flags.insert(name)
                i += 1
            } else {
                return .failure(UsageError(message: "unknown option \"\(a)\""))
            }
        }
        return .success(o)
    }
}

struct UsageError: Error { let message: String }

func printErr(_ s: String) {
    var line = s
    if !line.hasSuffix("\n") { line += "\n" }
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}
