import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// One client connection: reads requests, drives one exchange at a time through routing and the upstream, and
/// writes responses in request order (pipelined requests wait in the input buffer). Loop-confined.
///
/// HTTP/2: a connection that negotiates h2 (ALPN, or the h2c preface on an `http2: true` listener) keeps its
/// transport and hands its plaintext to an `H2Mux`; each of its streams is then a `DownstreamConnection` without a
/// transport (`stream`): its head and body are handed over as they are, and the stream is its `ResponseSink`
/// (see H2Stream.swift).
final class DownstreamConnection: LoopHandler {
    enum Phase {
        /// Waiting for (the rest of) a request head.
        case awaitingHead
        /// A request is being forwarded and its response relayed.
        case forwarding
        /// Flushing a final response, then closing.
        case closing
        /// Write side shut; discarding what the client still sends so our response is not lost to a reset.
        case lingering
    }

    /// The socket and, on a TLS listener, the session (`inBuf`/`outBuf` are plaintext); nil for an HTTP/2 stream.
    let transport: SocketTransport?
    /// `transport` on the paths only a socket connection takes. Unwrapped in place: binding the optional with
    /// `if let` retains and releases it each time, which showed in the per-request instruction count.
    @inline(__always) private var socketTransport: SocketTransport { transport! }
    /// The worker outlives its connections (it closes them all before it goes), so no reference counting here.
    unowned(unsafe) let worker: ProxyWorker
    let clientAddress: [UInt8]
    let inBuf: ByteBuffer
    let outBuf: ByteBuffer
    var parser: HTTP1RequestParser
    /// Where responses go: HTTP/1.1 into `outBuf`, or the HTTP/2 stream.
    let sink: any ResponseSink
    var phase = Phase.awaitingHead
    var deadline: UInt64 = 0
    var closed = false
    /// Reading is paused because the upstream's write buffer is full (backpressure).
    var readPaused = false
    var lingerUntil: UInt64 = 0
    /// HTTP/2: when an idle connection (no streams) closes.
    var muxIdleUntil: UInt64 = 0

    // The current exchange.
    var exchange = Exchange()
    /// The current request's generated id, formatted (`RequestID.generated`).
    let generatedRequestID = UnsafeMutableRawPointer.allocate(byteCount: RequestIDGenerator.length, alignment: 1)

    /// The request arrived over TLS (X-Forwarded-Proto https).
    let https: Bool
    /// The peer is one of the listener's `trusted_proxies`: its forwarding headers are kept and appended to.
    let trustedPeer: Bool
    /// HTTP/2 on this connection's socket, once negotiated.
    private(set) var mux: H2Mux? = nil
    /// A plaintext `http2: true` listener, before the first request: the h2c preface may still come.
    private var h2cPossible: Bool
    /// A TLS connection whose ALPN choice has not been looked at yet.
    private var alpnPending: Bool
    /// An HTTP/2 stream's exchange (no transport).
    let stream: H2Stream?
    /// Inside the HTTP/2 write loop (streams asking for a flush then only flag it).
    var flushing = false

    /// Response bytes not yet on the wire (plaintext waiting, plus ciphertext waiting on a TLS connection; for a
    /// stream, the body nghttp2 has not taken yet).
    var pendingOutput: Int { outBuf.readableBytes + (transport?.unsentCiphertext ?? 0) + (stream?.queuedBytes ?? 0) }

    /// Whether more client input may be waiting (a stream's input is pushed to it, so always).
    var readable: Bool { transport?.readable ?? true }

    init(socket: Socket, worker: ProxyWorker, clientAddress: [UInt8], tls: TLSSession? = nil, http2: Bool = false,
         trustedPeer: Bool = false) {
        // Readable from the start: the request may be queued already when the connection is accepted (start() reads).
        transport = SocketTransport(socket: socket, tls: tls, readable: true, writable: true)
        self.worker = worker
        self.clientAddress = clientAddress
        self.trustedPeer = trustedPeer
        https = tls != nil
        h2cPossible = http2 && tls == nil
        alpnPending = http2 && tls != nil
        stream = nil
        inBuf = ByteBuffer(capacity: 16 * 1024)
        outBuf = ByteBuffer(capacity: 16 * 1024)
        sink = HTTP1ResponseWriter(out: outBuf)
        self.parser = HTTP1RequestParser(limits: worker.runtime.requestLimits)
    }

    /// The exchange of one HTTP/2 stream of `owner`.
    init(stream: H2Stream, of owner: DownstreamConnection) {
        transport = nil
        worker = owner.worker
        clientAddress = owner.clientAddress
        https = owner.https
        trustedPeer = owner.trustedPeer
        h2cPossible = false
        alpnPending = false
        self.stream = stream
        sink = stream
        inBuf = ByteBuffer(capacity: 0)
        outBuf = ByteBuffer(capacity: 0)
        parser = HTTP1RequestParser(limits: worker.runtime.requestLimits)
    }

    /// Serves a stream's request (its head as the HTTP/1.1 checks read it; `headBytes`: its size on the wire).
    func startStream(_ head: Result<HTTP1RequestHead, HTTP1ParseError>, headBytes: Int) {
        setDeadline(worker.loop.now + worker.headerTimeout)
        exchange.sawRequestBytes = true
        switch head {
        case .success(let head):
            exchange.bytesIn = headBytes
            beginRequest(head)
            if !closed { readLoop() }
        case .failure(let error):
            respondLocal(.parseError(status: error.status, code: error.code.rawValue), close: true)
        }
    }

    func start() {
        // header_timeout runs from accept: a client that connects must send its head promptly.
        setDeadline(worker.loop.now + worker.headerTimeout)
        readLoop()
    }

    @inline(__always) func setDeadline(_ d: UInt64) {
        deadline = d
        worker.loop.scheduleSweep(by: d)
        if let stream { stream.mux.owner.streamDeadline(d) }
    }

    /// A stream's deadline: the socket's sweep entry must come no later (`onTimeout` hands it on).
    func streamDeadline(_ d: UInt64) {
        if deadline == 0 || d < deadline { deadline = d }
    }

    // MARK: events

    func onEvents(_ events: UInt32) {
        if closed { return }
        if events & IOEvents.error != 0 { close(); return }
        if events & IOEvents.writable != 0 {
            socketTransport.writable = true
            if pendingOutput > 0 { flushOut() }
            if closed { return }
        }
        if events & (IOEvents.readHangup | IOEvents.hangup) != 0 { socketTransport.sawHangup = true }
        if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup) != 0 {
            socketTransport.readable = true
            readLoop()
        }
    }

    func onTimeout(now: UInt64) {
        if closed { return }
        if let mux {
            mux.streamTimeouts(now: now)
            if closed { return }
            if mux.streams.isEmpty && now >= muxIdleUntil {
                close()   // idle: nothing in flight to lose
                return
            }
            let d = mux.earliestStreamDeadline
            deadline = mux.streams.isEmpty ? muxIdleUntil : d
            if deadline != 0 { worker.loop.scheduleSweep(by: deadline) }
            return
        }
        switch phase {
        case .awaitingHead:
            if exchange.sawRequestBytes {
                respondLocal(.requestTimeout(), close: true)
            } else {
                close()   // idle keep-alive (or a silent new connection): nothing to answer
            }
        case .forwarding:
            if !exchange.requestDone {
                // The client stopped sending its body.
                if exchange.responseStarted {
                    close()
                } else {
                    abortUpstream()
                    respondLocal(.bodyTimeout(), close: true)
                }
            } else if pendingOutput > 0 {
                close()   // the client stopped reading the response
            } else {
                deadline = 0   // waiting on the upstream, which has its own timeout
            }
        case .closing, .lingering:
            close()
        }
    }

    // MARK: reading

    /// Whether the connection wants more bytes from the client now.
    @inline(__always) private var wantsRead: Bool {
        if mux != nil { return true }   // nghttp2's flow control bounds what streams may send
        switch phase {
        case .awaitingHead, .lingering: return true
        case .forwarding: return !exchange.requestDone && !readPaused && !exchange.awaitingState
        case .closing: return false
        }
    }

    func readLoop() {
        if let stream {
            // Input is pushed by the HTTP/2 session; what the exchange takes opens the client's window again.
            if !closed && wantsRead { process() }
            if !closed { stream.acknowledge(remaining: inBuf.readableBytes) }
            return
        }
        while socketTransport.readable && !closed && wantsRead {
            if phase == .lingering {
                linger(socketTransport)
                return
            }
            switch socketTransport.read(into: inBuf, reserve: 4096) {
            case .data:
                if phase == .forwarding && mux == nil { setDeadline(worker.loop.now + worker.idleTimeout) }
                if alpnPending && !socketTransport.isHandshaking, let tls = socketTransport.tls {
                    alpnPending = false
                    if tls.negotiatedProtocol == "h2" { startHTTP2() }
                    if closed { return }
                }
                if inBuf.isEmpty { continue }   // a TLS handshake step or a partial record
                if mux != nil { muxIdleUntil = worker.loop.now + worker.idleTimeout }
                process()
            case .wouldBlock:
                return
            case .closed:
                peerClosed()
                return
            case .failed, .tlsFailed:
                close()
                return
            }
        }
    }

    /// Discards input after our final response until the client closes or goes quiet.
    private func linger(_ transport: SocketTransport) {
        if transport.socket.discardInput() == .wouldBlock {
            transport.readable = false
            if worker.loop.now >= lingerUntil { close() }
            return
        }
        close()
    }

    /// The client closed its sending side.
    private func peerClosed() {
        if mux != nil { close(); return }
        switch phase {
        case .awaitingHead:
            close()
        case .forwarding:
            if exchange.requestDone {
                exchange.closeAfter = true   // answer, then close
            } else {
                exchange.status = exchange.status == 0 ? 499 : exchange.status
                close()
            }
        case .closing, .lingering:
            close()
        }
    }

    // MARK: writing

    /// Writes buffered output. A short write means the socket buffer is full: wait for EPOLLOUT (edge-triggered).
    func flushOut() {
        if let stream {
            stream.flush()
            if !closed { afterWrite() }
            return
        }
        if let mux { flushHTTP2(mux); return }
        guard writeWire() else { return }
        afterWrite()
    }

    /// After output moved on: everything gone means linger (closing) or resume the upstream; otherwise the client
    /// has `idle_timeout` to take more.
    @inline(__always) private func afterWrite() {
        if pendingOutput == 0 {
            if phase == .closing {
                startLingering()
                return
            }
            if let up = exchange.upstream { up.resumeReading() }
        } else if phase == .forwarding {
            setDeadline(worker.loop.now + worker.idleTimeout)
        }
    }

    /// Encrypts (TLS) and sends what `outBuf` holds; false when the connection closed.
    @inline(__always) private func writeWire() -> Bool {
        if socketTransport.write(from: outBuf) == .failed {
            close()
            return false
        }
        return true
    }

    private func startLingering() {
        guard let transport else { close(); return }   // a stream's exchange is over; nghttp2 ends the stream
        if inBuf.isEmpty && !transport.readable && exchange.requestDone {
            close()
            return
        }
        transport.shutdownWrite()
        phase = .lingering
        lingerUntil = worker.loop.now + worker.lingerMillis
        setDeadline(lingerUntil)
        inBuf.clear()
        transport.readable = true
        readLoop()
    }

    // MARK: teardown

    /// SIGTERM: an idle connection closes now; a busy one after its response.
    func drain() {
        if let mux { mux.drain(); return }
        if phase == .awaitingHead && !exchange.sawRequestBytes {
            close()
        } else {
            exchange.closeAfter = true
        }
    }

    deinit { generatedRequestID.deallocate() }

    func close() {
        guard !closed else { return }
        closed = true
        if phase == .forwarding && !exchange.logged && mux == nil {
            logExchange(status: exchange.status == 0 ? 499 : exchange.status)
        }
        abortUpstream()
        if let stream {
            stream.connectionClosed()
            return
        }
        mux?.closeAll()
        if let transport {
            worker.loop.deregister(fd: transport.socket.fd)
            transport.close()
        }
        worker.connectionClosed(self)
    }

    func abortUpstream() {
        if let up = exchange.upstream {
            exchange.upstream = nil
            up.pool.remove(up)
            up.close()
        }
    }
}

// MARK: HTTP/2

extension DownstreamConnection {
    /// ALPN chose h2, or the h2c preface arrived: from now on the socket carries an HTTP/2 session.
    func startHTTP2() {
        do {
            mux = try H2Mux(owner: self, settings: worker.runtime.h2Settings)
        } catch {
            close()
            return
        }
        h2cPossible = false
        phase = .forwarding
        muxIdleUntil = worker.loop.now + worker.idleTimeout
        setDeadline(muxIdleUntil)
        flushOut()   // the server's SETTINGS
    }

    /// Plaintext `http2: true` listeners: whether the first bytes are the h2c preface (nil: not enough bytes yet).
    /// Consulted until the first request is recognised either way.
    func checkH2CPreface() -> Bool? {
        guard h2cPossible else { return false }
        guard let match = H2Preface.matches(inBuf.readable) else { return nil }
        h2cPossible = false
        return match
    }

    /// Writes the session's frames while the socket takes them; closes once the session is over.
    fileprivate func flushHTTP2(_ mux: H2Mux) {
        if flushing { mux.flushWanted = true; return }
        flushing = true
        defer { flushing = false }
        while !closed {
            mux.flushWanted = false
            // Frames are pulled only while little is waiting for the socket: a client that does not read leaves
            // response bodies queued with their streams (and their upstreams paused), not here.
            var drainedAll = true   // nothing was pulled this round, or all of it went out
            let before = outBuf.readableBytes
            if before < 64 * 1024 {
                guard mux.produce(into: outBuf, limit: 64 * 1024) else {
                    _ = writeWire()
                    close()
                    return
                }
                drainedAll = outBuf.readableBytes > before
            }
            guard writeWire() else { return }
            if mux.flushWanted || (drainedAll && socketTransport.writable && pendingOutput == 0) { continue }
            break
        }
        if !closed && pendingOutput == 0 && mux.isFinished { close() }
    }
}
