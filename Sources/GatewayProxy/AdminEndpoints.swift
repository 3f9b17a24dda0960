import GatewayPosix
import HTTP1

/// The admin listener (`admin.address`, never a public listener): `GET /healthz` (the process is alive) and
/// `GET /readyz` (every App Check verifier has a usable key set). Metrics arrive with the operations issue.
final class AdminHandler: SmallHTTPHandler {
    let verifiers: VerifierGraph
    private var head: HTTP1RequestHead?

    init(verifiers: VerifierGraph) { self.verifiers = verifiers }

    func begin(_ head: HTTP1RequestHead) { self.head = head }

    func body(_ bytes: UnsafeRawBufferPointer) {}

    func end() -> String {
        guard let h = head else { return Self.json(500, "{\"error\":\"internal\"}") }
        let target = h.string(h.target)
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        guard h.methodIs("GET") || h.methodIs("HEAD") else { return Self.json(405, "{\"error\":\"method_not_allowed\"}") }
        switch path {
        case "/healthz":
            return Self.json(200, "{\"status\":\"ok\"}")
        case "/readyz":
            let waiting = verifiers.appCheck.filter { !$0.value.keys.isReady }.map { "\"jwks:\($0.key)\"" }.sorted()
            if waiting.isEmpty { return Self.json(200, "{\"ready\":true}") }
            return Self.json(503, "{\"ready\":false,\"waiting_for\":[\(waiting.joined(separator: ","))]}")
        default:
            return Self.json(404, "{\"error\":\"not_found\"}")
        }
    }

    static func json(_ status: Int, _ body: String) -> String {
        let phrase = switch status {
        case 200: "OK"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 503: "Service Unavailable"
        default: "Internal Server Error"
        }
        return "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
            "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }
}

extension SmallHTTPServer {
    /// The admin listener for `verifiers`.
    public static func admin(address: SocketAddress, verifiers: VerifierGraph) throws(PosixError) -> SmallHTTPServer {
        try SmallHTTPServer(address: address) { AdminHandler(verifiers: verifiers) }
    }
}
