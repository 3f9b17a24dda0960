#if canImport(Glibc)
import Glibc
#endif
import GatewayConfig
import GatewayCore
import GatewayPosix
import HTTP1
import Attestation
import Observability
import GatewayCrypto
import StateStore

extension ProxyExchange {
    /// The whole request body has been read: send the end on, or verify a held body; true when a held body was
    /// completed (the caller goes on: the exchange has moved).
    func requestBodyEnded() -> Bool {
        http.bodyEnded()
        if exchange.heldBody != nil && exchange.upstream == nil {
            heldBodyComplete()
            return true
        }
        exchange.upstream?.sendBodyEnd(chunked: exchange.requestChunked)
        if carrier.pendingOutput == 0 { clearDeadline() }
        return false
    }

    /// Routes a new request and starts forwarding it, or answers it locally.
    func beginRequest(_ head: HTTP1RequestHead) {
        var head = head
        if head.upgradeWebSocket, !gen.runtime.queryTokens.isEmpty,
           let rewritten = QueryTokenSource.rewrite(head, gen.runtime.queryTokens, limits: gen.runtime.requestLimits) {
            switch rewritten {
            case .success(let h): head = h
            case .failure(let e):
                respondLocal(.parseError(status: e.status, code: e.code.rawValue), close: true)
                return
            }
        }
        exchange.startMicros = MonotonicClock.nowMicros()
        exchange.head = head
        exchange.outMark = sink.bytesOut
        if let client = RequestID.fromClient(head) {
            exchange.requestID = .client(client)
        } else {
            generateRequestID()
        }
        let hasBody = head.framing != .none
        let generation = worker.current
        exchange.generation = generation
        // Read through the generation (a class): a `let runtime = …` copy would retain every field of the struct.
        var registration: RegistrationEndpoints.Endpoint? = nil
        var forwardAuth = false
        var jwks = false
        // One pass over the head's bytes: the canonical target, then the endpoint or route it names.
        var ambiguous = false
        let preflight = head.isCORSPreflight
        let routeIndex: Int? = head.bytes.withUnsafeBytes { raw -> Int? in
            guard let target = RequestTarget.resolve(head, raw, options: generation.runtime.pathOptions) else {
                ambiguous = true
                return nil
            }
            exchange.canonicalTarget = target.canonical
            exchange.authority = target.authority
            let host = target.authority ?? head.host
            return Self.withRoutingPath(canonical: target.canonical, head, raw) { path -> Int? in
                if !generation.runtime.registration.isEmpty, let endpoint = generation.runtime.registration.match(path: path) {
                    registration = endpoint
                    return nil
                }
                if let jp = generation.runtime.verdictJWKSPath, path.count == jp.count, Bytes.hasPrefix(path, jp) {
                    jwks = true
                    return nil
                }
                if let fa = generation.runtime.forwardAuthPath, Bytes.hasPrefix(path, fa),
                   path.count == fa.count || path[fa.count] == UInt8(ascii: "/") {
                    forwardAuth = true
                    return nil
                }
                return generation.runtime.routes.match(method: UnsafeRawBufferPointer(rebasing: raw[head.method]),
                                            host: host.map { UnsafeRawBufferPointer(rebasing: raw[$0]) }, path: path,
                                            preflight: preflight)
            }
        }
        http.headReceived(keepAlive: head.keepAlive, hasBody: hasBody)
        if let registration {
            beginRegistration(head, registration)
            return
        }
        if jwks, let signer = generation.runtime.verdict {
            // verdict_token.jwks_path: the key set upstreams verify the verdict token with (public by design).
            guard head.methodIs("GET") || head.methodIs("HEAD") else {
                respondLocal(.methodNotAllowed(allow: "GET, HEAD"), close: hasBody || !head.keepAlive)
                return
            }
            respondLocal(.json(status: 200, "OK", signer.jwks), close: hasBody || !head.keepAlive)
            return
        }
        if forwardAuth, let fa = generation.runtime.forwardAuthPath {
            beginForwardAuth(head, prefixLength: fa.count)
            return
        }
        guard !ambiguous else {
            // Servers would read this target differently: refuse it rather than route one reading and serve another.
            respondLocal(.ambiguousPath(), close: hasBody || !head.keepAlive)
            return
        }
        guard let routeIndex else {
            respondLocal(.notFound(), close: hasBody || !head.keepAlive)
            return
        }
        exchange.routeIndex = routeIndex
        let route = gen.routes[routeIndex]
        exchange.bodyLimit = route.maxBodyBytes
        // A per-client limit applies before any verification work is spent on the request.
        if let limit = route.rateLimit, limit.key == .clientAddress {
            let key = rateLimitAddress(head)
            if let shared = gen.runtime.sharedRateLimits {
                takeSharedToken(shared, limit, name: route.rateLimitName, key: key, close: hasBody || !head.keepAlive) { conn in
                    conn.routeAdmitted(head, route: route, preflight: preflight)
                }
                return
            }
            if let retry = gen.runtime.rateLimiter.take(limit, name: route.rateLimitName, key: key) {
                respondLocal(.rateLimited(retryAfter: retry), close: hasBody || !head.keepAlive)
                return
            }
        }
        routeAdmitted(head, route: route, preflight: preflight)
    }

    /// The route's request, past its client-address limit: verify it, or forward it.
    private func routeAdmitted(_ head: HTTP1RequestHead, route: CompiledRoute, preflight: Bool) {
        let hasBody = head.framing != .none
        // gRPC runs over HTTP/2 only: an HTTP/1.1 client naming application/grpc does not get the longer idle limit.
        if head.grpc && http2 { exchange.streamIdleMillis = route.streamIdleMillis }
        if head.upgradeWebSocket {
            // Only a route that allows it switches protocols, and only on a handshake of the RFC's form; any other
            // reading of the request (a plain GET with Upgrade stripped) would hand the client something else.
            guard route.webSocket, head.isWebSocketHandshake, !http2 else {
                respondLocal(.upgradeNotAllowed(), close: true)
                return
            }
            exchange.webSocket = true
        }
        if preflight && route.forwardsPreflights {
            // A browser's preflight carries no credential (the Fetch standard strips them); the upstream answers
            // CORS as it does without the gateway. The request that follows is verified as usual.
            forward(head, route: route, decision: nil)
            return
        }
        if route.requiresVerification {
            guard let plan = route.verification else {
                // A verifier the route names that the runtime does not have: refuse rather than forward unverified.
                respondLocal(.verifierUnavailable(), close: hasBody || !head.keepAlive)
                return
            }
            authenticate(head, route: route, plan: plan)
            return
        }
        if case .contentLength(let n) = head.framing, n > route.maxBodyBytes {
            respondLocal(.payloadTooLarge(), close: true)
            return
        }
        forward(head, route: route, decision: nil)
    }

    /// The first untrusted hop, for `client_address` limits: the peer, or — when the peer is a trusted proxy — the
    /// address it reports as the last `X-Forwarded-For` entry (a chain of trusted proxies collapses onto the innermost
    /// one's report: stricter, never looser).
    func rateLimitAddress(_ head: HTTP1RequestHead) -> [UInt8] {
        guard trustedPeer else { return clientAddress }
        let reported: [UInt8]? = head.withHeaderView { headers in
            var last: ArraySlice<UInt8>? = nil
            for field in headers.fields {
                let name = headers[field.name]
                guard HeaderFilter.eq(name, "x-forwarded-for") else { continue }
                let value = Array(headers[field.value])
                if let entry = value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true).last { last = entry }
            }
            guard let last else { return nil }
            let trimmed = last.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
            return trimmed.isEmpty ? nil : Array(trimmed)
        }
        return reported ?? clientAddress
    }
}
