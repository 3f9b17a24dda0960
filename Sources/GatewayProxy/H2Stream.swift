import GatewayCore
import GatewayPosix
import HTTP1
import HTTP2

/// One HTTP/2 stream and the `ExchangeCarrier` of its own `ProxyExchange`: the request handed over as an
/// `HTTP1RequestHead` (the parser's checks, no HTTP/1.1 text) and raw body bytes, the response taken as typed parts
/// (`ResponseSink`): the head submitted to nghttp2, the body queued for nghttp2 to pull. Loop-confined.
final class H2Stream: ResponseSink, ExchangeCarrier {
    let id: Int32
    unowned(unsafe) let mux: H2Mux
    /// The stream's exchange (nil once it is finished; the stream may still be sending the body's tail).
    var exchange: ProxyExchange?
    /// nghttp2 closed the stream (done, or reset by the client).
    var sessionClosed = false
    /// The response is complete but the request body is not: it is dropped until then (0: not discarding).
    var discardUntil: UInt64 = 0

    /// END_STREAM arrived: the request body is complete once its connection has taken what is buffered.
    private(set) var requestEnded: Bool
    /// Request-body bytes handed to the exchange and not yet given back to the client's window.
    private var unacknowledged = 0
    /// Request-body bytes the exchange has not taken yet.
    private let input = ByteBuffer(capacity: 0)

    /// The response body nghttp2 pulls (its end, its trailers).
    private var body = H2OutgoingBody()
    private var headSubmitted = false
    /// The head was submitted with a body provider (trailers can follow only then).
    private var hasBodyProvider = false
    /// The request's trailers, handed on with the body's end.
    private var requestTrailers: H2Fields? = nil
    var responseEnded: Bool { body.ended }
    private var failed = false
    /// nghttp2 took the last queued body bytes: the connection may resume its upstream.
    private(set) var wantsDrainNotice = false
    private(set) var bytesOut = 0

    init(id: Int32, mux: H2Mux, requestEnded: Bool) {
        self.id = id
        self.mux = mux
        self.requestEnded = requestEnded
    }

    /// Response bytes not yet taken by nghttp2 (the exchange's backpressure counts them).
    var pendingOutput: Int { body.bytes.readableBytes }
    /// nghttp2 pulls the body itself: nothing waits for a flush.
    var unflushedOutput: Int { 0 }
    var hasBufferedInput: Bool { !input.isEmpty }

    // MARK: the request

    /// The stream's head as the exchange reads it, with the HTTP/1.1 parser's checks and `limits`.
    static func requestHead(_ head: H2RequestHead, endStream: Bool,
                            limits: HTTP1Limits) -> Result<HTTP1RequestHead, HTTP1ParseError> {
        HTTP1RequestHead.assemble(bytes: head.bytes, method: head.method, target: head.path, authority: head.authority,
                                  fields: head.fields, hasBody: !endStream, limits: limits)
    }

    /// Serves the stream's request (its head as the HTTP/1.1 checks read it; `headBytes`: its size on the wire).
    func start(_ head: Result<HTTP1RequestHead, HTTP1ParseError>, headBytes: Int) {
        guard let e = exchange else { return }
        e.arm(.header)
        _ = e.http.headBytesArrived()
        switch head {
        case .success(let head):
            e.exchange.bytesIn = headBytes
            e.beginRequest(head)
            if !e.closed { resumeInput() }
        case .failure(let error):
            e.respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
        }
    }

    func requestData(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        unacknowledged += bytes.count
        input.append(bytes)
    }

    func requestEnd() { requestEnded = true }

    func requestTrailers(_ t: H2Fields) { requestTrailers = t }

    /// Hands the exchange the body as it arrived (nghttp2 checked it against its `content-length`); what it takes
    /// opens the client's window again.
    func resumeInput() {
        guard let e = exchange else { return }
        while !e.closed && e.http.takesBody {
            if input.isEmpty {
                guard requestEnded else {
                    e.exchange.upstream?.flush()
                    break
                }
                if let t = requestTrailers {
                    requestTrailers = nil
                    e.forwardTrailers(t)
                }
                if e.requestBodyEnded() { continue }
                break
            }
            let n = input.readableBytes
            e.forwardBody(input.readable)
            input.consume(n)
            e.exchange.bytesIn += n
        }
        if !e.closed { acknowledge(remaining: input.readableBytes) }
    }

    /// The body bytes the exchange took open the client's window again.
    private func acknowledge(remaining: Int) {
        let taken = unacknowledged - min(unacknowledged, remaining)
        guard taken > 0 else { return }
        unacknowledged -= taken
        mux.session.consume(stream: id, taken)
        mux.requestFlush()
    }

    // MARK: the response (ResponseSink)

    /// Interim responses are not relayed over h2.
    func sendInterim(_ response: HTTP1ResponseHead, request: HTTP1RequestHead) {}

    /// HTTP/2 has no 100-continue here: `expect` is not taken from the stream's head.
    func sendContinue(request: HTTP1RequestHead) -> Bool { false }

    /// `closeAfter` is the HTTP/1.1 connection's matter: a stream ends with its response either way.
    func sendHead(_ response: HTTP1ResponseHead, request: HTTP1RequestHead, closeAfter: inout Bool) {
        // Names lower-cased into one buffer, values beside them; framing and connection-specific fields left out.
        var list = FieldList(capacity: response.bytes.count, count: response.fields.count)
        HeaderFilter.forEachClientResponseField(response, keepFraming: false) { name, value in list.add(name, value) }
        let hasBody: Bool
        switch response.framing {
        case .none, .contentLength(0): hasBody = false
        default: hasBody = true
        }
        submit(status: response.status, list, hasBody: hasBody)
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer) {
        guard !failed, !bytes.isEmpty else { return }
        body.bytes.append(bytes)
        bytesOut += bytes.count
        wake()
    }

    /// Trailers end the stream after the body (a gRPC status); a response sent without a body has none to follow.
    func sendTrailers(_ trailers: ResponseTrailers) {
        guard !failed, hasBodyProvider else { return }
        body.setTrailers(trailers)
        if let kept = body.trailers { for f in kept.fields { bytesOut += f.name.count + f.value.count + 32 } }
    }

    func sendEnd() {
        body.ended = true
        wake()
    }

    func sendLocal(_ response: LocalResponse, request: HTTP1RequestHead?, close: Bool, date: [UInt8]) {
        let text = response.body
        let fields = response.fields(date: date, bodyLength: text.utf8.count)
        var list = FieldList(capacity: 256, count: fields.count)
        for f in fields {
            var name = f.name, value = f.value
            name.withUTF8 { n in value.withUTF8 { v in list.add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
        }
        let hasBody = !response.headOnly && !text.isEmpty
        submit(status: response.wireStatus, list, hasBody: hasBody)
        if hasBody && !failed {
            body.bytes.append(text)
            bytesOut += text.utf8.count
        }
        sendEnd()
    }

    private func submit(status: Int, _ list: FieldList, hasBody: Bool) {
        guard !failed else { return }
        headSubmitted = true
        hasBodyProvider = hasBody
        bytesOut += list.size
        if !mux.session.submitResponse(stream: id, status: status, bytes: list.bytes, fields: list.fields, hasBody: hasBody) {
            fail()
        }
    }

    /// nghttp2 may pull again: more body or its end is there. The frames go out when the exchange flushes
    /// (`flush`), never from inside a send: the stream may close then, and the exchange must have logged first.
    private func wake() {
        if body.wake() {
            mux.session.resumeData(stream: id)
        }
    }

    /// The exchange has written: let nghttp2 pull the frames.
    func flushOut() {
        mux.requestFlush()
        if let e = exchange, !e.closed { e.outputMoved(pending: pendingOutput) }
    }

    func deadlineChanged(_ d: UInt64) {
        guard d != 0 else { return }
        mux.worker.loop.scheduleSweep(by: d)
        mux.owner.streamDeadline(d)
    }

    /// The response is out: the exchange is over (nghttp2 ends the stream once it has sent the rest).
    func closingOutputDrained() { exchange?.close() }

    /// HTTP/2 has no WebSocket handshake of RFC 6455's form (extended CONNECT, RFC 8441, is not offered).
    func switchProtocols(_ response: HTTP1ResponseHead, upstream: UpstreamConnection, route: CompiledRoute) -> Bool { false }

    /// nghttp2 asks for body bytes.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        wantsDrainNotice = false
        if failed { return .failed }
        let (read, taken) = body.read(into: buffer)
        if taken > 0 && body.bytes.isEmpty { wantsDrainNotice = exchange != nil }
        if body.ended && body.bytes.isEmpty && !requestEnded && discardUntil == 0 {
            // The answer came before the whole request (a 413, a rejection). Like the HTTP/1.1 linger: take in
            // and drop the rest of the body for a while (windows keep opening), so that clients that treat
            // RST_STREAM(NO_ERROR) during their upload as a failure (curl 7.88) still see the answer; a client
            // that has not finished by then gets RST_STREAM(NO_ERROR).
            discardUntil = mux.worker.loop.now + mux.worker.lingerMillis
            mux.owner.streamDeadline(discardUntil)
        }
        return read
    }

    /// After `send`: the queue emptied, so the exchange's backpressure may lift.
    func bodyTaken() {
        guard let e = exchange, !e.closed else { return }
        flushOut()
    }

    /// The response cannot be completed: reset the stream (the client sees an error, not a short body).
    private func fail() {
        failed = true
        body.bytes.clear()
        if !sessionClosed { mux.session.reset(stream: id, code: .internalError) }
        mux.requestFlush()
        exchange?.close()
    }

    /// The stream's exchange closed: give back the window of what it never read; reset an unfinished response.
    func exchangeClosed() {
        exchange = nil
        if unacknowledged > 0 {
            mux.session.consume(stream: id, unacknowledged)
            unacknowledged = 0
        }
        if !responseEnded && !failed && !sessionClosed {
            failed = true
            mux.session.reset(stream: id, code: headSubmitted ? .internalError : .cancel)
        }
        mux.requestFlush()
    }
}

/// A response's fields for nghttp2: names lower-cased and values back to back in one buffer.
private struct FieldList {
    private var block = H2Fields()
    /// The RFC 9113 size of the list (name + value + 32 per field), for bytes_out.
    var size = 0

    var bytes: [UInt8] { block.bytes }
    var fields: [(name: Range<Int>, value: Range<Int>)] { block.fields }

    init(capacity: Int, count: Int) {
        block.bytes.reserveCapacity(capacity)
        block.fields.reserveCapacity(count)
    }

    mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        block.addLowercased(name, value)
        size += name.count + value.count + 32
    }
}
