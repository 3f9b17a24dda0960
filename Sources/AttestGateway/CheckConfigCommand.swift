import GatewayCLI
import GatewayConfig
import GatewayComposition
import GatewayProxy

/// `attest-gateway check-config`: validates a configuration without serving — the file itself (`ConfigLoader`),
/// then every file it names, read as `serve` reads them (`ConfigFileCheck`). Never touches the network or the
/// state store.
enum CheckConfigCommand {
    static let help = CommandHelp(
        "attest-gateway check-config", synopsis: ["[--config FILE]"],
        summary: "Validates the configuration and reads every file it names, without serving; prints \"ok\" or the problems.",
        options: [OptionHelp("--config", "FILE", "the configuration file (default gateway.yml)")])

    static let usage = CommandHelp.usage([help], notes: """
    Reads every file FILE names (certificates, keys, root CAs, JWKS files, service accounts, password files) as serve does, never the
    network or the state store. Prints "ok" and exits 0, or prints one line per problem (FILE:LINE:COLUMN: yaml.path:
    message) on standard error and exits 1. Warnings (FILE:LINE:COLUMN: yaml.path: warning: message) are printed with
    the problems, on standard error, and do not change the exit status.
    """)

    static func run(_ args: [String]) -> Int32 {
        let options: Options
        switch Options.parse(args, for: help) {
        case .success(let o): options = o
        case .failure(let e): printErr("check-config: \(e.message)\n\n\(usage)"); return ExitCode.usage
        }
        if options.help { print(usage); return ExitCode.ok }
        let path = options.values["--config"] ?? "gateway.yml"
        let loaded: LoadedConfiguration
        do { loaded = try ConfigLoader.loadDetailed(path: path) } catch {
            printProblems(errors: error.errors, warnings: error.warnings)
            return ExitCode.failure
        }
        let fileErrors = ConfigFileCheck.problems(in: loaded.configuration).map { loaded.error(at: $0.path, $0.message) }
        printProblems(errors: fileErrors, warnings: loaded.warnings)
        guard fileErrors.isEmpty else { return ExitCode.failure }
        print("ok")
        return ExitCode.ok
    }

    /// Errors and warnings together, in file order (an error before a warning at the same place).
    static func printProblems(errors: [ConfigError], warnings: [ConfigWarning]) {
        let lines = errors.map { (line: $0.line, column: $0.column, rank: 0, text: $0.description) }
            + warnings.map { (line: $0.line, column: $0.column, rank: 1, text: $0.description) }
        for entry in lines.enumerated().sorted(by: { a, b in
            (a.element.line, a.element.column, a.element.rank, a.offset) < (b.element.line, b.element.column, b.element.rank, b.offset)
        }) {
            printErr(entry.element.text)
        }
    }
}
