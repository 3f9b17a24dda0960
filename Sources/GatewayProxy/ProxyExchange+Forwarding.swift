#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import HTTP1
import HTTP2
import Attestation
import GatewayConfig
import Observability
import GatewayCrypto
import StateStore

extension ProxyExchange {
    /// The verifiers have decided: reject (enforce mode), consume limited-use credentials, or forward.
    func verificationDecided(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator,
                             _ decision: VerificationDecision) {
        noteDecision(route, decision)
        let unreadBody = !http.requestDone
        if let status = plan.enforced(decision) {
            respondLocal(.rejected(status, schemes: head.withHeaderView { plan.schemes(for: decision, headers: $0) }),
                         close: unreadBody || !head.keepAlive)
            return
        }
        if case .contentLength(let n) = head.framing, n > route.maxBodyBytes {
            respondLocal(.payloadTooLarge(), close: true)
            return
        }
        // An app id or key id limit counts verified requests only, before anything is consumed.
        if let limit = route.rateLimit, limit.key != .clientAddress, let key = Self.rateLimitKey(limit.key, decision) {
            if let shared = gen.runtime.sharedRateLimits {
                takeSharedToken(shared, limit, name: route.rateLimitName, key: Array(key.utf8), close: unreadBody || !head.keepAlive) { conn in
                    conn.verifiedAdmitted(head, route: route, plan: plan, decision)
                }
                return
            }
            if let retry = gen.runtime.rateLimiter.take(limit, name: route.rateLimitName, key: key.utf8) {
                respondLocal(.rateLimited(retryAfter: retry), close: unreadBody || !head.keepAlive)
                return
            }
        }
        verifiedAdmitted(head, route: route, plan: plan, decision)
    }

    /// A decision that may go on, past the route's app id or key id limit: consume what it names, then forward.
    private func verifiedAdmitted(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator,
                                  _ decision: VerificationDecision) {
        switch plan.consumption(for: decision, progress: exchange.progress) {
        case .nothing:
            forward(head, route: route, decision: decision)
        case .refused(let refused):
            consumed(head, route: route, plan: plan, refused)
        case .consume(let requests, let owners):
            consume(head, route: route, plan: plan, decision: decision, requests, verifiers: owners)
        }
    }

    /// What an `app_id` / `key_id` limit counts by: the verified credential's app id, or its App Attest key id.
    static func rateLimitKey(_ key: RateLimitKey, _ decision: VerificationDecision) -> String? {
        let token: PassedCredential
        switch decision {
        case .verified(_, let t), .verifiedUnchecked(_, let t, _): token = t
        case .failed, .absent: return nil
        }
        switch key {
        case .appID: return token.appID
        case .keyID: return token.fields.first { $0.name.description == "X-Attest-Key-Id" }?.value
        case .clientAddress: return nil
        }
    }

    /// The access log's and metrics' view of a decision.
    private func noteDecision(_ route: CompiledRoute, _ decision: VerificationDecision) {
        exchange.verifierMetric = decision.verifierIndex.map { route.verifierMetricIDs[$0] } ?? -1
        exchange.verifierName = decision.verifierIndex.flatMap { route.verification?.verifiers[$0].name }
        exchange.verdict = decision.accessLogVerdict
        exchange.reason = decision.status
        if case .verifiedUnchecked(_, _, let reason) = decision { exchange.reason = reason }
        switch decision {
        case .verified(_, let t), .verifiedUnchecked(_, let t, _): exchange.appID = t.appID
        case .failed, .absent: break
        }
    }

    /// Limited use: each credential must be new; all are consumed (atomically each, off the loop) only now that
    /// every other check has passed. The request goes on only if every one was unseen.
    private func consume(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator, decision: VerificationDecision,
                         _ requests: [ConsumeRequest], verifiers owners: [Int]) {
        guard let state = gen.runtime.state else {
            respondLocal(.verifierUnavailable(), close: head.framing != .none || !head.keepAlive)
            return
        }
        let finish: (ProxyExchange, [Result<Bool, StateStoreError>]) -> Void = { conn, results in
            conn.consumed(head, route: route, plan: plan, plan.consumed(results, verifiers: owners, decision: decision,
                                                                        allowWhenUnavailable: state.allowWhenUnavailable))
        }
        let now = worker.unixNow()
        if requests.count == 1, let only = requests.first {
            // The common case joins the loop's batch of consumes (one SQLite commit for many requests).
            waitOffLoop()
            state.consume(namespace: only.namespace, key: only.key, expiresAt: only.expiresAt, now: now,
                          loop: worker.loop, owner: self) { conn, result in
                guard conn.backOnLoop() else { return }
                finish(conn, [result])
                conn.resumeAfterStateWork()
            }
            return
        }
        offLoop(state, "consume_all", { store in .success(store.consumeOnce(batch: requests, now: now)) }) { conn, result in
            switch result {
            case .success(let results): finish(conn, results)
            case .failure(let e): finish(conn, Array(repeating: .failure(e), count: requests.count))
            }
        }
    }

    private func consumed(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator, _ decision: VerificationDecision) {
        noteDecision(route, decision)
        if let status = plan.enforced(decision) {
            respondLocal(.rejected(status, schemes: head.withHeaderView { plan.schemes(for: decision, headers: $0) }),
                         close: head.framing != .none || !head.keepAlive)
            return
        }
        forward(head, route: route, decision: decision)
    }

    /// Takes an upstream connection and sends the filtered head (and the verdict headers).
    func forward(_ head: HTTP1RequestHead, route: CompiledRoute, decision: VerificationDecision?) {
        if exchange.forwardAuth != nil {
            answerForwardAuth(route: route, decision: decision)
            return
        }
        let hasBody = head.framing != .none
        let pool = gen.pools[route.upstreamIndex]
        guard let up = pool.acquireLeg(for: self, head: head,
                                       silenceMillis: exchange.streamIdleMillis != 0 ? exchange.streamIdleMillis
                                                                                      : pool.target.responseTimeoutMillis) else {
            respondLocal(UpstreamFailure.connectFailed.response, close: hasBody || !head.keepAlive)
            return
        }
        exchange.upstream = up
        up.expectsUpgrade = exchange.webSocket
        exchange.requestChunked = head.framing == .chunked
        exchange.forwardMicros = MonotonicClock.nowMicros()
        let verdictStrip = gen.runtime.verdictStrip
        var verdictToken: String? = nil
        if let signer = gen.runtime.verdict, let plan = route.verification, let decision {
            switch decision {
            case .verified(let i, let credential), .verifiedUnchecked(let i, let credential, _):
                // The target as routed and forwarded (canonical), so the upstream can compare it with what it got.
                verdictToken = withRequestID { id in
                    signer.token(upstream: pool.target.name, route: route.name, verifier: plan.verifiers[i].name,
                                 credential: credential, requestID: String(decoding: id, as: UTF8.self),
                                 method: head.string(head.method),
                                 target: exchange.canonicalTarget.map { String(decoding: $0, as: UTF8.self) } ?? head.string(head.target),
                                 now: worker.unixNow())
                }
                guard verdictToken != nil else {
                    exchange.upstream = nil
                    up.abort()
                    respondLocal(.verdictUnavailable(), close: hasBody || !head.keepAlive)
                    return
                }
            default:
                break
            }
        }
        withRequestID { id in up.sendHead { out in
            if let plan = route.verification, let decision {
                let scratch = worker.scratch
                scratch.clear()
                plan.appendVerdictHeaders(decision, to: scratch)
                if case .failed = decision {
                    // Monitor mode, a policy refused (max_risk_metric): the upstream sees what would have refused it.
                    Authenticator.append(exchange.progress.refusedFields, to: scratch)
                }
                if let verdictToken, let signer = gen.runtime.verdict {
                    scratch.append(signer.header)
                    scratch.append(": " as StaticString)
                    scratch.append(verdictToken)
                    scratch.append("\r\n" as StaticString)
                }
                HeaderFilter.appendUpstreamRequestHead(head, basePath: pool.target.basePath, clientAddress: clientAddress,
                                                       strip: Self.stripped(plan, verdictStrip),
                                                       extra: scratch.readable, requestID: id, https: https,
                                                       target: exchange.canonicalTarget, authority: exchange.authority,
                                                       trustedPeer: trustedPeer, upgrade: exchange.webSocket, to: out)
            } else {
                HeaderFilter.appendUpstreamRequestHead(head, basePath: pool.target.basePath, clientAddress: clientAddress,
                                                       strip: verdictStrip,
                                                       requestID: id, https: https, target: exchange.canonicalTarget,
                                                       authority: exchange.authority, trustedPeer: trustedPeer,
                                                       upgrade: exchange.webSocket, to: out)
            }
        } }
        if let held = exchange.heldBody {
            // The body was read to verify it: send it now, in the framing the upstream was told.
            exchange.heldBody = nil
            defer { held.dropBytes(); exchange.forwardedHeldBody = held }
            held.bytes.withUnsafeBytes { up.sendBody($0, chunked: exchange.requestChunked) }
            if let t = exchange.heldTrailers {
                exchange.heldTrailers = nil
                up.sendTrailers(t)
            }
            clearDeadline()
            up.sendBodyEnd(chunked: exchange.requestChunked)
            return
        }
        if hasBody {
            sendContinueIfExpected(head)
            setDeadline(worker.loop.now + exchange.idleMillis(worker))
        } else {
            clearDeadline()
        }
        // The head goes out with the first body bytes (or alone) when processing of this read ends.
        if !hasBody { up.flush() }
    }

    /// The request fields to drop for a verified route: its token headers (`strip_token_headers`) and a client's
    /// copy of the verdict field (only when `verdict_token.header` is not an X-Attest-* name: no copy otherwise).
    @inline(__always) static func stripped(_ plan: Authenticator, _ verdictStrip: [[UInt8]]) -> [[UInt8]] {
        let tokens = plan.stripTokenHeaders ? plan.tokenHeaders : []
        return verdictStrip.isEmpty ? tokens : tokens + verdictStrip
    }

    /// We answer 100-continue ourselves (Expect is not forwarded), once the gateway wants the body.
    func sendContinueIfExpected(_ head: HTTP1RequestHead) {
        guard sink.sendContinue(request: head) else { return }
        exchange.outMark = sink.bytesOut
        flushOut()
    }

    /// Sends request-body bytes on, re-framed as a chunk when the request was chunked.
    func forwardBody(_ bytes: UnsafeRawBufferPointer) {
        exchange.bodyBytes += bytes.count
        if exchange.bodyBytes > exchange.bodyLimit {
            if http.responseStarted {
                close()
            } else {
                abortUpstream()
                respondLocal(.payloadTooLarge(), close: true)
            }
            return
        }
        if let held = exchange.heldBody {
            guard held.append(bytes) else {
                // Over the process-wide budget for held bodies: refuse this one rather than run out of memory.
                abortUpstream()
                respondLocal(.overloaded(), close: true)
                return
            }
            return
        }
        guard let up = exchange.upstream else { return }
        up.sendBody(bytes, chunked: exchange.requestChunked)
        if up.unsentRequestBytes >= 64 * 1024 {
            up.flush()
            if up.unsentRequestBytes >= worker.highWater { http.pauseBody(true) }
        }
    }

    /// The request's trailers (an HTTP/2 client's), relayed where the upstream request can carry them.
    func forwardTrailers(_ received: ResponseTrailers) {
        // A credential field in a trailer was never verified (only the head's are): an upstream that merges
        // trailers into the head must not see one.
        var trailers = received
        if exchange.routeIndex >= 0, let plan = gen.routes[exchange.routeIndex].verification {
            let strip = plan.tokenHeaders + gen.runtime.verdictStrip
            var kept = ResponseTrailers()
            received.bytes.withUnsafeBytes { p in
                for f in received.fields where !HeaderFilter.isStripped(UnsafeRawBufferPointer(rebasing: p[f.name]), strip) {
                    kept.add(UnsafeRawBufferPointer(rebasing: p[f.name]), UnsafeRawBufferPointer(rebasing: p[f.value]))
                }
            }
            trailers = kept
        }
        if exchange.heldBody != nil {
            exchange.heldTrailers = trailers   // they follow the held body when it goes
            return
        }
        exchange.upstream?.sendTrailers(trailers)
    }

    /// The upstream drained its write buffer below the high-water mark: read the client again.
    func upstreamCanTakeMore() {
        guard http.bodyPaused else { return }
        http.pauseBody(false)
        carrier.resumeInput()
    }

    /// A pooled connection failed before sending a byte: move the request to a fresh connection.
    func retryOnFreshConnection(from old: UpstreamConnection) {
        guard let head = exchange.head else { return }
        let pool = old.pool
        exchange.connectRetries += 1
        guard exchange.connectRetries <= max(1, (pool.target.cluster?.count ?? 1) - 1),
              let fresh = pool.connect(for: self, isHEAD: head.methodIs("HEAD"), excluding: old.endpoint) else {
            exchange.upstream = nil
            upstreamFailed(.connectFailed)
            return
        }
        fresh.takeUnsentRequest(from: old)
        fresh.expectsUpgrade = exchange.webSocket
        fresh.silenceMillis = old.silenceMillis
        exchange.upstream = fresh
        fresh.flush()
    }

}
