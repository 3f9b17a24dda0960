import GatewayCLI
import GatewayCore

/// The `attest-gateway` command line: parses the command and hands off to it.
enum CLI {
    static let usage = """
    attest-gateway — app-integrity edge gateway (Firebase App Check, Apple App Attest, DeviceCheck, Play Integrity)

    Usage:
      attest-gateway serve [--config FILE] [--workers N] [--no-access-log]
      attest-gateway check-config [--config FILE]
      attest-gateway version
      attest-gateway appattest verify-attestation --attestation FILE --key-id BASE64 --team-id T --bundle-id B
          (--challenge TEXT | --client-data-hash HEX) [--environment production|development|any] [--at RFC3339]
          [--root-ca PEM]
      attest-gateway appattest verify-assertion --assertion FILE --client-data FILE --team-id T --bundle-id B
          (--public-key PEM | --attestation FILE) [--previous-counter N]
      attest-gateway playintegrity verify --token FILE|- --package P
          (--decryption-key FILE --verification-key FILE | --service-account FILE)
          [--certificate-sha256 D[,D…]] [--request-hash H | --nonce N] [--at RFC3339]
      attest-gateway <command> --help

    The development tools (echo upstream, App Check issuer, simulated App Attest device) are a separate executable,
    attest-gateway-dev (attest-gateway-dev --help); production installs never need it.

    Exit codes: 0 success, 1 failure (configuration, start-up or runtime error; appattest,
    playintegrity: rejected), 2 usage error.
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
        case "dev":
            return unknown(command, because: " (the development tools are a separate executable: "
                + "attest-gateway-dev echo|issuer|token|appattest …)")
        case "appattest": return AppAttestCommand.run(rest)
        case "playintegrity": return PlayIntegrityCommand.run(rest)
        case "--help", "-h", "help":
            print(usage)
            return ExitCode.ok
        default:
            return unknown(command)
        }
    }

    /// Reports an unknown command (and why, when there is more to say) with the usage: exit code 2.
    private static func unknown(_ command: String, because reason: String = "") -> Int32 {
        printErr("attest-gateway: unknown command \"\(command)\"\(reason)\n\n\(usage)")
        return ExitCode.usage
    }
}
