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
            switch http.phase {
            case .awaitingHead:
                if inBuf.isEmpty { return }
                if !http.sawRequestBytes && stream == nil {
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
                if let d = http.headBytesArrived() { arm(d) }
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
            case .exchanging:
                guard http.takesBody else { return }
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
                    if http.parseError() == .cut {
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
        while !closed && http.takesBody {
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
        http.bodyEnded()
        if exchange.heldBody != nil && exchange.upstream == nil {
            heldBodyComplete()
            return true
        }
        exchange.upstream?.sendBodyEnd(chunked: exchange.requestChunked)
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
        http.headReceived(keepAlive: head.keepAlive, hasBody: hasBody)
        if !hasBody && stream == nil {
            // A body-less request is complete with its head: take the parser's end event now.
            if case .end = parser.next(UnsafeRawBufferPointer(start: nil, count: 0)) {}
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
}
