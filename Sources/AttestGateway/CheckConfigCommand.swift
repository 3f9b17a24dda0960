import GatewayConfig

/// `attest-gateway check-config`: validates a configuration without serving.
enum CheckConfigCommand {
    static let usage = """
    Usage: attest-gateway check-config [--config FILE]

    Validates FILE (default gateway.yml). Prints "ok" and exits 0, or prints one line per problem
    (FILE:LINE:COLUMN: yaml.path: message) on standard error and exits 1.
    """

    static func run(_ args: [String]) -> Int32 {
        let options: Options
        switch Options.parse(args, valued: ["--config"]) {
        case .success(let o): options = o
        case .failure(let e): printErr("check-config: \(e.message)\n\n\(usage)"); return ExitCode.usage
        }
        if options.help { print(usage); return ExitCode.ok }
        let path = options.values["--config"] ?? "gateway.yml"
        do {
            _ = try ConfigLoader.load(path: path)
            print("ok")
            return ExitCode.ok
        } catch {
            for e in error.errors { printErr(e.description) }
            return ExitCode.failure
        }
    }
}
