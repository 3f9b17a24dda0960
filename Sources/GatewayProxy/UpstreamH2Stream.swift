import GatewayCore
import GatewayPosix
import HTTP1
import HTTP2

/// One exchange's request as a stream of an `UpstreamH2Connection`: the filtered HTTP/1.1 head (`HeaderFilter`)
/// becomes the stream's header block, the body is queued for nghttp2 to pull (flow control decides when it goes),
/// and the response comes back to the exchange as the same typed parts an HTTP/1.1 upstream gives: a head, body
/// bytes (their window reopened only as the client takes them), trailers, the end. Loop-confined.
final class UpstreamH2Stream: UpstreamLeg {
    /// Strong: a stream whose request was never submitted is in no `streams` table, and may outlive its connection's
    /// place in the pool. Another one when the request moves (`moveAfterRefusal`).
    private(set) var connection: UpstreamH2Connection
    private(set) var client: (any UpstreamClient)?
    /// The stream id, once the request was submitted.
    private(set) var id: Int32? = nil
    /// The limit on the upstream's silence: response_timeout, or stream_idle_timeout for a gRPC call.
    let silenceMillis: UInt64
    private let isHEAD: Bool
    /// The client's TE named trailers: `te: trailers` goes upstream (gRPC servers require it).
    private let teTrailers: Bool
    /// HTTP/2 carries no RFC 6455 handshake (configuration refuses websocket routes on HTTP/2 upstreams).
    var expectsUpgrade = false
    private(set) var deadline: UInt64 = 0

    /// The request body nghttp2 pulls (its end, its trailers).
    private var body = H2OutgoingBody()
    /// nghttp2 took request bytes: the exchange may read more of the client's body (after `send`).
    private(set) var wantsDrainNotice = false
    private var finalHead = false
    /// The client is slow: response bytes are not acknowledged (the server's window closes) until it catches up.
    private var paused = false
    private var unacknowledged = 0
    /// The stream is over for the exchange (complete, failed or given up).
    private var finished = false
    /// nghttp2 closed the stream.
    private var closedOnWire = false
    /// The exchange's outcome is still to be reported to the cluster.
    var outcomePending = false
    /// A request nghttp2 refused to submit: the exchange hears it at its next flush.
    private var submitFailed = false

    /// The request as submitted, kept while it may be sent again elsewhere: until the server answers anything,
    /// while the body bytes nghttp2 took fit `replayLimit` (`replay`), at most `maxMoves` times.
    private var submitted: (fields: H2Fields, hasBody: Bool)? = nil
    private var replay = ByteBuffer(capacity: 0)
    private var replayTrailers: H2Fields? = nil
    private var moves = 0
    static let replayLimit = 64 * 1024
    static let maxMoves = 2

    init(connection: UpstreamH2Connection, client: any UpstreamClient, silenceMillis: UInt64, isHEAD: Bool,
         teTrailers: Bool) {
        self.connection = connection
        self.client = client
        self.silenceMillis = silenceMillis
        self.isHEAD = isHEAD
        self.teTrailers = teTrailers
        touch()
    }

    var target: UpstreamTarget { connection.pool.target }
    var peerLabel: String { connection.peerLabel }
    var unsentRequestBytes: Int { body.bytes.readableBytes }

    /// Activity: the silence limit starts again.
    private func touch() {
        deadline = connection.pool.worker.loop.now + silenceMillis
        connection.streamDeadline(deadline)
    }

    // MARK: the request (UpstreamLeg)

    func sendHead(_ write: (ByteBuffer) -> Void) {
        let scratch = ByteBuffer(capacity: 1024)
        write(scratch)
        guard let (fields, hasBody) = Self.headerBlock(scratch.readable, scheme: target.tls != nil, teTrailers: teTrailers,
                                                        defaultAuthority: target.serverName),
              let id = connection.session.submitRequest(fields, hasBody: hasBody) else {
            submitFailed = true
            return
        }
        self.id = id
        submitted = (fields, hasBody)
        if !hasBody { body.ended = true }
        connection.registered(self, id: id)
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool) {
        guard !finished, !bytes.isEmpty else { return }
        body.bytes.append(bytes)
        wake()
    }

    func sendTrailers(_ trailers: ResponseTrailers) { body.setTrailers(trailers) }

    func sendBodyEnd(chunked: Bool) {
        body.ended = true
        wake()
        flush()
    }

    func flush() {
        if submitFailed && !finished {
            fail(.connectFailed)
            return
        }
        connection.flush()
    }

    private func wake() {
        if let id, !closedOnWire, body.wake() {
            connection.session.resumeData(stream: id)
        }
    }

    /// nghttp2 asks for request-body bytes.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        let (read, taken) = body.read(into: buffer)
        wantsDrainNotice = taken > 0 && client != nil
        if submitted != nil {
            // Kept for a move: what went out must go out again.
            if replay.readableBytes + taken > Self.replayLimit {
                forgetRequest()
            } else {
                if taken > 0 { replay.append(UnsafeRawBufferPointer(rebasing: buffer[0..<taken])) }
                if case .trailers(_, let t) = read { replayTrailers = t }
            }
        }
        return read
    }

    /// The server answered (or the request grew too large to keep): it is never sent again.
    private func forgetRequest() {
        guard submitted != nil else { return }
        submitted = nil
        replay = ByteBuffer(capacity: 0)
        replayTrailers = nil
    }

    /// After `send`: the body queue went down, so the client's body may flow again.
    func bodyTaken() {
        guard let c = client else { return }
        touch()
        if body.bytes.readableBytes < connection.pool.worker.highWater { c.upstreamCanTakeMore() }
    }

    // MARK: the response

    func responseHeaders(_ block: H2ResponseHead, endStream: Bool) {
        guard let c = client else { return }
        forgetRequest()
        touch()
        if finalHead {
            if !block.fields.isEmpty { c.upstreamResponseTrailers(H2Fields(bytes: block.bytes, fields: block.fields)) }
            if endStream { complete() }
            return
        }
        guard !block.malformed, block.status >= 100, block.status != 101,
              let head = HTTP1ResponseHead.fromHTTP2(bytes: block.bytes, status: block.status, fields: block.fields,
                                                     endStream: endStream, toHEAD: isHEAD) else {
            fail(.invalidResponse)
            return
        }
        if head.status < 200 {
            c.upstreamResponseHead(head)   // interim: the sink decides whether the client sees it
            return
        }
        finalHead = true
        reportOutcome(failed: head.status >= 500)
        c.upstreamResponseHead(head)
        if endStream { complete() }
    }

    func responseData(_ bytes: UnsafeRawBufferPointer) {
        guard let c = client, let id else {
            if let id { connection.session.consume(stream: id, bytes.count) }
            return
        }
        touch()
        guard finalHead else {
            fail(.invalidResponse)   // DATA before a final head
            return
        }
        let pause = c.upstreamResponseBody(bytes)
        if pause && client != nil {
            // Only this stream's window stays closed; the connection's is shared with the other streams.
            paused = true
            unacknowledged += bytes.count
            connection.session.consumeConnection(bytes.count)
        } else {
            connection.session.consume(stream: id, bytes.count)
        }
        connection.readEnded(self)
    }

    /// The connection's read is over: what it brought is relayed now.
    func readEnded() { client?.upstreamReadEnded() }

    func responseEnded() {
        guard client != nil else { return }
        guard finalHead else {
            fail(.invalidResponse)
            return
        }
        complete()
    }

    /// Response bytes held back from a slow client go back to the windows when the stream ends, however it ends:
    /// otherwise the shared connection's window shrinks for good.
    private func giveBackWindow() {
        guard unacknowledged > 0, let id else { return }
        connection.session.consumeStream(id, unacknowledged)
        unacknowledged = 0
        paused = false
    }

    private func complete() {
        giveBackWindow()
        guard let c = client else { return }
        client = nil
        finished = true
        deadline = 0
        c.upstreamResponseEnd(from: self, reusable: true)
    }

    func resumeReading() {
        guard paused, let id else { return }
        paused = false
        connection.session.consumeStream(id, unacknowledged)
        unacknowledged = 0
        connection.flush()
    }

    // MARK: ending

    /// The response is complete; a request still being sent ends with RST_STREAM(NO_ERROR) (RFC 9113 8.1).
    func release(reusable: Bool) {
        reportOutcome(failed: false)
        giveBackWindow()
        finished = true
        client = nil
        if let id, !closedOnWire, !(body.ended && body.bytes.isEmpty) {
            connection.session.reset(stream: id, code: .noError)
        }
        connection.streamFinished(self)
        connection.flush()
    }

    private func reportOutcome(failed: Bool) {
        guard outcomePending else { return }
        outcomePending = false
        connection.pool.report(endpoint: connection.endpoint, failed: failed)
    }

    func abort() {
        reportOutcome(failed: false)
        giveBackWindow()
        guard !finished else { return }
        finished = true
        client = nil
        deadline = 0
        if let id, !closedOnWire { connection.session.reset(stream: id, code: .cancel) }
        connection.streamFinished(self)
        connection.flush()
    }

    /// nghttp2 closed the stream; before the response was complete that is a failure (a reset by the server),
    /// unless the server did nothing with it: REFUSED_STREAM, or beyond a GOAWAY's last stream id (nghttp2 closes
    /// those with REFUSED_STREAM too; RFC 9113 8.7) — then the request goes again on another connection.
    func streamClosed(errorCode: UInt32) {
        closedOnWire = true
        guard client != nil else { return }
        if errorCode == H2ErrorCode.refusedStream.rawValue && moveAfterRefusal() { return }
        fail(.closed)
    }

    /// Submits the kept request (head, the body bytes already taken and the rest, trailers) on another connection
    /// of the pool. False when it cannot be: nothing kept, moved too often, no connection.
    private func moveAfterRefusal() -> Bool {
        guard let (fields, hasBody) = submitted, moves < Self.maxMoves,
              let next = connection.pool.sessionForMove(from: connection) else { return false }
        moves += 1
        let old = connection
        var again = H2OutgoingBody()
        again.bytes.append(replay.readable)
        again.bytes.append(body.bytes.readable)
        again.ended = body.ended
        if let t = replayTrailers ?? body.trailers { again.setTrailers(t) }
        body = again
        replay = ByteBuffer(capacity: 0)
        replayTrailers = nil
        if outcomePending { connection.pool.abandon(endpoint: old.endpoint) }   // the new one was counted by its pick
        connection = next
        closedOnWire = false
        guard let id = next.session.submitRequest(fields, hasBody: hasBody) else {
            self.id = nil
            return false
        }
        self.id = id
        next.registered(self, id: id)
        touch()
        next.flush()
        return true
    }

    func connectionFailed(_ failure: UpstreamFailure) {
        closedOnWire = true
        fail(failure)
    }

    func timedOut() { fail(client != nil && !finalHead ? .responseTimeout : .closed) }

    private func fail(_ failure: UpstreamFailure) {
        reportOutcome(failed: true)
        giveBackWindow()
        let c = client
        client = nil
        if !finished {
            finished = true
            deadline = 0
            if let id, !closedOnWire { connection.session.reset(stream: id, code: .cancel) }
            connection.streamFinished(self)
        }
        c?.upstreamFailed(failure)
    }

    // MARK: the header block

    /// The HTTP/1.1 head `HeaderFilter` wrote, as an HTTP/2 request's header block: the request line's method and
    /// target as `:method` and `:path`, Host as `:authority`, names lower-cased, connection-specific fields (and
    /// Transfer-Encoding: HTTP/2 frames the body itself) left out, `te: trailers` when the client takes trailers.
    /// Also whether a body follows (Content-Length above 0, or chunked).
    static func headerBlock(_ text: UnsafeRawBufferPointer, scheme https: Bool, teTrailers: Bool,
                            defaultAuthority: String) -> (H2Fields, Bool)? {
        var lines: [Range<Int>] = []
        var start = 0
        var i = 0
        while i + 1 < text.count {
            if text[i] == 13 && text[i + 1] == 10 {
                if i == start { break }   // the empty line
                lines.append(start..<i)
                start = i + 2
                i += 2
                continue
            }
            i += 1
        }
        guard let requestLine = lines.first else { return nil }
        let parts = text[requestLine].split(separator: 32, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var block = H2Fields()
        var rest = H2Fields()
        var authority: Range<Int>? = nil
        var hasBody = false
        for line in lines.dropFirst() {
            guard let colon = text[line].firstIndex(of: UInt8(ascii: ":")) else { return nil }
            let name = UnsafeRawBufferPointer(rebasing: text[line.lowerBound..<colon])
            var v = colon + 1
            while v < line.upperBound && (text[v] == 32 || text[v] == 9) { v += 1 }
            let value = UnsafeRawBufferPointer(rebasing: text[v..<line.upperBound])
            switch name.count {
            case 2 where HeaderFilter.eq(name, "te"): continue
            case 4 where HeaderFilter.eq(name, "host"):
                if authority == nil { authority = v..<line.upperBound }
                continue
            case 7 where HeaderFilter.eq(name, "upgrade"): continue
            case 10 where HeaderFilter.eq(name, "connection"), 10 where HeaderFilter.eq(name, "keep-alive"): continue
            case 16 where HeaderFilter.eq(name, "proxy-connection"): continue
            case 17 where HeaderFilter.eq(name, "transfer-encoding"):
                hasBody = true
                continue
            case 14 where HeaderFilter.eq(name, "content-length"):
                if !(value.count == 1 && value[0] == UInt8(ascii: "0")) { hasBody = true }
            default: break
            }
            rest.addLowercased(name, value)
        }
        func pseudo(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
            block.add(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value)
        }
        pseudo(":method", UnsafeRawBufferPointer(rebasing: parts[0]))
        let schemeName: StaticString = https ? "https" : "http"
        pseudo(":scheme", UnsafeRawBufferPointer(start: schemeName.utf8Start, count: schemeName.utf8CodeUnitCount))
        if let authority {
            pseudo(":authority", UnsafeRawBufferPointer(rebasing: text[authority]))
        } else {
            var name = defaultAuthority
            name.withUTF8 { pseudo(":authority", UnsafeRawBufferPointer($0)) }
        }
        pseudo(":path", UnsafeRawBufferPointer(rebasing: parts[1]))
        if teTrailers {
            let te: StaticString = "te", trailers: StaticString = "trailers"
            pseudo(te, UnsafeRawBufferPointer(start: trailers.utf8Start, count: trailers.utf8CodeUnitCount))
        }
        rest.bytes.withUnsafeBytes { p in
            for f in rest.fields {
                block.add(UnsafeRawBufferPointer(rebasing: p[f.name]), UnsafeRawBufferPointer(rebasing: p[f.value]))
            }
        }
        return (block, hasBody)
    }
}
