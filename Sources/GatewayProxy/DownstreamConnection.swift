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
final class DownstreamConnection: LoopHandler, UpstreamClient {
    /// The socket and, on a TLS listener, the session (`inBuf`/`outBuf` are plaintext); nil for an HTTP/2 stream.
    let transport: SocketTransport?
    /// `transport` on the paths only a socket connection takes. Unwrapped in place: binding the optional with
    /// `if let` retains and releases it each time, which showed in the per-request instruction count.
    @inline(__always) var socketTransport: SocketTransport { transport! }
    /// The worker outlives its connections (it closes them all before it goes), so no reference counting here.
    unowned(unsafe) let worker: ProxyWorker
    let clientAddress: [UInt8]
    let inBuf: ByteBuffer
    let outBuf: ByteBuffer
    var parser: HTTP1RequestParser
    /// Where responses go: HTTP/1.1 into `outBuf`, or the HTTP/2 stream.
    let sink: any ResponseSink
    /// The connection's decisions: phase, keep-alive, what the body waits on, what a deadline means.
    var http = HTTP1ServerStateMachine()
    var deadline: UInt64 = 0
    var closed = false
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
    var mux: H2Mux? = nil
    /// A plaintext `http2: true` listener, before the first request: the h2c preface may still come.
    var h2cPossible: Bool
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
        _ = http.headBytesArrived()
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
        switch http.timedOut(pendingOutput: pendingOutput > 0) {
        case .close:
            close()   // idle, a client that stopped reading its response, or one cut mid-body after our answer
        case .requestTimeout:
            respondLocal(.requestTimeout(), close: true)
        case .bodyTimeout:
            abortUpstream()
            respondLocal(.bodyTimeout(), close: true)
        case .disarm:
            deadline = 0   // waiting on the upstream, which has its own timeout
        }
    }

    /// Arms the deadline the state machine asked for.
    func arm(_ d: HTTP1ServerStateMachine.Deadline) {
        switch d {
        case .none: deadline = 0
        case .header: setDeadline(worker.loop.now + worker.headerTimeout)
        case .idle: setDeadline(worker.loop.now + worker.idleTimeout)
        case .linger: setDeadline(worker.loop.now + worker.lingerMillis)
        }
    }

    // MARK: reading

    /// Whether the connection wants more bytes from the client now.
    @inline(__always) private var wantsRead: Bool {
        if mux != nil { return true }   // nghttp2's flow control bounds what streams may send
        return http.wantsRead
    }

    func readLoop() {
        if let stream {
            // Input is pushed by the HTTP/2 session; what the exchange takes opens the client's window again.
            if !closed && wantsRead { process() }
            if !closed { stream.acknowledge(remaining: inBuf.readableBytes) }
            return
        }
        while socketTransport.readable && !closed && wantsRead {
            if http.phase == .lingering {
                linger(socketTransport)
                return
            }
            switch socketTransport.read(into: inBuf, reserve: 4096) {
            case .data:
                if http.phase == .exchanging && mux == nil { arm(http.bodyProgressed()) }
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
        let cutShort = http.phase == .exchanging   // unless the request is whole: then it is answered first
        if http.peerClosed() == .now {
            if cutShort && exchange.status == 0 { exchange.status = 499 }
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
            if http.phase == .closing {
                startLingering()
                return
            }
            if let up = exchange.upstream { up.resumeReading() }
        } else if http.phase == .exchanging {
            setDeadline(worker.loop.now + worker.idleTimeout)
        }
    }

    /// Encrypts (TLS) and sends what `outBuf` holds; false when the connection closed.
    @inline(__always) func writeWire() -> Bool {
        if socketTransport.write(from: outBuf) == .failed {
            close()
            return false
        }
        return true
    }

    private func startLingering() {
        guard let transport else { close(); return }   // a stream's exchange is over; nghttp2 ends the stream
        if inBuf.isEmpty && !transport.readable && http.requestDone {
            close()
            return
        }
        transport.shutdownWrite()
        _ = http.outputDrained()
        lingerUntil = worker.loop.now + worker.lingerMillis
        setDeadline(lingerUntil)
        inBuf.clear()
        transport.readable = true
        readLoop()
    }

    deinit { generatedRequestID.deallocate() }
}
