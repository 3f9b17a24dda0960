#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import HTTP1
import HTTP2
import Observability
import GatewayPosix

/// HTTP/2 on one client connection: the nghttp2 session and its streams. The connection (`owner`) keeps doing the
/// socket and TLS; this turns its plaintext into streams and the streams' responses into frames.
///
/// Each stream is served by a `DownstreamConnection` of its own without a socket (`H2Stream`): its request head
/// is written as HTTP/1.1 into that connection's input, so routing, verification, limits, the upstream exchange,
/// local responses and the access log are the very code HTTP/1.1 requests run; its HTTP/1.1 output is parsed back
/// into a response head and body for nghttp2. Loop-confined.
final class H2Mux: H2SessionDelegate {
    unowned(unsafe) let owner: DownstreamConnection
    let session: H2ServerSession
    private(set) var streams: [Int32: H2Stream] = [:]
    /// Inside `session.receive` or `session.send` (nghttp2 is not reentrant): output is pulled afterwards.
    private var inSession = false
    /// Someone asked for frames to be written while that was not possible; the owner's flush loops on it.
    var flushWanted = false
    /// Streams whose queued response body nghttp2 has taken: they may resume their upstream (after `send`).
    private var drained: [H2Stream] = []
    /// The session failed or ended itself: close once its last frames (GOAWAY) are written.
    private(set) var failed = false

    init(owner: DownstreamConnection, settings: H2Settings) throws(H2Error) {
        self.owner = owner
        session = try H2ServerSession(settings: settings, delegate: nil)
        session.delegate = self
    }

    var worker: ProxyWorker { owner.worker }

    // MARK: driven by the owner

    /// Feeds the connection's decrypted input, then writes what it produced.
    func input(_ buffer: ByteBuffer) {
        inSession = true
        let ok = session.receive(buffer.readable, nowMillis: worker.loop.now)
        inSession = false
        buffer.clear()
        if !ok || session.failure != nil { sessionFailed() }
        owner.flushOut()
    }

    /// The session ended itself (a flood or a protocol error): say so once, in the log and the metrics.
    private func sessionFailed() {
        guard !failed else { return }
        failed = true
        guard let why = session.failure else { return }
        ProcessMetrics.shared.h2ConnectionClosed(reason: why.label)
        let client = String(decoding: owner.clientAddress, as: UTF8.self)
        if case .flood = why {
            Logger.warn("h2: connection closed", ["reason": why.description, "client": client])
        } else {
            Logger.info("h2: connection closed", ["reason": why.description, "client": client])
        }
    }

    /// Appends frames to `out` up to `limit` bytes; then lets streams whose body was taken go on. False: fatal.
    func produce(into out: ByteBuffer, limit: Int) -> Bool {
        inSession = true
        let ok = session.send(into: out, limit: limit)
        inSession = false
        if !ok || session.failure != nil { sessionFailed() }
        while let s = drained.popLast() { s.bodyTaken() }
        return ok
    }

    /// The session has nothing left to do (GOAWAY exchanged and no streams, or it failed).
    var isFinished: Bool { failed ? !session.wantsWrite : session.isFinished }

    /// A stream has output (or window updates) for the client.
    func requestFlush() {
        if inSession || owner.flushing {
            flushWanted = true
        } else {
            owner.flushOut()
        }
    }

    /// The earliest deadline of the streams (0: none).
    var earliestStreamDeadline: UInt64 {
        var d: UInt64 = 0
        for s in streams.values {
            if let c = s.connection, c.deadline != 0, d == 0 || c.deadline < d { d = c.deadline }
            if s.discardUntil != 0, d == 0 || s.discardUntil < d { d = s.discardUntil }
        }
        return d
    }

    /// Fires the streams' due deadlines.
    func streamTimeouts(now: UInt64) {
        for s in Array(streams.values) {
            if let c = s.connection, c.deadline != 0, c.deadline <= now { c.onTimeout(now: now) }
            if s.discardUntil != 0 && s.discardUntil <= now && !s.sessionClosed {
                s.discardUntil = 0
                session.reset(stream: s.id, code: .noError)   // the client is still uploading: stop it now
                requestFlush()
            }
        }
    }

    /// SIGTERM: GOAWAY; the streams in flight finish.
    func drain() {
        session.goAway()
        requestFlush()
    }

    /// The connection is going: every stream ends now.
    func closeAll() {
        for s in Array(streams.values) { s.connection?.close() }
        streams.removeAll()
    }

    // MARK: H2SessionDelegate

    func h2Request(stream id: Int32, head: H2RequestHead, endStream: Bool) {
        let s = H2Stream(id: id, mux: self)
        let c = DownstreamConnection(stream: s, of: owner)
        s.connection = c
        streams[id] = s
        s.writeRequestHead(head, endStream: endStream, into: c.inBuf)
        c.startStream()
    }

    func h2RequestData(stream id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let s = streams[id], let c = s.connection, !c.closed else {
            session.consume(stream: id, bytes.count)   // nobody will read it: give the window back at once
            return
        }
        s.requestData(bytes, into: c.inBuf)
        c.readLoop()
    }

    func h2RequestEnd(stream id: Int32) {
        guard let s = streams[id], let c = s.connection, !c.closed else { return }
        s.requestEnd(into: c.inBuf)
        c.readLoop()
    }

    func h2StreamClosed(stream id: Int32, errorCode: UInt32) {
        guard let s = streams.removeValue(forKey: id) else { return }
        s.sessionClosed = true
        s.connection?.close()   // reset by the client before its response was done (499), or already gone
    }

    func h2ResponseBody(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        guard let s = streams[id] else { return .failed }
        let read = s.readBody(into: buffer)
        if s.wantsDrainNotice { drained.append(s) }
        return read
    }
}

/// One HTTP/2 stream: the HTTP/1.1 request written for its `DownstreamConnection`, and that connection's HTTP/1.1
/// response read back into a response head (submitted to nghttp2) and a body queue nghttp2 pulls from.
final class H2Stream {
    let id: Int32
    unowned(unsafe) let mux: H2Mux
    /// The stream's exchange (nil once it is finished; the stream may still be sending the body's tail).
    var connection: DownstreamConnection?
    /// nghttp2 closed the stream (done, or reset by the client).
    var sessionClosed = false
    /// The response is complete but the request body is not: it is dropped until then (0: not discarding).
    var discardUntil: UInt64 = 0

    private var chunked = false
    private var requestEnded = false
    /// Request-body bytes handed to the connection and not yet given back to the client's window.
    private var unacknowledged = 0

    private var parser: HTTP1ResponseParser
    private let body = ByteBuffer(capacity: 0)
    private var headSubmitted = false
    private(set) var responseEnded = false
    private var deferred = false
    private var failed = false
    /// nghttp2 took the last queued body bytes: the connection may resume its upstream.
    private(set) var wantsDrainNotice = false

    init(id: Int32, mux: H2Mux) {
        self.id = id
        self.mux = mux
        parser = HTTP1ResponseParser(limits: mux.worker.runtime.responseLimits)
    }

    /// Response bytes not yet taken by nghttp2 (the connection's backpressure counts them).
    var queuedBytes: Int { body.readableBytes }

    // MARK: the request, as HTTP/1.1

    /// The request line and fields. A body without content-length is sent on as chunked; Host comes from
    /// :authority; cookies are joined (RFC 9113 8.2.3); expect and te are not HTTP/1.1 business here. The result
    /// goes through the HTTP/1.1 parser like any client's head (limits, smuggling checks).
    func writeRequestHead(_ head: H2RequestHead, endStream: Bool, into out: ByteBuffer) {
        parser.expectResponse(toHEAD: head.equals(head.method, "HEAD"))
        let hasAuthority = !head.authority.isEmpty
        var hasLength = false
        var cookies = 0
        head.bytes.withUnsafeBytes { raw in
            @inline(__always) func put(_ r: Range<Int>) { out.append(UnsafeRawBufferPointer(rebasing: raw[r])) }
            put(head.method)
            out.append(byte: UInt8(ascii: " "))
            put(head.path)
            out.append(" HTTP/1.1\r\n" as StaticString)
            if hasAuthority {
                out.append("host: " as StaticString)
                put(head.authority)
                out.append("\r\n" as StaticString)
            }
            for f in head.fields {
                switch f.name.count {
                case 2 where head.equals(f.name, "te"): continue
                case 4 where head.equals(f.name, "host"): if hasAuthority { continue }
                case 6 where head.equals(f.name, "expect"): continue
                case 6 where head.equals(f.name, "cookie"): cookies += 1; continue
                case 14 where head.equals(f.name, "content-length"): hasLength = true
                default: break
                }
                put(f.name)
                out.append(": " as StaticString)
                put(f.value)
                out.append("\r\n" as StaticString)
            }
            if cookies > 0 {
                out.append("cookie: " as StaticString)
                var first = true
                for f in head.fields where f.name.count == 6 && head.equals(f.name, "cookie") {
                    if !first { out.append("; " as StaticString) }
                    put(f.value)
                    first = false
                }
                out.append("\r\n" as StaticString)
            }
        }
        requestEnded = endStream
        if !endStream && !hasLength {
            chunked = true
            out.append("transfer-encoding: chunked\r\n" as StaticString)
        }
        // One request per stream: the exchange ends with its response.
        out.append("connection: close\r\n\r\n" as StaticString)
    }

    func requestData(_ bytes: UnsafeRawBufferPointer, into out: ByteBuffer) {
        guard !bytes.isEmpty else { return }
        unacknowledged += bytes.count
        if chunked {
            out.appendChunk(bytes)
        } else {
            out.append(bytes)
        }
    }

    func requestEnd(into out: ByteBuffer) {
        guard !requestEnded else { return }
        requestEnded = true
        if chunked { out.appendLastChunk() }
    }

    /// After the connection read its input: the body bytes it took on open the client's window again.
    func acknowledge(remaining: Int) {
        let taken = unacknowledged - min(unacknowledged, remaining)
        guard taken > 0 else { return }
        unacknowledged -= taken
        mux.session.consume(stream: id, taken)
        mux.requestFlush()
    }

    // MARK: the response, from HTTP/1.1

    /// Takes the connection's HTTP/1.1 output: the head goes to nghttp2, body bytes to the queue.
    func takeResponse(from out: ByteBuffer) {
        guard !failed else { out.clear(); return }
        loop: while true {
            switch parser.next(out.readable) {
            case .head(let head, let consumed):
                out.consume(consumed)
                if head.status < 200 { continue }   // interim responses are not relayed over h2
                submitHead(head)
            case .body(let range, let consumed):
                body.append(UnsafeRawBufferPointer(rebasing: out.readable[range]))
                out.consume(consumed)
            case .end(let consumed):
                out.consume(consumed)
                responseEnded = true
                out.clear()   // nothing follows one response on a stream
                break loop
            case .needMore(let consumed):
                out.consume(consumed)
                break loop
            case .error:
                out.clear()
                fail()
                return
            }
        }
        if deferred && (!body.isEmpty || responseEnded) {
            deferred = false
            mux.session.resumeData(stream: id)
        }
        mux.requestFlush()
    }

    private func submitHead(_ head: HTTP1ResponseHead) {
        // Names lower-cased into one buffer, values beside them; connection-specific fields left out.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(head.bytes.count)
        var fields: [(name: Range<Int>, value: Range<Int>)] = []
        fields.reserveCapacity(head.fields.count)
        head.bytes.withUnsafeBytes { raw in
            for f in head.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[f.name])
                switch name.count {
                case 7 where Self.named(name, "upgrade"): continue
                case 10 where Self.named(name, "connection") || Self.named(name, "keep-alive"): continue
                case 16 where Self.named(name, "proxy-connection"): continue
                case 17 where Self.named(name, "transfer-encoding"): continue
                default: break
                }
                let n = bytes.count..<(bytes.count + name.count)
                for c in name { bytes.append(c >= 65 && c <= 90 ? c | 0x20 : c) }
                bytes.append(contentsOf: raw[f.value])
                fields.append((n, n.upperBound..<bytes.count))
            }
        }
        let hasBody: Bool
        switch head.framing {
        case .none, .contentLength(0): hasBody = false
        default: hasBody = true
        }
        headSubmitted = true
        if !mux.session.submitResponse(stream: id, status: head.status, bytes: bytes, fields: fields, hasBody: hasBody) { fail() }
    }

    /// ASCII case-insensitive `name == lower` (`lower` lower-case, same length checked by the caller).
    @inline(__always) private static func named(_ name: UnsafeRawBufferPointer, _ lower: StaticString) -> Bool {
        let l = UnsafeRawBufferPointer(start: lower.utf8Start, count: lower.utf8CodeUnitCount)
        for i in 0..<l.count where name[i] | 0x20 != l[i] { return false }
        return true
    }

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
