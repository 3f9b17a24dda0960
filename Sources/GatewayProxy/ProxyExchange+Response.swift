#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import HTTP1
import HTTP2
import Attestation
import Observability
import GatewayCrypto
import StateStore

extension ProxyExchange {
    // MARK: the response

    func upstreamResponseHead(_ response: HTTP1ResponseHead) {
        guard let head = exchange.head else { return }
        if response.status < 200 {
            sink.sendInterim(response, request: head)
            return
        }
        exchange.status = response.status
        exchange.upstreamStatus = response.status
        http.responseBegan()
        if let up = exchange.upstream { noteUpstreamLatency(up) }
        if !head.keepAlive || worker.draining { http.closeAfterResponse() }
        var closeAfter = http.closeAfter
        sink.sendHead(response, request: head, closeAfter: &closeAfter)
        if closeAfter { http.closeAfterResponse() }
    }

    /// The upstream latency histogram: request head sent → response head read.
    func noteUpstreamLatency(_ up: any UpstreamLeg) {
        let micros = MonotonicClock.nowMicros() &- exchange.forwardMicros
        worker.metrics.upstreamResponse(upstream: up.target.metricID, micros: micros)
        exchange.upstreamMicros = micros
        exchange.upstreamAddress = up.peerLabel
    }

    /// Relays response-body bytes; returns true when the upstream should pause (the client is slow).
    func upstreamReadEnded() { flushOut() }

    func upstreamResponseBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        sink.sendBody(bytes)
        if carrier.unflushedOutput >= 64 * 1024 {
            flushOut()
            if closed { return true }
        }
        // (An HTTP/2 stream's body goes to its queue at once, so the queue is what fills up.)
        return carrier.pendingOutput >= worker.highWater
    }

    func upstreamResponseTrailers(_ trailers: ResponseTrailers) {
        sink.sendTrailers(trailers)
    }

    func upstreamResponseEnd(from up: any UpstreamLeg, reusable: Bool) {
        sink.sendEnd()
        exchange.upstream = nil
        if !http.requestDone { http.closeAfterResponse() }   // the rest of the body is still on the wire
        up.release(reusable: reusable && http.requestDone)
        finishExchange()
        continueWithBufferedRequests()
    }

    /// After an exchange ended from the upstream's side: serve pipelined requests already buffered, then read on.
    private func continueWithBufferedRequests() {
        guard !closed, http.phase == .awaitingHead else { return }
        carrier.resumeInput()
    }

    func upstreamFailed(_ failure: UpstreamFailure) {
        exchange.upstream = nil
        if http.responseStarted {
            // Part of the response is out: the only honest signal left is to cut the connection.
            close()
            return
        }
        respondLocal(failure.response, close: !http.requestDone || http.closeAfter)
        continueWithBufferedRequests()
    }

    // MARK: finishing

    /// Writes a gateway-made response and finishes the exchange.
    func respondLocal(_ response: LocalResponse, close closeConnection: Bool) {
        // HEAD: the answer has no content (RFC 9110 9.3.2); a body would be read as the next response's start.
        var response = response; response.headOnly = exchange.head?.methodIs("HEAD") ?? false
        // A gRPC call's answer is trailers-only; never a forward-auth or registration answer: a proxy asking
        // forward-auth reads the HTTP status (a 200 carrying grpc-status 16 would read as "allow").
        response.grpc = (exchange.head?.grpc ?? false) && exchange.forwardAuth == nil && exchange.registration == nil
        if exchange.head == nil {
            // A request that did not parse still gets a line in the access log, with an id of its own.
            exchange.startMicros = MonotonicClock.nowMicros()
            if exchange.requestID == nil { generateRequestID() }
        }
        exchange.outMark = sink.bytesOut
        let close = closeConnection || http.closeAfter || (exchange.head.map { !$0.keepAlive } ?? true) || worker.draining
        if close { http.closeAfterResponse() }
        exchange.status = response.status
        sink.sendLocal(response, request: exchange.head, close: close, date: worker.httpDate.value(at: worker.unixNow()))
        finishExchange()
    }

    /// Logs the exchange, then closes or gets ready for the next request (which may already be buffered).
    private func finishExchange() {
        logExchange(status: exchange.status)
        if worker.draining { http.closeAfterResponse() }
        switch http.exchangeEnded(buffered: carrier.hasBufferedInput) {
        case .close:
            flushOut()
            if !closed { arm(.idle) }   // the client has idle_timeout to take the rest
        case .nextRequest(let next):
            flushOut()
            if closed { return }
            exchange = ExchangeState()
            arm(next)
        }
    }

    func logExchange(status: Int) {
        exchange.logged = true
        let metrics = worker.metrics
        // Registration endpoints and forward-auth calls that matched no route are labelled as what they are, not
        // mixed into route "-" with the 404s.
        let routeMetric = exchange.routeIndex >= 0 ? gen.routes[exchange.routeIndex].metricID
            : exchange.registration != nil ? Self.registrationMetric
            : exchange.forwardAuth != nil ? Self.forwardAuthMetric : Self.noRouteMetric
        metrics.request(route: routeMetric, status: status)
        metrics.requestDone(route: routeMetric, micros: MonotonicClock.nowMicros() &- exchange.startMicros)
        if exchange.verdict != .none {
            let outcome: VerificationKey.Outcome = switch exchange.verdict {
            case .verified: .verified
            case .absent: .absent
            default: .failed
            }
            metrics.verification(VerificationKey.make(
                route: routeMetric, verifier: exchange.verifierMetric >= 0 ? exchange.verifierMetric : Self.noRouteMetric, outcome: outcome,
                reason: exchange.reason?.metricIndex ?? 0xFF))
            if outcome == .verified, let app = exchange.appID { metrics.verifiedApp(route: routeMetric, appID: app) }
        }
        let log = worker.accessLog
        guard log.enabled else { return }
        let routeName: [UInt8] = exchange.routeIndex >= 0 ? gen.routes[exchange.routeIndex].jsonName : Array("null".utf8)
        let bytesOut = sink.bytesOut - exchange.outMark + exchange.extraBytesOut
        let verdict = exchange.verdict.text
        if let original = exchange.forwardAuth {   // forward-auth: the original request's line, not the call's
            logForwardAuthCheck(original, log: log, route: routeName, status: status, bytesOut: bytesOut, verdict: verdict)
            return
        }
        withRequestID { id in
            if let head = exchange.head {
                // The path as routed (canonical), so the log says what was judged and forwarded.
                let forwarded = trustedPeer ? rateLimitAddress(head) : nil
                // On routes the name was kept with the decision; registrations (rare) look theirs up.
                let verifier = exchange.verifierName ?? (exchange.verifierMetric >= 0 ? MetricNames.shared.name(exchange.verifierMetric) : nil)
                head.bytes.withUnsafeBytes { raw in
                    clientAddress.withUnsafeBytes { address in
                        (forwarded ?? []).withUnsafeBytes { forwardedFor in
                            let client = AccessLog.Client(
                                address: address, forwardedFor: forwarded == nil ? nil : forwardedFor,
                                host: head.host.map { UnsafeRawBufferPointer(rebasing: raw[$0]) },
                                userAgent: head.firstValue(named: "user-agent").map { UnsafeRawBufferPointer(rebasing: raw[$0]) },
                                verifier: verifier, appID: exchange.appID)
                            Self.withRoutingPath(canonical: exchange.canonicalTarget, head, raw) { path in
                                log.record(time: exchange.startMicros, route: routeName,
                                           method: UnsafeRawBufferPointer(rebasing: raw[head.method]),
                                           path: path,
                                           status: status, upstreamStatus: exchange.upstreamStatus, bytesIn: exchange.bytesIn,
                                           bytesOut: bytesOut, verdict: verdict, reason: exchange.reason?.code, requestID: id,
                                           protocol: http2 ? "HTTP/2" : head.version == .http10 ? "HTTP/1.0" : "HTTP/1.1",
                                           client: client,
                                           upstream: exchange.upstreamAddress.map { AccessLog.Upstream(address: $0, micros: exchange.upstreamMicros) })
                            }
                        }
                    }
                }
            } else {
                let dash: StaticString = "-"
                clientAddress.withUnsafeBytes { address in
                    log.record(time: exchange.startMicros, route: routeName,
                               method: UnsafeRawBufferPointer(start: dash.utf8Start, count: 1),
                               path: UnsafeRawBufferPointer(start: dash.utf8Start, count: 1),
                               status: status, upstreamStatus: 0, bytesIn: exchange.bytesIn, bytesOut: bytesOut, verdict: verdict,
                               reason: nil, requestID: id, client: AccessLog.Client(address: address))
                }
            }
        }
    }
}
