import GatewayPosix
import GatewayProxy
import GatewayConfig
import Observability

/// `attest-gateway dev …`: development helpers. Not for production.
enum DevCommand {
    static let usage = """
    Usage: attest-gateway dev echo --listen HOST:PORT

    DEVELOPMENT ONLY. Starts a small HTTP/1.1 echo upstream that answers every request with 200 and a JSON
    description of the request (method, target, headers, body size and SHA-256). The repository's gateway.yml
    forwards to it so the quick start shows forwarding at once. Not hardened; never expose it.
    """

    static func run(_ args: [String]) -> Int32 {
        guard args.first == "echo" else {
            if args.first == "--help" || args.first == "-h" { print(usage); return ExitCode.ok }
            printErr(usage)
            return ExitCode.usage
        }
        let options: Options
        switch Options.parse(Array(args.dropFirst()), valued: ["--listen"]) {
        case .success(let o): options = o
        case .failure(let e): printErr("dev echo: \(e.message)\n\n\(usage)"); return ExitCode.usage
        }
        if options.help { print(usage); return ExitCode.ok }
        guard let listen = options.values["--listen"], let address = ConfigValue.parseSocketAddress(listen) else {
            printErr("dev echo: --listen HOST:PORT is required\n\n\(usage)")
            return ExitCode.usage
        }
        do {
            let resolved = try SocketAddress.resolve(host: address.host, port: address.port)
            let server = try DevEchoServer(address: resolved)
            Logger.warn("dev echo server listening (development only, not for production)", ["address": resolved.description])
            server.run()
            return ExitCode.ok
        } catch {
            printErr("dev echo: \(error)")
            return ExitCode.failure
        }
    }
}
