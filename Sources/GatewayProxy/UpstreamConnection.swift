import GatewayCore
import GatewayPosix
import GatewayTLS
import HTTP1
import HTTP2

/// One TCP connection to an upstream: writes the request the exchange feeds it (`sendHead`, `sendBody`,
/// `sendBodyEnd`), parses the response and hands it back piece by piece (`UpstreamClient`). Idle in its pool
/// between exchanges. Loop-confined.
final class UpstreamConnection: LoopHandler, UpstreamLeg {
    /// The socket and, for an `https://` upstream, the TLS session (`inBuf`/`outBuf` are plaintext).
    let transport: SocketTransport
    /// Pools live as long as their worker, longer than any connection.
    unowned(unsafe) let pool: UpstreamPool
    let inBuf = ByteBuffer(capacity: 16 * 1024)
    private let outBuf = ByteBuffer(capacity: 8 * 1024)
    private var parser: HTTP1ResponseParser
    private(set) var client: (any UpstreamClient)?
    private var connecting: Bool
    /// Taken from the pool (so it may have been closed by the upstream while idle).
    private(set) var reused = false
    private(set) var isClosed = false
    /// Request bytes written in the current exchange (the retry rule needs "nothing sent yet").
    private(set) var bytesSent = 0
    /// The client's write buffer is full: stop reading until it drains.
    private var readPaused = false
    private var lastHeadWasInterim = false
    private var lastHeadKeepAlive = false
    var deadline: UInt64 = 0
    /// The cluster endpoint this connection goes to (-1: the upstream's one address).
    var endpoint = -1
    /// Its address as text, made once per connection (the access log's `upstream_address`).
    var peerLabel = ""
    /// The exchange's outcome is still to be reported to the cluster (its ejection and least-request counts).
    var outcomePending = false
    /// Request trailers waiting for the last chunk.
    private var pendingTrailers: ResponseTrailers? = nil
    /// response_timeout, or the route's stream_idle_timeout for a gRPC call: the limit on the upstream's silence.
    var silenceMillis: UInt64 = 0
    /// The request is a WebSocket handshake: a 101 naming websocket hands this connection to a tunnel.
    var expectsUpgrade = false
    /// Once switched, the tunnel gets this connection's events (and owns it).
    unowned(unsafe) var tunnel: Tunnel? = nil

    init(socket: Socket, pool: UpstreamPool, connecting: Bool, tls: TLSSession? = nil) {
        transport = SocketTransport(socket: socket, tls: tls, readable: false, writable: !connecting)
        self.pool = pool
        self.connecting = connecting
        var parser = HTTP1ResponseParser(limits: pool.worker.runtime.responseLimits)
        parser.keepsTrailers = true   // a chunked response's trailers are relayed (the sink filters them)
        self.parser = parser
    }

    // MARK: exchange lifecycle

    func attach(client: any UpstreamClient, isHEAD: Bool, reused: Bool) {
        self.client = client
        self.reused = reused
        bytesSent = 0
        readPaused = false
        lastHeadWasInterim = false
        expectsUpgrade = false
        pendingTrailers = nil
        silenceMillis = pool.target.responseTimeoutMillis
        parser.expectResponse(toHEAD: isHEAD)
        let now = pool.worker.loop.now
        setDeadline(now + (connecting ? pool.target.connectTimeoutMillis : pool.target.responseTimeoutMillis))
    }

    func detach() {
        client = nil
    }

    /// When the connection went back to the pool (loop milliseconds).
    private(set) var idleSince: UInt64 = 0

    func markIdle(until: UInt64) {
        idleSince = pool.worker.loop.now
        setDeadline(until)
    }

    /// Whether the upstream closed this idle connection without epoll having told us yet (its FIN may sit in the
    /// same event batch as the request about to use it). One non-blocking peek; callers use it only for
    /// connections idle long enough that an upstream keep-alive timeout could have hit them.
    /// Unsolicited bytes on an idle connection make it unsafe to reuse as well.
    func peerClosedWhileIdle() -> Bool {
        transport.socket.peek() != .wouldBlock
    }

    @inline(__always) private func setDeadline(_ d: UInt64) {
        deadline = d
        pool.worker.loop.scheduleSweep(by: d)
    }

    // MARK: events

    func onEvents(_ events: UInt32) {
        if isClosed { return }
        if let tunnel { tunnel.upstreamEvents(events); return }
        if connecting {
            guard events & (IOEvents.writable | IOEvents.error | IOEvents.hangup) != 0 else { return }
            if transport.socket.pendingError != 0 { fail(.connectFailed); return }
            connecting = false
            transport.writable = true
            setDeadline(pool.worker.loop.now + silenceMillis)
            flush()
            if isClosed { return }
        }
        if client == nil {
            // Idle in the pool: data or a hang-up means the upstream is done with this connection.
            if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 {
                pool.remove(self)
                close()
            }
            return
        }
        if events & IOEvents.writable != 0 {
            transport.writable = true
            if !outBuf.isEmpty || transport.unsentCiphertext > 0 { flush() }
        }
        if events & (IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 { transport.sawHangup = true }
        if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 {
            transport.readable = true
            readLoop()
        }
    }

    func onTimeout(now: UInt64) {
        guard !isClosed, tunnel == nil else { return }   // a tunnel's idle limit is kept on the client's side
        if client == nil {
            pool.remove(self)
            close()
        } else {
            fail(connecting ? .connectTimeout : .responseTimeout)
        }
    }

    // MARK: writing the request

    /// Request bytes not yet sent (the exchange pauses the client's body above the high-water mark).
    var unsentRequestBytes: Int { outBuf.readableBytes }

    /// The request head: `write` appends it (sent with the first body bytes, or by `flush`).
    @inline(__always) func sendHead(_ write: (ByteBuffer) -> Void) { write(outBuf) }

    /// Request-body bytes, as a chunk when the request goes upstream chunked.
    @inline(__always) func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool) {
        if chunked { outBuf.appendChunk(bytes) } else { outBuf.append(bytes) }
    }

    /// The request body is complete (the last chunk when chunked); sends what is buffered.
    func sendBodyEnd(chunked: Bool) {
        if chunked {
            if let t = pendingTrailers {
                pendingTrailers = nil
                outBuf.appendLastChunk(trailers: t)
            } else {
                outBuf.appendLastChunk()
            }
        }
        flush()
    }

    var target: UpstreamTarget { pool.target }

    /// Chunked trailer fields after the last chunk's size line (a request that is not chunked has nowhere to put them).
    func sendTrailers(_ trailers: ResponseTrailers) {
        guard pendingTrailers == nil else { return }
        pendingTrailers = trailers
    }

    func release(reusable: Bool) { pool.release(self, reusable: reusable) }

    func abort() {
        pool.remove(self)
        close()
    }

    /// The retry path: the request `old` could not send moves here.
    func takeUnsentRequest(from old: UpstreamConnection) {
        outBuf.append(old.outBuf.readable)
        old.outBuf.clear()
    }

    /// Writes what `outBuf` holds. A reused connection that fails before its first byte is retried once on a
    /// fresh connection (the only retry: after a byte has left, the upstream may have acted on it).
    func flush() {
        guard !connecting, !isClosed, transport.writable else { return }
        // A TLS client speaks first; the request goes in once the handshake is done (until then only handshake
        // records leave).
        guard transport.advanceHandshake() else { fail(.connectFailed); return }
        let before = outBuf.readableBytes
        let result = transport.write(from: outBuf)
        bytesSent += before - outBuf.readableBytes
        if result == .failed {
            if bytesSent == 0 && reused, let c = client {
                client = nil
                pool.remove(self)
                c.retryOnFreshConnection(from: self)
                close()
            } else {
                fail(.closed)
            }
            return
        }
        if client != nil {
            // Progress while sending counts as activity: a slow client upload must not trip response_timeout.
            setDeadline(pool.worker.loop.now + silenceMillis)
            if outBuf.readableBytes < pool.worker.highWater { client?.upstreamCanTakeMore() }
        }
    }

    // MARK: reading the response

    func pauseReading() { readPaused = true }

    func resumeReading() {
        guard readPaused else { return }
        readPaused = false
        process()
        if transport.readable && !readPaused { readLoop() }
    }

    private func readLoop() {
        while transport.readable && !readPaused && !isClosed && client != nil {
            let wasHandshaking = transport.isHandshaking
            switch transport.read(into: inBuf, reserve: 16 * 1024) {
            case .data:
                setDeadline(pool.worker.loop.now + silenceMillis)
                if wasHandshaking {
                    flush()   // the request, once the handshake has finished
                    if isClosed { return }
                }
                if inBuf.isEmpty { continue }   // a TLS handshake step or a partial record
                process()
            case .wouldBlock:
                return
            case .closed:
                onEOF()
                return
            case .failed:
                fail(.closed)
                return
            case .tlsFailed:
                fail(wasHandshaking ? .connectFailed : .closed)
                return
            }
        }
    }

    private func process() {
        while let c = client, !readPaused {
            switch parser.next(inBuf.readable) {
            case .needMore(let consumed):
                inBuf.consume(consumed)
                c.upstreamReadEnded()
                return
            case .head(let head, let consumed):
                inBuf.consume(consumed)
                if head.status == 101 {
                    // Only a WebSocket handshake asked for a switch, and only to websocket: anything else is refused.
                    guard expectsUpgrade, head.switchesToWebSocket else {
                        fail(.invalidResponse)
                        return
                    }
                    client = nil
                    pool.remove(self)
                    deadline = 0
                    c.upstreamSwitchedProtocols(head, from: self)
                    return
                }
                lastHeadWasInterim = head.status < 200
                if !lastHeadWasInterim {
                    lastHeadKeepAlive = head.keepAlive
                    reportOutcome(failed: head.status >= 500)
                }
                c.upstreamResponseHead(head)
            case .body(let range, let consumed):
                let wantsPause = c.upstreamResponseBody(UnsafeRawBufferPointer(rebasing: inBuf.readable[range]))
                inBuf.consume(consumed)
                if wantsPause { readPaused = true; return }
            case .end(let consumed):
                inBuf.consume(consumed)
                if lastHeadWasInterim { lastHeadWasInterim = false; continue }
                let trailers = parser.takeTrailers()
                if !trailers.isEmpty {
                    c.upstreamResponseTrailers(Self.trailerFields(trailers))
                    if client == nil { return }
                }
                // Bytes after a complete response were never asked for, and a FIN means the upstream is done:
                // don't reuse such a connection.
                let reusable = lastHeadKeepAlive && inBuf.isEmpty && outBuf.isEmpty && !transport.sawHangup
                c.upstreamResponseEnd(from: self, reusable: reusable)
                return
            case .error:
                fail(.invalidResponse)
                return
            }
        }
    }

    private func onEOF() {
        guard let c = client else { close(); return }
        switch parser.finishOnEOF() {
        case .end:
            c.upstreamResponseEnd(from: self, reusable: false)
        case .error:
            fail(.invalidResponse)
        default:
            fail(.closed)
        }
        if !isClosed && client == nil { /* released by the client */ }
    }

    // MARK: teardown

    /// Ends the exchange with a failure the client turns into 502/504 (or a truncated response).
    private func reportOutcome(failed: Bool) {
        guard outcomePending else { return }
        outcomePending = false
        pool.report(endpoint: endpoint, failed: failed)
    }

    private func fail(_ failure: UpstreamFailure) {
        let c = client
        reportOutcome(failed: true)
        if failure == .connectFailed || failure == .connectTimeout, bytesSent == 0, let c,
           let cluster = pool.target.cluster, cluster.count > 1 {
            // Nothing was sent: the request may go to another endpoint (the exchange bounds the attempts).
            client = nil
            pool.remove(self)
            c.retryOnFreshConnection(from: self)
            close()
            return
        }
        client = nil
        pool.remove(self)
        close()
        c?.upstreamFailed(failure)
    }

    /// Closes without telling the client (the client is the one giving up).
    func close() {
        guard !isClosed else { return }
        reportOutcome(failed: false)
        isClosed = true
        client = nil
        deadline = 0
        pool.worker.loop.deregister(fd: transport.socket.fd)
        transport.close()
    }

    /// Checked trailer field lines (`name: value` CRLF each, as the chunked decoder keeps them) as fields with
    /// lower-case names.
    static func trailerFields(_ lines: [UInt8]) -> ResponseTrailers {
        var fields = ResponseTrailers()
        lines.withUnsafeBytes { p in
            var start = 0
            var i = 0
            while i + 1 < p.count {
                guard p[i] == 13 && p[i + 1] == 10 else { i += 1; continue }
                if let colon = p[start..<i].firstIndex(of: UInt8(ascii: ":")) {
                    var v = colon + 1, e = i
                    while v < e && (p[v] == 32 || p[v] == 9) { v += 1 }
                    while e > v && (p[e - 1] == 32 || p[e - 1] == 9) { e -= 1 }
                    fields.addLowercased(UnsafeRawBufferPointer(rebasing: p[start..<colon]),
                                         UnsafeRawBufferPointer(rebasing: p[v..<e]))
                }
                i += 2
                start = i
            }
        }
        return fields
    }
}
