import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// One client connection: the socket (and TLS session), HTTP/1.1 parsing, keep-alive, lingering, or once
/// negotiated an HTTP/2 session (`H2Mux`) whose streams carry their own exchanges. What a request does — routing,
/// verification, the upstream, the response — is its `ProxyExchange`'s (`proxy`); this connection is that
/// exchange's `ExchangeCarrier`: it parses heads and bodies into it, writes what its sink buffered, and lends it
/// the connection's deadline. Requests are served one at a time in order (pipelined ones wait in `inBuf`).
/// Loop-confined.
final class DownstreamConnection: LoopHandler, ExchangeCarrier {
    /// The socket and, on a TLS listener, the session (`inBuf`/`outBuf` are plaintext).
    let transport: SocketTransport
    /// The worker outlives its connections (it closes them all before it goes), so no reference counting here.
    unowned(unsafe) let worker: ProxyWorker
    let inBuf: ByteBuffer
    let outBuf: ByteBuffer
    var parser: HTTP1RequestParser
    /// The exchange this connection's HTTP/1.1 requests go through, one after another (unused once HTTP/2 runs).
    let proxy: ProxyExchange
    var deadline: UInt64 = 0
    var closed = false
    var lingerUntil: UInt64 = 0
    /// HTTP/2: when an idle connection (no streams) closes.
    var muxIdleUntil: UInt64 = 0

    /// HTTP/2 on this connection's socket, once negotiated.
    var mux: H2Mux? = nil
    /// A plaintext `http2: true` listener, before the first request: the h2c preface may still come.
    var h2cPossible: Bool
    /// A TLS connection whose ALPN choice has not been looked at yet.
    private var alpnPending: Bool
    /// Inside the HTTP/2 write loop (streams asking for a flush then only flag it).
    var flushing = false
    /// After a WebSocket handshake's 101: the relay that gets this connection's events.
    var tunnel: Tunnel? = nil

    /// Response bytes not yet on the wire (plaintext waiting, plus ciphertext waiting on a TLS connection).
    var pendingOutput: Int { outBuf.readableBytes + transport.unsentCiphertext }
    var unflushedOutput: Int { outBuf.readableBytes }
    var hasBufferedInput: Bool { !inBuf.isEmpty }

    init(socket: Socket, worker: ProxyWorker, clientAddress: [UInt8], tls: TLSSession? = nil, http2: Bool = false,
         trustedPeer: Bool = false) {
        // Readable from the start: the request may be queued already when the connection is accepted (start() reads).
        transport = SocketTransport(socket: socket, tls: tls, readable: true, writable: true)
        self.worker = worker
        h2cPossible = http2 && tls == nil
        alpnPending = http2 && tls != nil
        inBuf = ByteBuffer(capacity: 16 * 1024)
        outBuf = ByteBuffer(capacity: 16 * 1024)
        var parser = HTTP1RequestParser(limits: worker.runtime.requestLimits)
        parser.keepsTrailers = true   // a chunked request's trailers are relayed where the upstream request can carry them
        self.parser = parser
        proxy = ProxyExchange(worker: worker, clientAddress: clientAddress, https: tls != nil, trustedPeer: trustedPeer,
                              http2: false, sink: HTTP1ResponseWriter(out: outBuf))
        proxy.attach(to: self)
    }

    func start() {
        // header_timeout runs from accept: a client that connects must send its head promptly.
        proxy.arm(.header)
        readLoop()
    }

    /// The connection's own deadlines (lingering, HTTP/2 idle); the exchange's arrive through `deadlineChanged`.
    @inline(__always) func setConnectionDeadline(_ d: UInt64) {
        deadline = d
        worker.loop.scheduleSweep(by: d)
    }

    @inline(__always) func deadlineChanged(_ d: UInt64) {
        deadline = d
        if d != 0 { worker.loop.scheduleSweep(by: d) }
    }

    /// A stream's deadline: the socket's sweep entry must come no later (`onTimeout` hands it on).
    func streamDeadline(_ d: UInt64) {
        if deadline == 0 || d < deadline { deadline = d }
    }

    // MARK: events

    func onEvents(_ events: UInt32) {
        if closed { return }
        if let tunnel { tunnel.clientEvents(events); return }
        if events & IOEvents.error != 0 { close(); return }
        if events & IOEvents.writable != 0 {
            transport.writable = true
            if pendingOutput > 0 { flushOut() }
            if closed { return }
        }
        if events & (IOEvents.readHangup | IOEvents.hangup) != 0 { transport.sawHangup = true }
        if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup) != 0 {
            transport.readable = true
            readLoop()
        }
    }

    func onTimeout(now: UInt64) {
        if closed { return }
        if let tunnel { tunnel.timedOut(now: now); return }
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
        proxy.timedOut(pendingOutput: pendingOutput)
    }

    // MARK: reading

    /// Whether the connection wants more bytes from the client now.
    @inline(__always) private var wantsRead: Bool {
        if mux != nil { return true }   // nghttp2's flow control bounds what streams may send
        return proxy.http.wantsRead
    }

    func readLoop() {
        while transport.readable && !closed && wantsRead {
            if proxy.http.phase == .lingering {
                linger()
                return
            }
            switch transport.read(into: inBuf, reserve: 4096) {
            case .data:
                if proxy.http.phase == .exchanging && mux == nil { proxy.arm(proxy.http.bodyProgressed()) }
                if alpnPending && !transport.isHandshaking, let tls = transport.tls {
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

    func resumeInput() {
        process()
        if !closed && transport.readable { readLoop() }
    }

    /// Discards input after our final response until the client closes or goes quiet.
    private func linger() {
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
        let cutShort = proxy.http.phase == .exchanging   // unless the request is whole: then it is answered first
        if proxy.http.peerClosed() == .now {
            if cutShort && proxy.exchange.status == 0 { proxy.exchange.status = 499 }
            close()
        }
    }

    // MARK: writing

    /// Writes buffered output. A short write means the socket buffer is full: wait for EPOLLOUT (edge-triggered).
    func flushOut() {
        if let mux { flushHTTP2(mux); return }
        guard writeWire() else { return }
        proxy.outputMoved(pending: pendingOutput)
    }

    /// Encrypts (TLS) and sends what `outBuf` holds; false when the connection closed.
    @inline(__always) func writeWire() -> Bool {
        if transport.write(from: outBuf) == .failed {
            close()
            return false
        }
        return true
    }

    /// The final response is out: stop sending, take in (and drop) what the client still sends for a while, so
    /// that a reset does not destroy the response before the client has read it.
    func closingOutputDrained() {
        if inBuf.isEmpty && !transport.readable && proxy.http.requestDone {
            close()
            return
        }
        transport.shutdownWrite()
        _ = proxy.http.outputDrained()
        lingerUntil = worker.loop.now + worker.lingerMillis
        setConnectionDeadline(lingerUntil)
        inBuf.clear()
        transport.readable = true
        readLoop()
    }

    func exchangeClosed() { close() }
}
