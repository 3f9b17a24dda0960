import Attestation
import GatewayCore
import HTTP1

/// The original request a forward-auth call asks about.
struct ForwardAuthTarget {
    let method: [UInt8]
    /// Origin form: path and query, as the client sent them to the other proxy.
    let target: [UInt8]
}

/// Forward-auth (`forward_auth.path`): another proxy asks whether to let a request through — nginx `auth_request`,
/// Traefik `forwardAuth`, Envoy `ext_authz` (HTTP service). The gateway matches the *original* request against the
/// routes and runs that route's verification (limited use and App Attest counters included) on the headers of the
/// call, then answers instead of forwarding: 200 with the `X-Attest-*` headers, or the rejection (401/403/503 JSON).
///
/// The original method and URI come from `X-Forwarded-Method` / `X-Forwarded-Uri` (Traefik) or
/// `X-Original-Method` / `X-Original-URI` (the usual nginx `proxy_set_header` names), else — Envoy's layout — from
/// the call itself: its method and the target after `{path}`. The host from `X-Forwarded-Host`, else `Host`.
extension DownstreamConnection {
    static let forwardedMethod: [[UInt8]] = ["x-forwarded-method", "x-original-method"].map { Array($0.utf8) }
    static let forwardedURI: [[UInt8]] = ["x-forwarded-uri", "x-original-uri"].map { Array($0.utf8) }
    static let forwardedHost = Array("x-forwarded-host".utf8)

    func beginForwardAuth(_ head: HTTP1RequestHead, prefixLength: Int) {
        let original: (target: ForwardAuthTarget, host: [UInt8]?)? = head.bytes.withUnsafeBytes { raw in
            func field(_ names: [[UInt8]]) -> [UInt8]? {
                for name in names {
                    if case .value(let r) = RouteVerification.tokenField(head, raw, lowercasedName: name) { return Array(raw[r]) }
                }
                return nil
            }
            let host = field([Self.forwardedHost]) ?? head.host.map { Array(raw[$0]) }
            if let uri = field(Self.forwardedURI) {
                let method = field(Self.forwardedMethod) ?? Array(raw[head.method])
                return (ForwardAuthTarget(method: method, target: uri), host)
            }
            let target = HeaderFilter.originForm(UnsafeRawBufferPointer(rebasing: raw[head.target]))
            guard target.count > prefixLength else { return nil }
            return (ForwardAuthTarget(method: Array(raw[head.method]), target: Array(target[prefixLength...])), host)
        }
        let unread = !exchange.requestDone || !head.keepAlive
        guard let original, original.target.target.first == UInt8(ascii: "/"), !original.target.method.isEmpty else {
            respondLocal(.forwardAuthWithoutTarget(), close: unread)
            return
        }
        let routeIndex: Int? = original.target.method.withUnsafeBytes { method in
            original.target.target.withUnsafeBytes { target in
                let path = HeaderFilter.path(of: target)
                if let host = original.host {
                    return host.withUnsafeBytes { gen.runtime.routes.match(method: method, host: $0, path: path) }
                }
                return gen.runtime.routes.match(method: method, host: nil, path: path)
            }
        }
        guard let routeIndex else {
            respondLocal(.notFound(), close: unread)
            return
        }
        exchange.forwardAuth = original.target
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
