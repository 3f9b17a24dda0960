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
/// Each stream (`H2Stream`) carries a `ProxyExchange` of its own: its request head becomes an `HTTP1RequestHead`
/// (the parser's checks, no HTTP/1.1 text), its body is handed over as it is, so routing, verification, limits,
/// the upstream exchange, local responses and the access log are the very code HTTP/1.1 requests run; the stream
/// is that exchange's carrier and `ResponseSink`. Loop-confined.
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
        let client = String(decoding: owner.proxy.clientAddress, as: UTF8.self)
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
            if let e = s.exchange, e.deadline != 0, d == 0 || e.deadline < d { d = e.deadline }
            if s.discardUntil != 0, d == 0 || s.discardUntil < d { d = s.discardUntil }
        }
        return d
    }

    /// Fires the streams' due deadlines.
    func streamTimeouts(now: UInt64) {
        for s in Array(streams.values) {
            if let e = s.exchange, !e.closed, e.deadline != 0, e.deadline <= now { e.timedOut(pendingOutput: s.pendingOutput) }
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
        for s in Array(streams.values) { s.exchange?.close() }
        streams.removeAll()
    }

    // MARK: H2SessionDelegate

    func h2Request(stream id: Int32, head: H2RequestHead, endStream: Bool) {
        let s = H2Stream(id: id, mux: self, requestEnded: endStream)
        let client = owner.proxy   // the connection's own exchange knows the client (unused itself once h2 runs)
        let e = ProxyExchange(worker: worker, clientAddress: client.clientAddress, https: client.https,
                              trustedPeer: client.trustedPeer, http2: true, sink: s)
        e.attach(to: s)
        s.exchange = e
        streams[id] = s
        s.start(H2Stream.requestHead(head, endStream: endStream, limits: worker.runtime.requestLimits),
                headBytes: head.listSize)
    }

    func h2RequestData(stream id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let s = streams[id], let e = s.exchange, !e.closed else {
            session.consume(stream: id, bytes.count)   // nobody will read it: give the window back at once
            return
        }
        s.requestData(bytes)
        s.resumeInput()
    }

    func h2RequestTrailers(stream id: Int32, _ trailers: H2Fields) {
        streams[id]?.requestTrailers(trailers)
    }

    func h2RequestEnd(stream id: Int32) {
        guard let s = streams[id], let e = s.exchange, !e.closed else { return }
        s.requestEnd()
        s.resumeInput()
    }

    func h2StreamClosed(stream id: Int32, errorCode: UInt32) {
        guard let s = streams.removeValue(forKey: id) else { return }
        s.sessionClosed = true
        s.exchange?.close()   // reset by the client before its response was done (499), or already gone
    }

    func h2ResponseBody(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        guard let s = streams[id] else { return .failed }
        let read = s.readBody(into: buffer)
        if s.wantsDrainNotice { drained.append(s) }
        return read
    }
}
