import Attestation
import GatewayCore
import HTTP1

/// Forward-auth (`forward_auth.path`): another proxy asks whether to let a request through — nginx `auth_request`,
/// Traefik `forwardAuth`, Envoy `ext_authz` (HTTP service). The gateway matches the *original* request against the
/// routes and runs that route's verification (limited use and App Attest counters included) on the headers of the
/// call, then answers instead of forwarding: 200 with the `X-Attest-*` headers, or the rejection (401/403/503 JSON).
///
/// Where the original method, URI and host come from is `forward_auth.source` (ForwardAuthTarget.read); the route
/// is matched on the canonical path, as for a request the gateway receives itself.
extension DownstreamConnection {
    func beginForwardAuth(_ head: HTTP1RequestHead, prefixLength: Int) {
        let runtime = gen.runtime
        let unread = !exchange.requestDone || !head.keepAlive
        let original: ForwardAuthTarget
        switch ForwardAuthTarget.read(head, prefixLength: prefixLength, source: runtime.forwardAuthSource,
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
        continueVerification(head, route: route, plan: plan)
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
        respondLocal(response, close: !exchange.requestDone || !(exchange.head?.keepAlive ?? false))
    }
}

extension DownstreamConnection {
    /// The method and path the access log shows: a forward-auth call's original request (its canonical path) —
    /// the call's own line is always the endpoint — else the request's own.
    func withLoggedRequestLine<R>(_ head: HTTP1RequestHead,
                                  _ body: (_ method: UnsafeRawBufferPointer, _ path: UnsafeRawBufferPointer) -> R) -> R {
        if let original = exchange.forwardAuth {
            return original.method.withUnsafeBytes { method in
                original.canonical.withUnsafeBytes { body(method, HeaderFilter.path(of: $0)) }
            }
        }
        return head.bytes.withUnsafeBytes { raw in
            body(UnsafeRawBufferPointer(rebasing: raw[head.method]),
                 HeaderFilter.path(of: UnsafeRawBufferPointer(rebasing: raw[head.target])))
        }
    }
}
