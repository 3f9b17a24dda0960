#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayCrypto
import GatewayPosix
import HTTP1
import Observability

/// DEVELOPMENT ONLY: a small upstream for the quick start and tests. Answers every request with 200 and a JSON
/// description of what arrived (method, target, headers, body size and SHA-256). Not hardened, not for production.
public final class DevEchoServer: @unchecked Sendable {
    public let loop: EventLoop
    private var listener: EchoListener?

    public init(address: SocketAddress) throws(PosixError) {
        loop = try EventLoop(index: 0)
        let fd = try Socket.listen(on: address)
        let l = EchoListener(fd: fd, loop: loop)
        try loop.register(fd: fd, events: IOEvents.readable, handler: l)
        listener = l
    }

    public func run() { loop.run() }
}

private final class EchoListener: LoopHandler {
    let fd: Int32
    let loop: EventLoop
    var deadline: UInt64 { 0 }

    init(fd: Int32, loop: EventLoop) { self.fd = fd; self.loop = loop }

    func onEvents(_ events: UInt32) {
        while let (client, _) = Socket.accept(fd) {
            let c = EchoConnection(fd: client, loop: loop)
            do { try loop.register(fd: client, events: IOEvents.all, handler: c) } catch { close(client); continue }
            c.onEvents(IOEvents.readable)
        }
    }

    func onTimeout(now: UInt64) {}
}

private final class EchoConnection: LoopHandler {
    let fd: Int32
    let loop: EventLoop
    let inBuf = ByteBuffer(capacity: 16 * 1024)
    let outBuf = ByteBuffer(capacity: 16 * 1024)
    var parser = HTTP1RequestParser(limits: HTTP1Limits(maxHeaderBytes: 64 * 1024, maxHeaders: 200))
    var head: HTTP1RequestHead?
    let hasher = SHA256Hasher()
    var bodyBytes = 0
    var closed = false
    var deadline: UInt64 { 0 }

    init(fd: Int32, loop: EventLoop) { self.fd = fd; self.loop = loop }

    func onEvents(_ events: UInt32) {
        if events & IOEvents.writable != 0 { flush() }
        while !closed {
            inBuf.reserve(16 * 1024)
            let n = read(fd, inBuf.writablePointer, inBuf.writableBytes)
            if n > 0 { inBuf.didWrite(n); process(); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            shut()
            return
        }
    }

    func onTimeout(now: UInt64) {}

    private func process() {
        while !closed {
            switch parser.next(inBuf.readable) {
            case .needMore(let c): inBuf.consume(c); flush(); return
            case .head(let h, let c): inBuf.consume(c); head = h; bodyBytes = 0
            case .body(let r, let c):
                let bytes = UnsafeRawBufferPointer(rebasing: inBuf.readable[r])
                hasher.update(bytes)
                bodyBytes += bytes.count
                inBuf.consume(c)
            case .end(let c):
                inBuf.consume(c)
                respond()
            case .error(let e):
                let body = "{\"error\":\"bad_request\",\"reason\":\"\(e.code.rawValue)\"}"
                outBuf.append("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                flush()
                shut()
                return
            }
        }
    }

    private func respond() {
        guard let h = head else { return }
        var json = "{\"method\":" + JSONText.quoted(h.string(h.method))
        json += ",\"target\":" + JSONText.quoted(h.string(h.target))
        json += ",\"version\":\"" + (h.version == .http11 ? "HTTP/1.1" : "HTTP/1.0") + "\""
        json += ",\"headers\":["
        for (i, f) in h.fields.enumerated() {
            if i > 0 { json += "," }
            json += "[" + JSONText.quoted(h.string(f.name)) + "," + JSONText.quoted(h.string(f.value)) + "]"
        }
        json += "],\"body_bytes\":\(bodyBytes),\"body_sha256\":\"" + hexString(hasher.finish()) + "\"}\n"
        let keepAlive = h.keepAlive
        outBuf.append("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n" +
                      (keepAlive ? (h.version == .http10 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n") + "\r\n")
        if !h.methodIs("HEAD") { outBuf.append(json) }
        head = nil
        flush()
        if !keepAlive { shut() }
    }

    private func flush() {
        while !outBuf.isEmpty {
            let p = outBuf.readable
            let n = write(fd, p.baseAddress, p.count)
            if n > 0 { outBuf.consume(n); continue }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            shut()
            return
        }
    }

    private func shut() {
        guard !closed else { return }
        closed = true
        loop.deregister(fd: fd)
        close(fd)
    }
}
