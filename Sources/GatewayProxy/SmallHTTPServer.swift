import GatewayCore
import GatewayCrypto
public import GatewayPosix
import GatewayTLS
public import HTTP1
import Observability
import Foundation

/// What a development server does with each request: sees the head, the body in pieces, then answers.
public protocol SmallHTTPHandler: AnyObject {
    func begin(_ head: HTTP1RequestHead)
    func body(_ bytes: UnsafeRawBufferPointer)
    /// The complete response (status line, fields, body) for the request just ended.
    func end() -> String
}

/// A small single-threaded HTTP/1.1 server for low-traffic control endpoints: the admin listener and the
/// development tools (echo upstream, App Check issuer). It parses with the same strict parser as the request
/// path but buffers responses whole and has no timeouts or limits of its own: never for the request path, and
/// the development handlers never for production.
public final class SmallHTTPServer: @unchecked Sendable {
    public let loop: EventLoop
    private var listener: SmallHTTPListener?

    /// `makeHandler` gives each connection its own handler.
    public init(address: SocketAddress, makeHandler: @escaping () -> SmallHTTPHandler) throws(PosixError) {
        loop = try EventLoop(index: 0)
        let socket = try Socket.listen(on: address)
        let l = SmallHTTPListener(socket: socket, loop: loop, makeHandler: makeHandler)
        try loop.register(fd: socket.fd, events: IOEvents.readable, handler: l)
        listener = l
    }

    public func run() { loop.run() }

}

private final class SmallHTTPListener: LoopHandler {
    let socket: Socket
    let loop: EventLoop
    let makeHandler: () -> SmallHTTPHandler
    var deadline: UInt64 { 0 }

    init(socket: Socket, loop: EventLoop, makeHandler: @escaping () -> SmallHTTPHandler) {
        self.socket = socket
        self.loop = loop
        self.makeHandler = makeHandler
    }

    func onEvents(_ events: UInt32) {
        while let (client, _) = socket.accept() {
            let c = SmallHTTPConnection(socket: client, loop: loop, handler: makeHandler())
            do { try loop.register(fd: client.fd, events: IOEvents.all, handler: c) } catch { client.close(); continue }
            c.onEvents(IOEvents.readable)
        }
    }

    func onTimeout(now: UInt64) {}
}

private final class SmallHTTPConnection: LoopHandler {
    let transport: SocketTransport
    let loop: EventLoop
    let handler: SmallHTTPHandler
    let inBuf = ByteBuffer(capacity: 16 * 1024)
    let outBuf = ByteBuffer(capacity: 16 * 1024)
    var parser = HTTP1RequestParser(limits: HTTP1Limits(maxHeaderBytes: 64 * 1024, maxHeaders: 200))
    var head: HTTP1RequestHead?
    var closed = false
    /// The last response is written: close once the socket has taken all of it (closing at once would drop what
    /// the kernel's send buffer could not hold yet — a large `/metrics` or `/stats`).
    var closeAfterDrain = false
    var deadline: UInt64 { 0 }

    init(socket: Socket, loop: EventLoop, handler: SmallHTTPHandler) {
        transport = SocketTransport(socket: socket, readable: true, writable: true)
        self.loop = loop
        self.handler = handler
    }

    func onEvents(_ events: UInt32) {
        if events & IOEvents.writable != 0 {
            transport.writable = true
            flush()
        }
        if events & (IOEvents.readHangup | IOEvents.hangup | IOEvents.error) != 0 { transport.sawHangup = true }
        transport.readable = true
        while !closed && transport.readable {
            switch transport.read(into: inBuf, reserve: 16 * 1024) {
            case .data:
                if closeAfterDrain { inBuf.consume(inBuf.readableBytes) } else { process() }
            case .wouldBlock: return
            case .closed, .failed, .tlsFailed: shut(); return
            }
        }
    }

    func onTimeout(now: UInt64) {}

    private func process() {
        while !closed && !closeAfterDrain {
            switch parser.next(inBuf.readable) {
            case .needMore(let c): inBuf.consume(c); flush(); return
            case .head(let h, let c): inBuf.consume(c); head = h; handler.begin(h)
            case .body(let r, let c):
                handler.body(UnsafeRawBufferPointer(rebasing: inBuf.readable[r]))
                inBuf.consume(c)
            case .end(let c):
                inBuf.consume(c)
                respond()
            case .error(let e):
                let body = "{\"error\":\"bad_request\",\"reason\":\"\(e.code.rawValue)\"}"
                let date = String(decoding: HTTPDate.format(WallClock.unixSeconds()), as: UTF8.self)
                outBuf.append("HTTP/1.1 400 Bad Request\r\nDate: \(date)\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                closeAfterDrain = true
                flush()
                return
            }
        }
    }

    private func respond() {
        guard let h = head else { return }
        var response = handler.end()
        if !h.keepAlive {
            // Mark the response as the last on this connection.
            if let r = response.range(of: "\r\n") { response.insert(contentsOf: "\r\nConnection: close", at: r.lowerBound) }
        } else if h.version == .http10, let r = response.range(of: "\r\n") {
            response.insert(contentsOf: "\r\nConnection: keep-alive", at: r.lowerBound)
        }
        if let r = response.range(of: "\r\n"), !response.contains("\r\nDate: ") {
            // Every answer the gateway makes carries Date (RFC 9110 6.6.1).
            response.insert(contentsOf: "\r\nDate: " + String(decoding: HTTPDate.format(WallClock.unixSeconds()), as: UTF8.self),
                            at: r.lowerBound)
        }
        if h.methodIs("HEAD"), let end = response.range(of: "\r\n\r\n") {
            response = String(response[..<end.upperBound])
        }
        outBuf.append(response)
        head = nil
        if !h.keepAlive { closeAfterDrain = true }
        flush()
    }

    private func flush() {
        if transport.write(from: outBuf) == .failed { shut(); return }
        if closeAfterDrain && outBuf.readableBytes == 0 { shut() }
    }

    private func shut() {
        guard !closed else { return }
        closed = true
        loop.deregister(fd: transport.socket.fd)
        transport.close()
    }
}

