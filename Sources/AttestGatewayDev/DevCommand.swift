import GatewayCLI
import GatewayConfig
import GatewayPosix
import GatewayProxy
import JOSE
import Observability
import OutboundHTTP

/// The `attest-gateway-dev` command line: development helpers, an executable of their own so that the production
/// binary never contains them (nor GatewayTestSupport's simulated CA). Not for production.
enum DevCommand {
    static let echoHelp = CommandHelp(
        "attest-gateway-dev echo", synopsis: ["--listen HOST:PORT"],
        summary: "A small HTTP/1.1 upstream: every request gets 200 and JSON describing it.",
        options: [OptionHelp("--listen", "HOST:PORT", "the address to listen on (required)")])

    static let issuerHelp = CommandHelp(
        "attest-gateway-dev issuer", synopsis: ["--listen HOST:PORT [--project-number N] [--project-id ID] [--app-id ID]"],
        summary: "An App Check–shaped token issuer (GET /jwks, POST /token, POST /rotate) with a key generated at start.",
        options: [
            OptionHelp("--listen", "HOST:PORT", "the address to listen on (required; loopback only: anyone reaching it can mint tokens)"),
            OptionHelp("--project-number", "N", "the tokens' audience projects/N and issuer (default 123456789012)"),
            OptionHelp("--project-id", "ID", "also projects/ID in the audience (default demo-project)"),
            OptionHelp("--app-id", "ID", "the tokens' sub when a request names none (default 1:123456789012:ios:0123456789abcdef)"),
        ])

    static let tokenHelp = CommandHelp(
        "attest-gateway-dev token", synopsis: ["--issuer URL [--app-id ID] [--ttl SECONDS] [--limited-use] [--expired]"],
        summary: "Asks an issuer for one token and prints it.",
        options: [
            OptionHelp("--issuer", "URL", "the issuer's base URL, http://HOST:PORT (required)"),
            OptionHelp("--app-id", "ID", "the token's sub (default: the issuer's --app-id)"),
            OptionHelp("--ttl", "SECONDS", "the token's lifetime (default 3600; the issuer ignores more than 7 days)"),
            OptionHelp("--limited-use", nil, "a limited-use token (with a jti)"),
            OptionHelp("--expired", nil, "a token that expired an hour ago"),
        ])

    static let usage = """
    attest-gateway-dev — development tools for attest-gateway (never install or expose these in production)

    \(CommandHelp.usage([echoHelp, issuerHelp, tokenHelp] + DevAppAttestCommand.commands + DevPlayIntegrityCommand.commands))

    Every command also takes -h or --help (appattest --help and playintegrity --help say more about theirs).
    DEVELOPMENT ONLY — never expose these.
    echo    The repository's gateway.yml forwards to it. The JSON has method, target, version, headers, body_bytes
            and body_sha256.
    issuer  POST /token mints an RS256 token ({"app_id","ttl","limited_use","expired"} all optional), POST /rotate
            adds a new signing key (?retire=1 drops the old ones). Point a verifier's jwks_url at
            http://HOST:PORT/jwks (plain http is accepted for loopback hosts only).
    appattest  A simulated App Attest CA and device: prints registration bodies and assertion headers.
    playintegrity  Test keys as Play Console gives them, and classic Play Integrity tokens made with them.
    """

    static func run(_ args: [String]) -> Int32 {
        let rest = Array(args.dropFirst())
        switch args.first {
        case "echo": return echo(rest)
        case "issuer": return issuer(rest)
        case "token": return token(rest)
        case "appattest": return DevAppAttestCommand.run(rest)
        case "playintegrity": return DevPlayIntegrityCommand.run(rest)
        case "--help", "-h": print(usage); return ExitCode.ok
        default: printErr(usage); return ExitCode.usage
        }
    }

    /// Parses the options `help` lists, or reports the problem with `usage` and returns nil (exit 2).
    static func parse(_ args: [String], for help: CommandHelp, context: String = "dev", usage: String = DevCommand.usage) -> Options? {
        switch Options.parse(args, for: help) {
        case .success(let o): return o
        case .failure(let e): printErr("\(context): \(e.message)\n\n\(usage)"); return nil
        }
    }

    private static func listenAddress(_ options: Options) -> SocketAddress? {
        guard let listen = options.values["--listen"], let a = ConfigValue.parseSocketAddress(listen) else {
            printErr("dev: --listen HOST:PORT is required\n\n\(usage)")
            return nil
        }
        do { return try SocketAddress.resolve(host: a.host, port: a.port) } catch {
            printErr("dev: \(error)")
            return nil
        }
    }

    private static func echo(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: echoHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let address = listenAddress(options) else { return ExitCode.usage }
        do {
            let server = try SmallHTTPServer.devEcho(address: address)
            Logger.warn("dev echo server listening (development only, not for production)", ["address": address.description])
            server.run()
            return ExitCode.ok
        } catch {
            printErr("dev echo: \(error)")
            return ExitCode.failure
        }
    }

    private static func issuer(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: issuerHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let address = listenAddress(options) else { return ExitCode.usage }
        var o = DevIssuer.Options()
        if let n = options.values["--project-number"] { o.projectNumber = n }
        if let id = options.values["--project-id"] { o.projectID = id }
        if let app = options.values["--app-id"] { o.appID = app }
        do {
            let issuer = try DevIssuer(options: o)
            let server = try SmallHTTPServer.devIssuer(address: address, issuer: issuer)
            Logger.warn("dev App Check issuer listening (development only: anyone who reaches it can mint tokens)",
                        ["address": address.description, "jwks_url": "http://\(address)/jwks",
                         "project_number": o.projectNumber])
            server.run()
            return ExitCode.ok
        } catch {
            printErr("dev issuer: \(error)")
            return ExitCode.failure
        }
    }

    private static func token(_ args: [String]) -> Int32 {
        guard let options = parse(args, for: tokenHelp) else { return ExitCode.usage }
        if options.help { print(usage); return ExitCode.ok }
        guard let issuer = options.values["--issuer"] else {
            printErr("dev token: --issuer URL is required\n\n\(usage)")
            return ExitCode.usage
        }
        var members: [(String, JSONValue)] = []
        if let app = options.values["--app-id"] { members.append(("app_id", .string(app))) }
        if let ttl = options.values["--ttl"] {
            guard let v = Int64(ttl), v > 0 else { printErr("dev token: --ttl must be a positive number of seconds"); return ExitCode.usage }
            members.append(("ttl", .number(JSONNumber(v))))
        }
        if options.flags.contains("--limited-use") { members.append(("limited_use", .bool(true))) }
        if options.flags.contains("--expired") { members.append(("expired", .bool(true))) }
        let body = JSONEncoding.encode(.object(JSONObject(members)))
        let url = issuer.hasSuffix("/") ? issuer + "token" : issuer + "/token"
        switch CurlHTTPClient().post(url, headers: [("Content-Type", "application/json")], body: Array(body.utf8),
                                     timeoutMillis: 5_000, maxBodyBytes: 64 * 1024) {
        case .failure(let e):
            printErr("dev token: \(e)")
            return ExitCode.failure
        case .success(let r):
            guard r.status == 200, case .object(let o)? = try? StrictJSON.parse(r.body), case .string(let t)? = o["token"] else {
                printErr("dev token: issuer answered HTTP \(r.status)")
                return ExitCode.failure
            }
            print(t)
            return ExitCode.ok
        }
    }
}
