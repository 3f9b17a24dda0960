import GatewayCore
import GatewayPosix
import GatewayTLS
import Observability

/// A WebSocket connection after the upstream's 101: bytes relayed both ways, unread (frames are the endpoints'
/// business), with backpressure (a side is read only while the other's unsent bytes are under the high-water
/// mark), half-closes passed on, and `stream_idle_timeout` with no byte either way closing both.
///
/// The client connection owns the tunnel and hands it its socket events; the upstream connection, out of its pool,
/// does the same with its own. Client → upstream bytes travel in the client's `inBuf` (where the bytes after the
/// handshake already wait), upstream → client bytes in the client's `outBuf` (behind the 101 head). Loop-confined.
final class Tunnel {
    /// The client connection owns the tunnel (and closes it before it goes).
    unowned(unsafe) let client: DownstreamConnection
    let upstream: UpstreamConnection
    let routeMetric: Int
    let idleMillis: UInt64
    /// The 101 head written ahead of the relayed bytes (the access log counts it, the byte metrics do not).
    let headBytes: Int
    private var clientEOF = false, upstreamEOF = false
    private var upstreamShut = false, clientShut = false
    private(set) var closed = false
    /// Bytes moved after the handshake: from the client, to the client.
    private(set) var bytesUp = 0, bytesDown = 0

    init(client: DownstreamConnection, upstream: UpstreamConnection, routeMetric: Int, idleMillis: UInt64, headBytes: Int) {
        self.client = client
        self.upstream = upstream
        self.routeMetric = routeMetric
        self.idleMillis = idleMillis
        self.headBytes = headBytes
    }

    /// Starts relaying: what the upstream sent after its 101 follows the 101 head, what the client sent after its
    /// handshake goes up.
    func start() {
        client.worker.metrics.tunnelOpened(route: routeMetric)
        let early = upstream.inBuf.readableBytes
        if early > 0 {
            client.outBuf.append(upstream.inBuf.readable)
            upstream.inBuf.clear()
        }
        count(up: client.inBuf.readableBytes, down: early)
        // Edge-triggered: readiness that arrived while the handshake was in flight is not reported again.
        client.transport.readable = true
        upstream.transport.readable = true
        pump()
    }

    func clientEvents(_ events: UInt32) {
        if events & IOEvents.error != 0 { close(); return }
        note(events, client.transport)
        pump()
    }

    func upstreamEvents(_ events: UInt32) {
        if events & IOEvents.error != 0 { close(); return }
        note(events, upstream.transport)
        pump()
    }

    @inline(__always) private func note(_ events: UInt32, _ t: SocketTransport) {
        if events & IOEvents.writable != 0 { t.writable = true }
        if events & (IOEvents.readHangup | IOEvents.hangup) != 0 { t.sawHangup = true }
        if events & (IOEvents.readable | IOEvents.readHangup | IOEvents.hangup) != 0 { t.readable = true }
    }

    /// `stream_idle_timeout` passed with nothing moving either way.
    func timedOut(now: UInt64) {
        if now >= client.deadline { close() }
    }

    /// Moves what can move now, both ways, until neither side can go further.
    private func pump() {
        var moved = true
        var up = 0, down = 0
        while moved && !closed {
            moved = false
            guard let a = relay(from: client.transport, eof: &clientEOF, through: client.inBuf, to: upstream.transport,
                                shut: &upstreamShut),
                  let b = relay(from: upstream.transport, eof: &upstreamEOF, through: client.outBuf, to: client.transport,
                                shut: &clientShut) else {
                close()
                return
            }
            up += a
            down += b
            moved = a > 0 || b > 0
        }
        if up > 0 || down > 0 { count(up: up, down: down) }
        if clientShut && upstreamShut { close() }   // both sides said all they will say, and it was delivered
    }

    /// One direction: sends what waits, reads `from` while `to` keeps up, passes a finished side's FIN on. The bytes
    /// read, or nil when a socket or TLS failed.
    private func relay(from: SocketTransport, eof: inout Bool, through buf: ByteBuffer, to: SocketTransport,
                       shut: inout Bool) -> Int? {
        var read = 0
        if !buf.isEmpty || to.unsentCiphertext > 0 {
            if to.write(from: buf) == .failed { return nil }
        }
        let highWater = client.worker.highWater
        while from.readable && !eof && buf.readableBytes + to.unsentCiphertext < highWater {
            let before = buf.readableBytes
            switch from.read(into: buf, reserve: 16 * 1024) {
            case .data:
                read += buf.readableBytes - before
                if to.write(from: buf) == .failed { return nil }
            case .wouldBlock:
                break
            case .closed:
                eof = true
            case .failed, .tlsFailed:
                return nil
            }
        }
        if eof && !shut && buf.isEmpty && to.unsentCiphertext == 0 {
            to.shutdownWrite()
            shut = true
        }
        return read
    }

    private func count(up: Int, down: Int) {
        bytesUp += up
        bytesDown += down
        client.worker.metrics.tunnelBytes(route: routeMetric, upstream: up, downstream: down)
        client.setConnectionDeadline(client.worker.loop.now + idleMillis)
    }

    /// Closes both sides (idle, a failure, both halves done, SIGTERM's drain timeout, a reload never: the tunnel
    /// keeps the configuration it started with).
    func close() {
        guard !closed else { return }
        closed = true
        upstream.tunnel = nil
        upstream.close()
        client.worker.metrics.tunnelClosed(route: routeMetric)
        client.tunnelClosed(self)
    }
}
