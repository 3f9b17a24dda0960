import GatewayCore
import GatewayPosix
import HTTP1

extension DownstreamConnection {
    /// Feeds buffered input to the parser, and what it parses to the exchange, until it needs more, the exchange
    /// waits (on the upstream, off-loop work, a slow upstream write), or the connection is closing.
    func process() {
        if let mux {
            mux.input(inBuf)
            return
        }
        let proxy = proxy
        while !closed {
            switch proxy.http.phase {
            case .awaitingHead:
                if inBuf.isEmpty { return }
                if !proxy.http.sawRequestBytes {
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
                if let d = proxy.http.headBytesArrived() { proxy.arm(d) }
                switch parser.next(inBuf.readable) {
                case .needMore(let consumed):
                    inBuf.consume(consumed)
                    return
                case .head(let head, let consumed):
                    inBuf.consume(consumed)
                    proxy.exchange.bytesIn = consumed
                    if head.framing == .none {
                        // A body-less request is complete with its head: take the parser's end event now.
                        if case .end = parser.next(UnsafeRawBufferPointer(start: nil, count: 0)) {}
                    }
                    proxy.beginRequest(head)
                case .error(let error):
                    proxy.respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
                    return
                case .end(let consumed):
                    inBuf.consume(consumed)   // defensive: a body-less request's end is taken with its head
                case .body:
                    return
                }
            case .exchanging:
                guard proxy.http.takesBody else { return }
                switch parser.next(inBuf.readable) {
                case .needMore(let consumed):
                    inBuf.consume(consumed)
                    proxy.exchange.bytesIn += consumed
                    proxy.exchange.upstream?.flush()
                    return
                case .body(let range, let consumed):
                    proxy.forwardBody(UnsafeRawBufferPointer(rebasing: inBuf.readable[range]))
                    inBuf.consume(consumed)
                    proxy.exchange.bytesIn += consumed
                case .end(let consumed):
                    inBuf.consume(consumed)
                    proxy.exchange.bytesIn += consumed
                    let trailers = parser.takeTrailers()
                    if !trailers.isEmpty { proxy.forwardTrailers(UpstreamConnection.trailerFields(trailers)) }
                    if proxy.requestBodyEnded() { continue }
                    return
                case .error(let error):
                    if proxy.http.parseError() == .cut {
                        close()
                    } else {
                        proxy.abortUpstream()
                        proxy.respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
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
}
