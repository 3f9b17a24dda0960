import GatewayCLI
import GatewayCore

/// The `attest-gateway` command line: parses the command and hands off to it.
enum CLI {
    static let versionHelp = CommandHelp("attest-gateway version", summary: "Prints attest-gateway VERSION (also: attest-gateway --version).")
    static let helpHelp = CommandHelp(
        "attest-gateway help", synopsis: ["[COMMAND]"],
        summary: "Prints this help (also: --help, -h); with COMMAND, that command's help (as COMMAND --help).")

    /// Every command with every option it takes, in the order the help lists them.
    static let commands: [CommandHelp] = [
        ServeCommand.help, CheckConfigCommand.help, versionHelp, AppAttestCommand.attestationHelp, AppAttestCommand.assertionHelp,
        PlayIntegrityCommand.help, helpHelp,
    ]

    static let usage = """
    attest-gateway — app-integrity edge gateway (Firebase App Check, Apple App Attest, DeviceCheck, Play Integrity)

    \(CommandHelp.usage(commands))

    Every command also takes -h or --help. Options take their value as the next argument or after "=" (--config=FILE).

    The development tools (echo upstream, App Check issuer, simulated App Attest device, Play Integrity test tokens)
    are a separate executable, attest-gateway-dev (attest-gateway-dev --help); production installs never need it.

    Exit codes: 0 success, 1 failure (configuration, start-up or runtime error; appattest, playintegrity: rejected),
    2 usage error.
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
            switch Options.parse(rest, for: versionHelp) {
            case .failure(let e): printErr("version: \(e.message)\n\n\(CommandHelp.usage([versionHelp]))"); return ExitCode.usage
            case .success(let o) where o.help: print(CommandHelp.usage([versionHelp]))
            case .success: print("attest-gateway \(GatewayCore.version)")
            }
            return ExitCode.ok
        case "dev":
            return unknown(command, because: " (the development tools are a separate executable: "
                + "attest-gateway-dev echo|issuer|token|appattest|playintegrity …)")
        case "appattest": return AppAttestCommand.run(rest)
        case "playintegrity": return PlayIntegrityCommand.run(rest)
        case "--help", "-h":
            print(usage)
            return ExitCode.ok
        case "help":
            // `help COMMAND …` is `COMMAND … --help`; a bare `help` (or `help --help`) is this usage.
            guard let first = rest.first, first != "--help", first != "-h" else { print(usage); return ExitCode.ok }
            return run(rest + ["--help"])
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
