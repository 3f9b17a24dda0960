public import GatewayPosix
import HTTP1
import Observability
import StateStore

/// What the admin listener reads: the running configuration's verifiers and state store (they change on reload)
/// and the metrics text.
public struct AdminSources: Sendable {
    public var runtime: @Sendable () -> ProxyRuntime
    public var metrics: @Sendable () -> String
    /// The rollout view's history (`GET /`, `GET /stats`); nil: those answer 404.
    public var rollout: RolloutHistory?
    public init(runtime: @escaping @Sendable () -> ProxyRuntime, metrics: @escaping @Sendable () -> String,
                rollout: RolloutHistory? = nil) {
        self.runtime = runtime
        self.metrics = metrics
        self.rollout = rollout
    }
}

/// The admin listener (`admin.address`, never a public listener): `GET /healthz` (the process is alive),
/// `GET /readyz` (every App Check verifier has a usable key set and the state store answers), `GET /metrics` and
/// `GET /jwks` (the verdict token's key set, with `verdict_token`).
final class AdminHandler: SmallHTTPHandler {
    let sources: AdminSources
    private var head: HTTP1RequestHead?

    init(sources: AdminSources) { self.sources = sources }

    func begin(_ head: HTTP1RequestHead) { self.head = head }

    func body(_ bytes: UnsafeRawBufferPointer) {}

    func end() -> String {
        guard let h = head else { return Self.json(500, "{\"error\":\"internal\"}") }
        let target = h.string(h.target)
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        guard h.methodIs("GET") || h.methodIs("HEAD") else { return Self.json(405, "{\"error\":\"method_not_allowed\"}", extra: "Allow: GET, HEAD\r\n") }
        if path == "/" || path == "/stats", sources.rollout != nil, !Self.isLocalHost(h.host.map { h.string($0) }) {
            // A web page elsewhere could reach an admin listener on the operator's machine (a port-forward) under its
            // own name by DNS rebinding: the rollout view answers only a Host that is an address or localhost.
            return Self.json(421, "{\"error\":\"misdirected_request\",\"reason\":\"host_not_allowed\"}")
        }
        switch path {
        case "/healthz":
            return Self.json(200, "{\"status\":\"ok\"}")
        case "/readyz":
            let runtime = sources.runtime()
            var waiting = runtime.verifiers.keySetsNotReady.map { "\"jwks:\($0)\"" }
            var stateError = ""
            if let state = runtime.state {
                do { try state.store.ping() } catch {
                    waiting.append("\"state\"")
                    // Why, for whoever is looking (the admin listener is the operator's): the cause and the error.
                    stateError = ",\"state_error\":{\"cause\":\(JSONText.quoted(error.label)),\"detail\":\(JSONText.quoted(error.description))}"
                }
            }
            if waiting.isEmpty { return Self.json(200, "{\"ready\":true}") }
            return Self.json(503, "{\"ready\":false,\"waiting_for\":[\(waiting.joined(separator: ","))]\(stateError)}")
        case "/jwks":
            guard let verdict = sources.runtime().verdict else { return Self.json(404, "{\"error\":\"not_found\"}") }
            return Self.json(200, verdict.jwks)
        case "/":
            guard sources.rollout != nil else { return Self.json(404, "{\"error\":\"not_found\"}") }
            let body = RolloutPage.html
            return "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: no-store\r\n" +
                "Content-Security-Policy: \(RolloutPage.contentSecurityPolicy)\r\nX-Content-Type-Options: nosniff\r\n" +
                "Referrer-Policy: no-referrer\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body
        case "/stats":
            guard let history = sources.rollout else { return Self.json(404, "{\"error\":\"not_found\"}") }
            return Self.json(200, RolloutStats.render(history: history, runtime: sources.runtime()))
        case "/metrics":
            let body = sources.metrics()
            return "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nCache-Control: no-store\r\n" +
                "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        default:
            return Self.json(404, "{\"error\":\"not_found\"}")
        }
    }

    static func json(_ status: Int, _ body: String, extra: String = "") -> String {
        let phrase = switch status {
        case 200: "OK"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 421: "Misdirected Request"
        case 503: "Service Unavailable"
        default: "Internal Server Error"
        }
        return "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
            "X-Content-Type-Options: nosniff\r\n\(extra)Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    /// `Host` names this machine by address or as `localhost` (any port); no Host at all (HTTP/1.0) is fine too.
    static func isLocalHost(_ host: String?) -> Bool {
        guard let host = host?.lowercased() else { return true }
        var name = Substring(host), port = Substring("")
        if name.hasPrefix("[") {   // [v6]:port
            guard let close = name.firstIndex(of: "]") else { return false }
            port = name[name.index(after: close)...]
            name = name[name.index(after: name.startIndex)..<close]
            guard name.contains(":") else { return false }
        } else if let colon = name.lastIndex(of: ":") {
            port = name[colon...]
            name = name[..<colon]
        }
        guard port.isEmpty || (port.hasPrefix(":") && port.dropFirst().allSatisfy(\.isNumber)) else { return false }
        return name == "localhost" || name == "localhost." || UpstreamCluster.isAddressLiteral(String(name))
    }
}

extension SmallHTTPServer {
    /// The admin listener.
    public static func admin(address: SocketAddress, sources: AdminSources) throws(PosixError) -> SmallHTTPServer {
        try SmallHTTPServer(address: address) { AdminHandler(sources: sources) }
    }
}
