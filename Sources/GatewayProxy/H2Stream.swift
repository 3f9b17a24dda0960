import GatewayCore
import GatewayPosix
import HTTP1
import HTTP2

/// One HTTP/2 stream: its request handed to its `DownstreamConnection` as an `HTTP1RequestHead` and raw body
/// bytes, and that connection's response taken as typed parts (`ResponseSink`): the head submitted to nghttp2, the
/// body queued for nghttp2 to pull. Loop-confined.
final class H2Stream: ResponseSink {
    let id: Int32
    unowned(unsafe) let mux: H2Mux
    /// The stream's exchange (nil once it is finished; the stream may still be sending the body's tail).
    var connection: DownstreamConnection?
    /// nghttp2 closed the stream (done, or reset by the client).
    var sessionClosed = false
    /// The response is complete but the request body is not: it is dropped until then (0: not discarding).
    var discardUntil: UInt64 = 0

    /// END_STREAM arrived: the request body is complete once its connection has taken what is buffered.
    private(set) var requestEnded: Bool
    /// Request-body bytes handed to the connection and not yet given back to the client's window.
    private var unacknowledged = 0

    private let body = ByteBuffer(capacity: 0)
    private var headSubmitted = false
    private(set) var responseEnded = false
    private var deferred = false
    private var failed = false
    /// nghttp2 took the last queued body bytes: the connection may resume its upstream.
    private(set) var wantsDrainNotice = false
    private(set) var bytesOut = 0

    init(id: Int32, mux: H2Mux, requestEnded: Bool) {
        self.id = id
        self.mux = mux
        self.requestEnded = requestEnded
    }

    /// Response bytes not yet taken by nghttp2 (the connection's backpressure counts them).
    var queuedBytes: Int { body.readableBytes }

    // MARK: the request

    /// The stream's head as the exchange reads it, with the HTTP/1.1 parser's checks and `limits`.
    static func requestHead(_ head: H2RequestHead, endStream: Bool,
                            limits: HTTP1Limits) -> Result<HTTP1RequestHead, HTTP1ParseError> {
        HTTP1RequestHead.assemble(bytes: head.bytes, method: head.method, target: head.path, authority: head.authority,
                                  fields: head.fields, hasBody: !endStream, limits: limits)
    }

    func requestData(_ bytes: UnsafeRawBufferPointer, into out: ByteBuffer) {
        guard !bytes.isEmpty else { return }
        unacknowledged += bytes.count
        out.append(bytes)
    }

    func requestEnd() { requestEnded = true }

    /// After the connection read its input: the body bytes it took on open the client's window again.
    func acknowledge(remaining: Int) {
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
        body.append(bytes)
        bytesOut += bytes.count
        wake()
    }

    func sendEnd() {
        responseEnded = true
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
        submit(status: response.status, list, hasBody: hasBody)
        if hasBody && !failed {
            body.append(text)
            bytesOut += text.utf8.count
        }
        sendEnd()
    }

    private func submit(status: Int, _ list: FieldList, hasBody: Bool) {
        guard !failed else { return }
        headSubmitted = true
        bytesOut += list.size
        if !mux.session.submitResponse(stream: id, status: status, bytes: list.bytes, fields: list.fields, hasBody: hasBody) {
            fail()
        }
    }

    /// nghttp2 may pull again: more body or its end is there. The frames go out when the exchange flushes
    /// (`flush`), never from inside a send: the stream may close then, and the exchange must have logged first.
    private func wake() {
        if deferred && (!body.isEmpty || responseEnded) {
            deferred = false
            mux.session.resumeData(stream: id)
        }
    }

    /// The exchange has written: let nghttp2 pull the frames.
    func flush() { mux.requestFlush() }

    /// nghttp2 asks for body bytes.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        wantsDrainNotice = false
        if failed { return .failed }
        let n = min(buffer.count, body.readableBytes)
        if n > 0 {
            buffer.baseAddress!.copyMemory(from: body.readable.baseAddress!, byteCount: n)
            body.consume(n)
            if body.isEmpty { body.clear(); wantsDrainNotice = connection != nil }
        }
        if body.isEmpty && responseEnded {
            if !requestEnded && discardUntil == 0 {
                // The answer came before the whole request (a 413, a rejection). Like the HTTP/1.1 linger: take in
                // and drop the rest of the body for a while (windows keep opening), so that clients that treat
                // RST_STREAM(NO_ERROR) during their upload as a failure (curl 7.88) still see the answer; a client
                // that has not finished by then gets RST_STREAM(NO_ERROR).
                discardUntil = mux.worker.loop.now + mux.worker.lingerMillis
                mux.owner.streamDeadline(discardUntil)
            }
            return .bytes(n, end: true)
        }
        if n == 0 {
            deferred = true
            return .deferred
        }
        return .bytes(n, end: false)
    }

    /// After `send`: the queue emptied, so the connection's backpressure may lift.
    func bodyTaken() {
        guard let c = connection, !c.closed else { return }
        c.flushOut()
    }

    /// The response cannot be completed: reset the stream (the client sees an error, not a short body).
    private func fail() {
        failed = true
        body.clear()
        if !sessionClosed { mux.session.reset(stream: id, code: .internalError) }
        mux.requestFlush()
        connection?.close()
    }

    /// The stream's connection closed: give back the window of what it never read; reset an unfinished response.
    func connectionClosed() {
        connection = nil
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
    var bytes: [UInt8] = []
    var fields: [(name: Range<Int>, value: Range<Int>)] = []
    /// The RFC 9113 size of the list (name + value + 32 per field), for bytes_out.
    var size = 0

    init(capacity: Int, count: Int) {
        bytes.reserveCapacity(capacity)
        fields.reserveCapacity(count)
    }

    mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let n = bytes.count..<(bytes.count + name.count)
        for c in name { bytes.append(c >= 65 && c <= 90 ? c | 0x20 : c) }
        bytes.append(contentsOf: value)
        fields.append((n, n.upperBound..<bytes.count))
        size += name.count + value.count + 32
    }
}
