import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// One HTTP/2 connection to an upstream (`protocol: h2c` prior knowledge, or `h2` negotiated by ALPN): many
/// exchanges' requests multiplexed as streams (`UpstreamH2Stream`). nghttp2 (`H2ClientSession`) does the framing,
/// HPACK and flow control; this does the socket, TLS, deadlines and the streams' bookkeeping. Owned by its pool,
/// shared by the exchanges of one loop. Loop-confined.
final class UpstreamH2Connection: LoopHandler, H2ClientDelegate {
    let transport: SocketTransport
    /// Strong: a reload retires the pool while this connection may still carry streams (the cycle ends when the
    /// connection closes and leaves the pool's `sessions`, or the retired pool drops them).
    let pool: UpstreamPool
    let session: H2ClientSession
    private let inBuf = ByteBuffer(capacity: 16 * 1024)
    private let outBuf = ByteBuffer(capacity: 16 * 1024)
    private(set) var streams: [Int32: UpstreamH2Stream] = [:]
    private var connecting: Bool
    private(set) var isClosed = false
    /// Inside `session.receive`/`send` (nghttp2 is not reentrant): a flush asked for then runs afterwards.
    private var inSession = false
    private var flushWanted = false
    /// Streams whose queued request body nghttp2 took: their clients may send more (after `send`).
    private var drained: [UpstreamH2Stream] = []
    /// Streams that got response bytes in the current read.
    private var readStreams: [UpstreamH2Stream] = []
    /// No stream since then: the connection closes at `upstream_idle_timeout`.
    private var idleSince: UInt64
    /// The ALPN result was checked (h2 over TLS).
    private var alpnChecked: Bool
    /// When the connection must have finished connecting (monotonic ms; 0 once connected).
    private var connectDeadline: UInt64
    var deadline: UInt64 = 0

    /// The cluster endpoint (-1: the upstream's one address).
    let endpoint: Int
    /// Its address as text (the access log's `upstream_address`).
    var peerLabel = ""

    init(socket: Socket, pool: UpstreamPool, connecting: Bool, tls: TLSSession?, endpoint: Int) throws(H2Error) {
        self.endpoint = endpoint
        transport = SocketTransport(socket: socket, tls: tls, readable: false, writable: !connecting)
        self.pool = pool
        self.connecting = connecting
        var settings = H2Settings()
        settings.maxHeaderListSize = pool.worker.runtime.responseLimits.maxHeaderBytes
        session = try H2ClientSession(settings: settings, delegate: nil)
        idleSince = pool.worker.loop.now
        alpnChecked = tls == nil
        connectDeadline = pool.worker.loop.now + pool.target.connectTimeoutMillis
        session.delegate = self
        scheduleDeadline()
    }

    /// Whether a new request may be a stream here: not going away, below the server's stream limit.
    var takesStreams: Bool {
        !isClosed && !session.goingAway && streams.count < min(session.maxConcurrentStreams, 256) && session.hasStreamIDs
    }

    var hasStreams: Bool { !streams.isEmpty }

    /// A new stream for `client`; its request is submitted by `sendHead`.
    func open(for client: any UpstreamClient, silenceMillis: UInt64, isHEAD: Bool, teTrailers: Bool) -> UpstreamH2Stream {
        UpstreamH2Stream(connection: self, client: client, silenceMillis: silenceMillis, isHEAD: isHEAD, teTrailers: teTrailers)
    }

    /// A stream's deadline: the connection's sweep entry comes no later.
    func streamDeadline(_ d: UInt64) {
        if deadline == 0 || d < deadline { deadline = d }
        pool.worker.loop.scheduleSweep(by: d)
    }

    /// A stream got response bytes in this read: it relays them once the read is over.
    func readEnded(_ s: UpstreamH2Stream) {
        if readStreams.last !== s { readStreams.append(s) }
    }

    func registered(_ stream: UpstreamH2Stream, id: Int32) { streams[id] = stream }

    // MARK: events

    func onEvents(_ events: UInt32) {
        if isClosed { return }
        if connecting {
            guard events & (IOEvents.writable | IOEvents.error | IOEvents.hangup) != 0 else { return }
            if transport.socket.pendingError != 0 { fail(.connectFailed); return }
            connecting = false
            transport.writable = true
            if transport.tls == nil { connectDeadline = 0 }
            flush()
            if isClosed { return }
        }
        if events & IOEvents.writable != 0 {
            transport.writable = true
            flush()
            if isClosed { return }
        }
        if events & (IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 { transport.sawHangup = true }
        if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 {
            transport.readable = true
            readLoop()
        }
    }

    private func readLoop() {
        while transport.readable && !isClosed {
            let wasHandshaking = transport.isHandshaking
            switch transport.read(into: inBuf, reserve: 16 * 1024) {
            case .data:
                if wasHandshaking {
                    flush()   // the handshake's next step; once done, the ALPN check and the connection preface
                    if isClosed { return }
                }
                if inBuf.isEmpty { continue }
                inSession = true
                let ok = session.receive(inBuf.readable)
                inSession = false
                inBuf.clear()
                if !ok { fail(.invalidResponse); return }
                afterSession()
                if isClosed { return }
            case .wouldBlock:
                return
            case .closed, .failed:
                fail(.closed)
                return
            case .tlsFailed:
                fail(wasHandshaking ? .connectFailed : .closed)
                return
            }
        }
    }

    /// TLS finished: the server must have chosen h2 (an HTTP/1.1 answer to our frames would be garbage).
    private func checkALPN() -> Bool {
        guard !alpnChecked else { return true }
        alpnChecked = true
        connectDeadline = 0
        guard transport.tls?.negotiatedProtocol == "h2" else {
            fail(.connectFailed)
            return false
        }
        return true
    }

    func onTimeout(now: UInt64) {
        guard !isClosed else { return }
        if connectDeadline != 0 && now >= connectDeadline {
            fail(.connectTimeout)
            return
        }
        for s in Array(streams.values) where s.deadline != 0 && s.deadline <= now {
            s.timedOut()
        }
        if isClosed { return }
        if streams.isEmpty && (pool.retired || now &- idleSince >= pool.worker.runtime.upstreamIdleMillis) {
            // Idle (or its pool retired by a reload): GOAWAY tells the server, then the connection closes.
            pool.removeSession(self)
            if !connecting {
                session.goAway()
                flush()
            }
            close()
            return
        }
        flush()
        scheduleDeadline()
    }

    /// The sweep entry: the connect deadline, the earliest stream deadline, or the idle close.
    func scheduleDeadline() {
        var d: UInt64 = connectDeadline
        for s in streams.values where s.deadline != 0 && (d == 0 || s.deadline < d) { d = s.deadline }
        if d == 0 && streams.isEmpty { d = pool.retired ? pool.worker.loop.now : idleSince + pool.worker.runtime.upstreamIdleMillis }
        deadline = d
        if d != 0 { pool.worker.loop.scheduleSweep(by: d) }
    }

    // MARK: writing

    /// Writes the session's frames while the socket takes them (deferred while inside the session).
    func flush() {
        if inSession { flushWanted = true; return }
        guard !connecting, !isClosed, transport.writable || transport.isHandshaking else { return }
        guard transport.advanceHandshake() else { fail(.connectFailed); return }
        if transport.isHandshaking {
            // The handshake's records go out; our frames wait for its end (and the ALPN answer).
            if transport.write(from: outBuf) == .failed { fail(.connectFailed) }
            return
        }
        guard checkALPN() else { return }
        repeat {
            flushWanted = false
            if outBuf.readableBytes < 64 * 1024 {
                inSession = true
                let ok = session.send(into: outBuf, limit: 64 * 1024)
                inSession = false
                if !ok { fail(.closed); return }
            }
            if transport.write(from: outBuf) == .failed { fail(.closed); return }
            while let s = drained.popLast() { s.bodyTaken() }
            if isClosed { return }
        } while flushWanted || (transport.writable && outBuf.isEmpty && session.wantsWrite)
        if !session.wantsRead && !session.wantsWrite && outBuf.isEmpty && transport.unsentCiphertext == 0 {
            pool.removeSession(self)
            close()
        }
    }

    /// After `receive`: the streams relay what they got, then what they asked for goes out.
    private func afterSession() {
        while !readStreams.isEmpty {
            let batch = readStreams
            readStreams.removeAll()
            for s in batch { s.readEnded() }
        }
        flush()
    }

    // MARK: H2ClientDelegate

    func h2ResponseHeaders(stream id: Int32, head: H2ResponseHead, endStream: Bool) {
        streams[id]?.responseHeaders(head, endStream: endStream)
    }

    func h2ResponseData(stream id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let s = streams[id] else {
            session.consume(stream: id, bytes.count)
            return
        }
        s.responseData(bytes)
    }

    func h2ResponseEnd(stream id: Int32) {
        streams[id]?.responseEnded()
    }

    func h2StreamClosed(stream id: Int32, errorCode: UInt32) {
        guard let s = streams.removeValue(forKey: id) else { return }
        if streams.isEmpty { idleSince = pool.worker.loop.now }
        s.streamClosed(errorCode: errorCode)
        scheduleDeadline()
    }

    func h2RequestBody(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> H2BodyRead {
        guard let s = streams[id] else { return .failed }
        let read = s.readBody(into: buffer)
        if s.wantsDrainNotice { drained.append(s) }
        return read
    }

    func h2GoAway() {
        // Streams the server did not take are closed by nghttp2 (REFUSED_STREAM); those it took finish here.
        pool.removeSession(self)
    }

    func streamFinished(_ s: UpstreamH2Stream) {
        if let id = s.id, streams[id] === s {
            // Still open on the wire (we reset it, or the request is unfinished): forget it; nghttp2 closes it later.
            streams.removeValue(forKey: id)
            if streams.isEmpty { idleSince = pool.worker.loop.now }
        }
        scheduleDeadline()
    }

    // MARK: teardown

    /// The connection failed: every stream's exchange hears it.
    private func fail(_ failure: UpstreamFailure) {
        pool.removeSession(self)
        let open = Array(streams.values)
        streams.removeAll()
        close()
        for s in open { s.connectionFailed(failure) }
    }

    /// SIGTERM or a reload: no new streams; close once the ones in flight are done.
    func goAway() {
        session.goAway()
        flush()
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        deadline = 0
        pool.worker.loop.deregister(fd: transport.socket.fd)
        transport.close()
        for s in Array(streams.values) { s.connectionFailed(.closed) }
        streams.removeAll()
    }
}
