#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import HTTP1
import Attestation
import Observability
import GatewayCrypto
import StateStore

extension DownstreamConnection {
    // MARK: parsing requests

    /// Feeds buffered input to the parser until it needs more, an exchange waits on the upstream, or the
    /// connection is closing.
    func process() {
        if let mux {
            mux.input(inBuf)
            return
        }
        if let stream {
            processStreamBody(stream)
            return
        }
        while !closed {
            switch phase {
            case .awaitingHead:
                if inBuf.isEmpty { return }
                if !exchange.sawRequestBytes && stream == nil {
                    switch checkH2CPreface() {
                    case .some(true):
                        startHTTP2()
                        if let mux, !closed { mux.input(inBuf) }
                        return
                    case nil:
                        return   // the start of the h2c preface, maybe: wait for the rest
                    case .some(false):
                        break
                    }
                }
                if !exchange.sawRequestBytes {
                    exchange.sawRequestBytes = true
                    setDeadline(worker.loop.now + worker.headerTimeout)
                }
                switch parser.next(inBuf.readable) {
                case .needMore(let consumed):
                    inBuf.consume(consumed)
                    return
                case .head(let head, let consumed):
                    inBuf.consume(consumed)
                    exchange.bytesIn = consumed
                    beginRequest(head)
                case .error(let error):
                    respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
                    return
                case .end(let consumed):
                    inBuf.consume(consumed)   // defensive: a body-less request's end is taken in beginRequest
                case .body:
                    return
                }
            case .forwarding:
                if exchange.requestDone || readPaused || exchange.awaitingState { return }
                switch parser.next(inBuf.readable) {
                case .needMore(let consumed):
                    inBuf.consume(consumed)
                    exchange.bytesIn += consumed
                    exchange.upstream?.flush()
                    return
                case .body(let range, let consumed):
                    forwardBody(UnsafeRawBufferPointer(rebasing: inBuf.readable[range]))
                    inBuf.consume(consumed)
                    exchange.bytesIn += consumed
                case .end(let consumed):
                    inBuf.consume(consumed)
                    exchange.bytesIn += consumed
                    if requestBodyEnded() { continue }
                    return
                case .error(let error):
                    if exchange.responseStarted {
                        close()
                    } else {
                        abortUpstream()
                        respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
                    }
                    return
                case .head:
                    return
                }
            case .closing, .lingering:
                return
            }
        }
    }

    /// An HTTP/2 stream's body, as it arrived (nghttp2 checked it against its `content-length`).
    private func processStreamBody(_ stream: H2Stream) {
        while !closed && phase == .forwarding && !exchange.requestDone && !readPaused && !exchange.awaitingState {
            if inBuf.isEmpty {
                guard stream.requestEnded else {
                    exchange.upstream?.flush()
                    return
                }
                if requestBodyEnded() { continue }
                return
            }
            let n = inBuf.readableBytes
            forwardBody(inBuf.readable)
            inBuf.consume(n)
            exchange.bytesIn += n
        }
    }

    /// The whole request body has been read: send the end on, or verify a held body; true when a held body was
    /// completed (the caller goes on: the exchange has moved).
    private func requestBodyEnded() -> Bool {
        exchange.requestDone = true
        if exchange.heldBody != nil && exchange.upstream == nil {
            heldBodyComplete()
            return true
        }
        if let up = exchange.upstream {
            if exchange.requestChunked { up.outBuf.appendLastChunk() }
            up.flush()
        }
        if pendingOutput == 0 { deadline = 0 }
        return false
    }

    /// Routes a new request and starts forwarding it, or answers it locally.
    func beginRequest(_ head: HTTP1RequestHead) {
        exchange.startMicros = MonotonicClock.nowMicros()
        exchange.head = head
        exchange.outMark = sink.bytesOut
        if let client = RequestID.fromClient(head) {
            exchange.requestID = .client(client)
        } else {
            let low = worker.requestIDs.next()
            worker.requestIDs.format(low, into: UnsafeMutableRawBufferPointer(start: generatedRequestID, count: RequestIDGenerator.length))
            exchange.requestID = .generated(low)
        }
        let hasBody = head.framing != .none
        let generation = worker.current
        exchange.generation = generation
        // Read through the generation (a class): a `let runtime = …` copy would retain every field of the struct.
        var registration: (action: RegistrationEndpoints.Action, verifier: AppAttestVerifier)? = nil
        var forwardAuth = false
        // One pass over the head's bytes: the canonical target, then the endpoint or route it names.
        var ambiguous = false
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
                if let fa = generation.runtime.forwardAuthPath, Bytes.hasPrefix(path, fa),
                   path.count == fa.count || path[fa.count] == UInt8(ascii: "/") {
                    forwardAuth = true
                    return nil
                }
                return generation.runtime.routes.match(method: UnsafeRawBufferPointer(rebasing: raw[head.method]),
                                            host: host.map { UnsafeRawBufferPointer(rebasing: raw[$0]) }, path: path)
            }
        }
        phase = .forwarding
        if !hasBody {
            // A body-less request is complete with its head: take the parser's end event now.
            if stream == nil, case .end = parser.next(UnsafeRawBufferPointer(start: nil, count: 0)) {}
            exchange.requestDone = true
        }
        if let registration {
            beginRegistration(head, registration)
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
        if route.requiresVerification {
            guard let plan = route.verification else {
                // A verifier type that has not landed yet: refuse rather than forward unverified.
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

    /// The verifiers have decided: reject (enforce mode), consume limited-use credentials, or forward.
    func verificationDecided(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator,
                             _ decision: VerificationDecision) {
        noteDecision(route, decision)
        let unreadBody = !exchange.requestDone
        if let status = plan.enforced(decision) {
            respondLocal(.rejected(status, schemes: head.withHeaderView { plan.schemes(for: decision, headers: $0) }),
                         close: unreadBody || !head.keepAlive)
            return
        }
        if case .contentLength(let n) = head.framing, n > route.maxBodyBytes {
            respondLocal(.payloadTooLarge(), close: true)
            return
        }
        switch plan.consumption(for: decision, progress: exchange.progress) {
        case .nothing:
            forward(head, route: route, decision: decision)
        case .refused(let refused):
            consumed(head, route: route, plan: plan, refused)
        case .consume(let requests, let owners):
            consume(head, route: route, plan: plan, decision: decision, requests, verifiers: owners)
        }
    }

    /// The access log's and metrics' view of a decision.
    private func noteDecision(_ route: CompiledRoute, _ decision: VerificationDecision) {
        exchange.verifierMetric = decision.verifierIndex.map { route.verifierMetricIDs[$0] } ?? -1
        exchange.verdict = decision.accessLogVerdict
        exchange.reason = decision.status
        if case .verifiedUnchecked(_, _, let reason) = decision { exchange.reason = reason }
    }

    /// Limited use: each credential must be new; all are consumed (atomically each, off the loop) only now that
    /// every other check has passed. The request goes on only if every one was unseen.
    private func consume(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator, decision: VerificationDecision,
                         _ requests: [ConsumeRequest], verifiers owners: [Int]) {
        guard let state = gen.runtime.state else {
            respondLocal(.verifierUnavailable(), close: head.framing != .none || !head.keepAlive)
            return
        }
        let finish: (DownstreamConnection, [Result<Bool, StateStoreError>]) -> Void = { conn, results in
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
    private func forward(_ head: HTTP1RequestHead, route: CompiledRoute, decision: VerificationDecision?) {
        if exchange.forwardAuth != nil {
            answerForwardAuth(route: route, decision: decision)
            return
        }
        let hasBody = head.framing != .none
        let pool = gen.pools[route.upstreamIndex]
        guard let up = pool.acquire(for: self, isHEAD: head.methodIs("HEAD")) else {
            respondLocal(UpstreamFailure.connectFailed.response, close: hasBody || !head.keepAlive)
            return
        }
        exchange.upstream = up
        exchange.requestChunked = head.framing == .chunked
        exchange.forwardMicros = MonotonicClock.nowMicros()
        withRequestID { id in
            if let plan = route.verification, let decision {
                let scratch = worker.scratch
                scratch.clear()
                plan.appendVerdictHeaders(decision, to: scratch)
                if case .failed = decision {
                    // Monitor mode, a policy refused (max_risk_metric): the upstream sees what would have refused it.
                    Authenticator.append(exchange.progress.refusedFields, to: scratch)
                }
                HeaderFilter.appendUpstreamRequestHead(head, basePath: pool.target.basePath, clientAddress: clientAddress,
                                                       strip: plan.stripTokenHeaders ? plan.tokenHeaders : [],
                                                       extra: scratch.readable, requestID: id, https: https,
                                                       target: exchange.canonicalTarget, authority: exchange.authority,
                                                       trustedPeer: trustedPeer, to: up.outBuf)
            } else {
                HeaderFilter.appendUpstreamRequestHead(head, basePath: pool.target.basePath, clientAddress: clientAddress,
                                                       requestID: id, https: https, target: exchange.canonicalTarget,
                                                       authority: exchange.authority, trustedPeer: trustedPeer, to: up.outBuf)
            }
        }
        if let held = exchange.heldBody {
            // The body was read to verify it: send it now, in the framing the upstream was told.
            exchange.heldBody = nil
            defer { held.dropBytes(); exchange.forwardedHeldBody = held }
            if exchange.requestChunked {
                held.bytes.withUnsafeBytes { up.outBuf.appendChunk($0) }
                up.outBuf.appendLastChunk()
            } else {
                held.bytes.withUnsafeBytes { up.outBuf.append($0) }
            }
            deadline = 0
            up.flush()
            return
        }
        if hasBody {
            sendContinueIfExpected(head)
            setDeadline(worker.loop.now + worker.idleTimeout)
        } else {
            deadline = 0
        }
        // The head goes out with the first body bytes (or alone) when processing of this read ends.
        if !hasBody { up.flush() }
    }

    /// We answer 100-continue ourselves (Expect is not forwarded), once the gateway wants the body.
    func sendContinueIfExpected(_ head: HTTP1RequestHead) {
        guard sink.sendContinue(request: head) else { return }
        exchange.outMark = sink.bytesOut
        flushOut()
    }

    /// Sends request-body bytes on, re-framed as a chunk when the request was chunked.
    private func forwardBody(_ bytes: UnsafeRawBufferPointer) {
        exchange.bodyBytes += bytes.count
        if exchange.bodyBytes > exchange.bodyLimit {
            if exchange.responseStarted {
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
        if exchange.requestChunked {
            up.outBuf.appendChunk(bytes)
        } else {
            up.outBuf.append(bytes)
        }
        if up.outBuf.readableBytes >= 64 * 1024 {
            up.flush()
            if up.outBuf.readableBytes >= worker.highWater { readPaused = true }
        }
    }

    /// The upstream drained its write buffer below the high-water mark: read the client again.
    func upstreamCanTakeMore() {
        guard readPaused else { return }
        readPaused = false
        process()
        if readable { readLoop() }
    }

    /// A pooled connection failed before sending a byte: move the request to a fresh connection.
    func retryOnFreshConnection(from old: UpstreamConnection) {
        guard let head = exchange.head else { return }
        let pool = old.pool
        guard let fresh = pool.connect(for: self, isHEAD: head.methodIs("HEAD")) else {
            exchange.upstream = nil
            upstreamFailed(.connectFailed)
            return
        }
        fresh.outBuf.append(old.outBuf.readable)
        old.outBuf.clear()
        exchange.upstream = fresh
        fresh.flush()
    }

    // MARK: the response

    func upstreamResponseHead(_ response: HTTP1ResponseHead) {
        guard let head = exchange.head else { return }
        if response.status < 200 {
            sink.sendInterim(response, request: head)
            return
        }
        exchange.status = response.status
        exchange.upstreamStatus = response.status
        exchange.responseStarted = true
        if let up = exchange.upstream {
            worker.metrics.upstreamResponse(upstream: up.pool.target.metricID, micros: MonotonicClock.nowMicros() &- exchange.forwardMicros)
        }
        if !head.keepAlive || worker.draining { exchange.closeAfter = true }
        sink.sendHead(response, request: head, closeAfter: &exchange.closeAfter)
    }

    /// Relays response-body bytes; returns true when the upstream should pause (the client is slow).
    func upstreamResponseBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        sink.sendBody(bytes)
        if outBuf.readableBytes >= 64 * 1024 {
            flushOut()
            if closed { return true }
        }
        // (An HTTP/2 stream's body goes to its queue at once, so the queue is what fills up.)
        return pendingOutput >= worker.highWater
    }

    func upstreamResponseEnd(from up: UpstreamConnection, reusable: Bool) {
        sink.sendEnd()
        exchange.upstream = nil
        if !exchange.requestDone { exchange.closeAfter = true }   // the rest of the body is still on the wire
        up.pool.release(up, reusable: reusable && exchange.requestDone)
        finishExchange()
        continueWithBufferedRequests()
    }

    /// After an exchange ended from the upstream's side: serve pipelined requests already buffered, then read on.
    private func continueWithBufferedRequests() {
        guard !closed, phase == .awaitingHead else { return }
        process()
        if readable && !closed { readLoop() }
    }

    func upstreamFailed(_ failure: UpstreamFailure) {
        exchange.upstream = nil
        if exchange.responseStarted {
            // Part of the response is out: the only honest signal left is to cut the connection.
            close()
            return
        }
        respondLocal(failure.response, close: !exchange.requestDone || exchange.closeAfter)
        continueWithBufferedRequests()
    }

    // MARK: finishing

    /// Writes a gateway-made response and finishes the exchange.
    func respondLocal(_ response: LocalResponse, close closeConnection: Bool) {
        // HEAD: the answer has no content (RFC 9110 9.3.2); a body would be read as the next response's start.
        var response = response; response.headOnly = exchange.head?.methodIs("HEAD") ?? false
        if exchange.head == nil { exchange.startMicros = MonotonicClock.nowMicros() }
        exchange.outMark = sink.bytesOut
        let close = closeConnection || exchange.closeAfter || (exchange.head.map { !$0.keepAlive } ?? true) || worker.draining
        exchange.closeAfter = close
        exchange.status = response.status
        sink.sendLocal(response, request: exchange.head, close: close, date: worker.httpDate.value(at: worker.unixNow()))
        finishExchange()
    }

    /// Logs the exchange, then closes or gets ready for the next request (which may already be buffered).
    private func finishExchange() {
        logExchange(status: exchange.status)
        if exchange.closeAfter || worker.draining {
            phase = .closing
            flushOut()
            if !closed { setDeadline(worker.loop.now + worker.idleTimeout) }
            return
        }
        flushOut()
        if closed { return }
        exchange = Exchange()
        phase = .awaitingHead
        if inBuf.isEmpty {
            setDeadline(worker.loop.now + worker.idleTimeout)
        } else {
            exchange.sawRequestBytes = true
            setDeadline(worker.loop.now + worker.headerTimeout)
        }
    }

    func logExchange(status: Int) {
        exchange.logged = true
        let metrics = worker.metrics
        metrics.request(route: exchange.routeIndex >= 0 ? gen.routes[exchange.routeIndex].metricID : Self.noRouteMetric,
                        status: status)
        if exchange.verdict != .none {
            let outcome: VerificationKey.Outcome = switch exchange.verdict {
            case .verified: .verified
            case .absent: .absent
            default: .failed
            }
            metrics.verification(VerificationKey.make(
                verifier: exchange.verifierMetric >= 0 ? exchange.verifierMetric : Self.noRouteMetric, outcome: outcome,
                reason: exchange.reason?.metricIndex ?? 0xFF))
        }
        let log = worker.accessLog
        guard log.enabled else { return }
        let routeName: [UInt8] = exchange.routeIndex >= 0 ? gen.routes[exchange.routeIndex].jsonName : Array("null".utf8)
        let bytesOut = sink.bytesOut - exchange.outMark
        let verdict = exchange.verdict.text
        if let original = exchange.forwardAuth {   // forward-auth: the original request's line, not the call's
            logForwardAuthCheck(original, log: log, route: routeName, status: status, bytesOut: bytesOut, verdict: verdict)
            return
        }
        withRequestID { id in
            if let head = exchange.head {
                // The path as routed (canonical), so the log says what was judged and forwarded.
                head.bytes.withUnsafeBytes { raw in
                    Self.withRoutingPath(canonical: exchange.canonicalTarget, head, raw) { path in
                        log.record(time: exchange.startMicros, route: routeName,
                                   method: UnsafeRawBufferPointer(rebasing: raw[head.method]),
                                   path: path,
                                   status: status, upstreamStatus: exchange.upstreamStatus, bytesIn: exchange.bytesIn,
                                   bytesOut: bytesOut, verdict: verdict, reason: exchange.reason?.code, requestID: id,
                                   protocol: stream != nil ? "HTTP/2" : head.version == .http10 ? "HTTP/1.0" : "HTTP/1.1")
                    }
                }
            } else {
                let dash: StaticString = "-"
                log.record(time: exchange.startMicros, route: routeName,
                           method: UnsafeRawBufferPointer(start: dash.utf8Start, count: 1),
                           path: UnsafeRawBufferPointer(start: dash.utf8Start, count: 1),
                           status: status, upstreamStatus: 0, bytesIn: exchange.bytesIn, bytesOut: bytesOut, verdict: verdict,
                           reason: nil)
            }
        }
    }
}

extension DownstreamConnection {
    /// The configuration of the request in progress (the current one between requests).
    var gen: LoopGeneration { exchange.generation ?? worker.current }

    /// The label for "no route" and "no verifier decided".
    static let noRouteMetric = MetricNames.shared.id("-")
}
