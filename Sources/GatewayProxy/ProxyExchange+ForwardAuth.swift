import Attestation
import GatewayCore
import HTTP1
import Observability

/// Forward-auth (`forward_auth.path`): another proxy asks whether to let a request through — nginx `auth_request`,
/// Traefik `forwardAuth`, Envoy `ext_authz` (HTTP service). The gateway matches the *original* request against the
/// routes and runs that route's verification (limited use and App Attest counters included) on the headers of the
/// call, then answers instead of forwarding: 200 with the `X-Attest-*` headers, or the rejection (401/403/503 JSON).
///
/// Where the original method, URI and host come from is `forward_auth.source` (ForwardAuthTarget.read); the route
/// is matched on the canonical path, as for a request the gateway receives itself.
extension ProxyExchange {
    /// `prefixLength`: the length of `forward_auth.path`, which the call's path starts with.
    func beginForwardAuth(_ head: HTTP1RequestHead, prefixLength: Int) {
        let runtime = gen.runtime
        let unread = !http.requestDone || !head.keepAlive
        let original: ForwardAuthTarget
        switch ForwardAuthTarget.read(head, endpoint: runtime.forwardAuthPath ?? [], source: runtime.forwardAuthSource,
                                      hostRequired: runtime.routesMatchHost, pathOptions: runtime.pathOptions) {
        case .original(let o): original = o
        case .missing: respondLocal(.forwardAuthWithoutTarget(), close: unread); return
        case .untrusted: respondLocal(.untrustedForwarding(), close: unread); return
        case .ambiguous: respondLocal(.ambiguousPath(), close: unread); return
        }
        // Set before routing, so the access log shows the original request even when no route matches.
        exchange.forwardAuth = original
        let routeIndex: Int? = original.method.withUnsafeBytes { method in
            original.canonical.withUnsafeBytes { target in
                let path = HeaderFilter.path(of: target)
                if let host = original.host {
                    return host.withUnsafeBytes { runtime.routes.match(method: method, host: $0, path: path) }
                }
                return runtime.routes.match(method: method, host: nil, path: path)
            }
        }
        guard let routeIndex else {
            respondLocal(.notFound(), close: unread)
            return
        }
        exchange.routeIndex = routeIndex
        let route = gen.routes[routeIndex]
        exchange.bodyLimit = route.maxBodyBytes
        guard route.requiresVerification else {
            answerForwardAuth(route: route, decision: nil)
            return
        }
        guard let plan = route.verification else {
            respondLocal(.verifierUnavailable(), close: unread)
            return
        }
        authenticate(head, route: route, plan: plan)
    }

    /// The verification let the request through (verified, or monitor mode): 200 with the verdict headers.
    func answerForwardAuth(route: CompiledRoute, decision: VerificationDecision?) {
        var response = LocalResponse.json(status: 200, "OK", "{\"verdict\":\"\(exchange.verdict.text)\"}")
        if let plan = route.verification, let decision {
            let scratch = worker.scratch
            scratch.clear()
            plan.appendVerdictHeaders(decision, to: scratch)
            response.extraHeaders = String(decoding: scratch.readable, as: UTF8.self)
        }
        exchange.heldBody = nil
        respondLocal(response, close: !http.requestDone || !(exchange.head?.keepAlive ?? false))
    }
}

extension ProxyExchange {
    /// The access log line of a forward-auth call: the original request it asked about (its method and canonical
    /// path), since the call's own line is always the endpoint.
    func logForwardAuthCheck(_ original: ForwardAuthTarget, log: AccessLog, route: [UInt8], status: Int, bytesOut: Int,
                             verdict: StaticString) {
        let proto: StaticString = http2 ? "HTTP/2" : exchange.head?.version == .http10 ? "HTTP/1.0" : "HTTP/1.1"
        withRequestID { id in
            original.method.withUnsafeBytes { method in
                original.canonical.withUnsafeBytes { target in
                    log.record(time: exchange.startMicros, route: route, method: method, path: HeaderFilter.path(of: target),
                               status: status, upstreamStatus: exchange.upstreamStatus, bytesIn: exchange.bytesIn,
                               bytesOut: bytesOut, verdict: verdict, reason: exchange.reason?.code, requestID: id,
                               protocol: proto)
                }
            }
        }
    }
}
