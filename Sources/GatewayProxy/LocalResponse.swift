import Attestation
import GatewayCore

/// A response the gateway writes itself (routing misses, parse errors, upstream failures) — always JSON
/// `{"error":…,"reason":…}` so clients and logs see one shape.
struct LocalResponse {
    let status: Int
    let reasonPhrase: StaticString
    let error: StaticString
    let reason: String?
    /// Extra header lines (each ending in CRLF), e.g. WWW-Authenticate.
    var extraHeaders: String = ""
    /// A JSON body other than `{"error":…,"reason":…}` (the registration endpoints' answers).
    var json: String? = nil
    /// The request was HEAD: the head (Content-Length included) is sent, the body is not.
    var headOnly = false
    /// The request was a gRPC call: the answer is trailers-only (HTTP 200, `grpc-status` mapped from `status`,
    /// `grpc-message` the reason code), which gRPC clients read as a status rather than a protocol error.
    var grpc = false

    /// The HTTP status on the wire: 200 for a gRPC answer (its status is `grpc-status`).
    var wireStatus: Int { grpc ? 200 : status }

    /// The gRPC status for an HTTP status (PROTOCOL.md Additions; the ones it leaves open as gRPC's HTTP mapping
    /// reads them).
    var grpcStatus: Int {
        switch status {
        case 400, 414, 431: 3          // INVALID_ARGUMENT
        case 401: 16                   // UNAUTHENTICATED
        case 403: 7                    // PERMISSION_DENIED
        case 404, 405, 501: 12         // UNIMPLEMENTED
        case 413, 429: 8               // RESOURCE_EXHAUSTED
        case 502, 503: 14              // UNAVAILABLE
        case 408, 504: 4               // DEADLINE_EXCEEDED
        case 500: 13                   // INTERNAL
        default: 2                     // UNKNOWN
        }
    }

    /// `grpc-message`: the reason code, or the error when there is none (both are [a-z_], no percent-encoding).
    private var grpcMessage: String { reason ?? String(describing: error) }

    /// A gateway-made JSON answer (registration endpoints).
    static func json(status: Int, _ phrase: StaticString, _ body: String) -> LocalResponse {
        var r = LocalResponse(status: status, reasonPhrase: phrase, error: "", reason: nil)
        r.json = body
        return r
    }

    /// A forward-auth call that names no original request (no `X-Forwarded-Uri`/`X-Original-URI`, no path after
    /// the endpoint).
    static func forwardAuthWithoutTarget() -> LocalResponse {
        .init(status: 400, reasonPhrase: "Bad Request", error: "bad_request", reason: "forward_auth_target_missing")
    }

    /// A request-target servers would read differently (encoded slash, path parameter, `..` above the root, …):
    /// refused rather than routed one way and served another (CONFIG.md `paths`).
    static func ambiguousPath() -> LocalResponse {
        .init(status: 400, reasonPhrase: "Bad Request", error: "bad_request", reason: "ambiguous_path")
    }

    /// A forward-auth call whose original request cannot be trusted: headers of two sources, another source's
    /// headers than the configured one, or no original host while a route matches on host.
    static func untrustedForwarding() -> LocalResponse {
        .init(status: 400, reasonPhrase: "Bad Request", error: "bad_request", reason: "untrusted_forwarding")
    }

    /// A WebSocket handshake on a route without `websocket: true`, over HTTP/2, or not of the handshake's form
    /// (RFC 6455 4.1: an HTTP/1.1 GET without a body, Connection: upgrade): refused rather than downgraded.
    static func upgradeNotAllowed() -> LocalResponse {
        .init(status: 400, reasonPhrase: "Bad Request", error: "bad_request", reason: "upgrade_not_allowed")
    }

    /// More body bytes held for verification than `limits.max_held_body_bytes` allows, process-wide.
    /// A rate limit's budget for this client (or app, or key) is spent: 429 `rate_limited`, `Retry-After` seconds.
    static func rateLimited(retryAfter seconds: Int) -> LocalResponse {
        var r = LocalResponse(status: 429, reasonPhrase: "Too Many Requests", error: "too_many_requests", reason: "rate_limited")
        r.extraHeaders = "Retry-After: \(seconds)\r\n"
        return r
    }

    static func overloaded() -> LocalResponse {
        .init(status: 503, reasonPhrase: "Service Unavailable", error: "unavailable", reason: "overloaded")
    }

    /// `verdict_token` is configured and the token could not be signed: the request is not forwarded without it.
    static func verdictUnavailable() -> LocalResponse {
        .init(status: 503, reasonPhrase: "Service Unavailable", error: "unavailable", reason: "verdict_unavailable")
    }

    static func methodNotAllowed(allow: StaticString) -> LocalResponse {
        var r = LocalResponse(status: 405, reasonPhrase: "Method Not Allowed", error: "method_not_allowed", reason: nil)
        r.extraHeaders = "Allow: \(allow)\r\n"
        return r
    }

    /// A registration request the gateway cannot read (not the JSON shape of PROTOCOL.md).
    static func badRegistration() -> LocalResponse {
        .init(status: 400, reasonPhrase: "Bad Request", error: "bad_request", reason: VerificationStatus.malformedToken.code)
    }

    /// A registration refused by a verifier or the state store: the status of `status`, no WWW-Authenticate
    /// (registration is not an authentication challenge).
    static func registrationRejected(_ status: VerificationStatus) -> LocalResponse {
        let (phrase, error) = Self.names(status.httpStatus)
        return LocalResponse(status: status.httpStatus, reasonPhrase: phrase, error: error, reason: status.code)
    }

    /// The reason phrase and the body's `error` for a verification status code (PROTOCOL.md Additions: `error` by
    /// status, so a 403 or 503 body does not claim "unauthorized").
    static func names(_ status: Int) -> (StaticString, StaticString) {
        switch status {
        case 403: ("Forbidden", "forbidden")
        case 503: ("Service Unavailable", "unavailable")
        case 400: ("Bad Request", "bad_request")
        default: ("Unauthorized", "unauthorized")
        }
    }

    static func notFound() -> LocalResponse { .init(status: 404, reasonPhrase: "Not Found", error: "not_found", reason: nil) }
    static func verifierUnavailable() -> LocalResponse {
        .init(status: 501, reasonPhrase: "Not Implemented", error: "not_implemented", reason: "verifier_not_available")
    }
    static func badGateway(_ reason: String) -> LocalResponse {
        .init(status: 502, reasonPhrase: "Bad Gateway", error: "bad_gateway", reason: reason)
    }
    static func gatewayTimeout() -> LocalResponse {
        .init(status: 504, reasonPhrase: "Gateway Timeout", error: "gateway_timeout", reason: "upstream_timeout")
    }
    static func requestTimeout() -> LocalResponse {
        .init(status: 408, reasonPhrase: "Request Timeout", error: "request_timeout", reason: "header_timeout")
    }
    static func bodyTimeout() -> LocalResponse {
        .init(status: 408, reasonPhrase: "Request Timeout", error: "request_timeout", reason: "body_timeout")
    }
    static func payloadTooLarge() -> LocalResponse {
        .init(status: 413, reasonPhrase: "Content Too Large", error: "payload_too_large", reason: "body_too_large")
    }
    static func unavailable() -> LocalResponse {
        .init(status: 503, reasonPhrase: "Service Unavailable", error: "unavailable", reason: "shutting_down")
    }

    /// A verification rejection: 401/403/503 with `{"error":…,"reason":…}`; 401 also names the scheme of the
    /// verifier(s) concerned in WWW-Authenticate (RFC 9110 11.6.1 requires a challenge on 401): the one that
    /// failed, or for a missing token every verifier of the route.
    static func rejected(_ status: VerificationStatus, schemes: [StaticString] = ["AppCheck"]) -> LocalResponse {
        let (phrase, error) = names(status.httpStatus)
        var r = LocalResponse(status: status.httpStatus, reasonPhrase: phrase, error: error, reason: status.code)
        if status.httpStatus == 401 && !schemes.isEmpty {
            r.extraHeaders = "WWW-Authenticate: " + schemes.map {
                "\($0) realm=\"attest-gateway\", error=\"\(status.code)\""
            }.joined(separator: ", ") + "\r\n"
        }
        return r
    }

    /// A parser rejection: the status the parser chose and its reason code.
    static func parseError(status: Int, code: String) -> LocalResponse {
        let (phrase, error): (StaticString, StaticString) = switch status {
        case 414: ("URI Too Long", "uri_too_long")
        case 431: ("Request Header Fields Too Large", "header_too_large")
        case 413: ("Content Too Large", "payload_too_large")
        case 501: ("Not Implemented", "not_implemented")
        case 505: ("HTTP Version Not Supported", "http_version_not_supported")
        default: ("Bad Request", "bad_request")
        }
        return .init(status: status, reasonPhrase: phrase, error: error, reason: code)
    }

    /// The body: `{"error":…,"reason":…}`, or the endpoint's own JSON.
    var body: String {
        if grpc { return "" }
        if let json { return json }
        guard let reason else { return "{\"error\":\"\(error)\"}" }
        return "{\"error\":\"\(error)\",\"reason\":\"\(reason)\"}"
    }

    /// Appends the whole response; `close` adds `Connection: close`; `date` is the Date value (29 bytes).
    func append(to out: ByteBuffer, close: Bool, keepAlive10: Bool = false, date: [UInt8]) {
        let body = body
        if grpc {
            out.append("HTTP/1.1 200 OK\r\nDate: " as StaticString)
            out.append(date)
            out.append("\r\nContent-Type: application/grpc\r\ngrpc-status: \(grpcStatus)\r\ngrpc-message: \(grpcMessage)\r\n")
            if !extraHeaders.isEmpty { out.append(extraHeaders) }   // WWW-Authenticate, Allow: as for HTTP clients
            out.append(close ? "Content-Length: 0\r\nConnection: close\r\n\r\n" as StaticString
                             : keepAlive10 ? "Content-Length: 0\r\nConnection: keep-alive\r\n\r\n" : "Content-Length: 0\r\n\r\n")
            return
        }
        out.append("HTTP/1.1 " as StaticString)
        out.appendDecimal(status)
        out.append(byte: UInt8(ascii: " "))
        out.append(reasonPhrase)
        out.append("\r\nDate: " as StaticString)
        out.append(date)
        out.append("\r\n" as StaticString)
        if status == 200 || status == 201 { out.append("Cache-Control: no-store\r\n" as StaticString) }
        if !extraHeaders.isEmpty { out.append(extraHeaders) }
        out.append("Content-Type: application/json\r\nContent-Length: " as StaticString)
        out.appendDecimal(body.utf8.count)
        if close {
            out.append("\r\nConnection: close" as StaticString)
        } else if keepAlive10 {
            out.append("\r\nConnection: keep-alive" as StaticString)
        }
        out.append("\r\n\r\n" as StaticString)
        if !headOnly { out.append(body) }
    }

    /// The fields of `append` without the connection's (`Connection`) as (name, value) pairs, names lower-case:
    /// the head of the same answer on an HTTP/2 stream.
    func fields(date: [UInt8], bodyLength: Int) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [("date", String(decoding: date, as: UTF8.self))]
        if grpc {
            fields += [("content-type", "application/grpc"), ("grpc-status", String(grpcStatus)),
                       ("grpc-message", grpcMessage)]
            appendExtraFields(to: &fields)
            return fields
        }
        if status == 200 || status == 201 { fields.append(("cache-control", "no-store")) }
        appendExtraFields(to: &fields)
        fields.append(("content-type", "application/json"))
        fields.append(("content-length", String(bodyLength)))
        return fields
    }

    /// `extraHeaders` as (name, value) pairs, names lower-case.
    private func appendExtraFields(to fields: inout [(name: String, value: String)]) {
        for line in extraHeaders.split(separator: "\r\n", omittingEmptySubsequences: true) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].drop(while: { $0 == " " })
            fields.append((line[..<colon].lowercased(), String(value)))
        }
    }
}
