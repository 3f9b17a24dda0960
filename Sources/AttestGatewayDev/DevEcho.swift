import GatewayCrypto
import GatewayPosix
import GatewayProxy
import HTTP1
import Observability
import GatewayCore

extension SmallHTTPServer {
    /// DEVELOPMENT ONLY — the echo upstream: every request gets 200 and a JSON description of what arrived
    /// (method, target, headers, body size and SHA-256).
    static func devEcho(address: SocketAddress) throws(PosixError) -> SmallHTTPServer {
        try SmallHTTPServer(address: address) { EchoHandler() }
    }
}

/// The echo handler: hashes the body as it streams and describes the request in JSON.
final class EchoHandler: SmallHTTPHandler {
    private var head: HTTP1RequestHead?
    private let hasher = SHA256Hasher()
    private var bodyBytes = 0

    func begin(_ head: HTTP1RequestHead) {
        self.head = head
        bodyBytes = 0
    }

    func body(_ bytes: UnsafeRawBufferPointer) {
        hasher.update(bytes)
        bodyBytes += bytes.count
    }

    func end() -> String {
        guard let h = head else { return "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n" }
        var json = "{\"method\":" + JSONText.quoted(h.string(h.method))
        json += ",\"target\":" + JSONText.quoted(h.string(h.target))
        json += ",\"version\":\"" + (h.version == .http11 ? "HTTP/1.1" : "HTTP/1.0") + "\""
        json += ",\"headers\":["
        for (i, f) in h.fields.enumerated() {
            if i > 0 { json += "," }
            json += "[" + JSONText.quoted(h.string(f.name)) + "," + JSONText.quoted(h.string(f.value)) + "]"
        }
        json += "],\"body_bytes\":\(bodyBytes),\"body_sha256\":\"" + hexString(hasher.finish()) + "\"}\n"
        return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\r\n" + json
    }
}
