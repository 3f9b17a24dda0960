#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import GatewayTLS
import Testing

/// `SocketTransport` over a socket pair, plain and TLS, as the connections drive it: edge-triggered readiness
/// (a short read or write clears it), partial writes into a small send buffer, EOF, the TLS handshake carried by
/// reads and writes, close_notify, and a failed handshake.
@Suite struct SocketTransportTests {
    static func pair(tls: Bool, clientCA: String = TLSSessionTests.pki.ca) throws -> (server: SocketTransport, client: SocketTransport) {
        let (a, b) = try Socket.pair()
        guard tls else {
            return (SocketTransport(socket: a, readable: true, writable: true), SocketTransport(socket: b, readable: true, writable: true))
        }
        let server = try TLSSession(context: try TLSContext.server(certificateChainFile: TLSSessionTests.pki.cert,
                                                                   privateKeyFile: TLSSessionTests.pki.key))
        let client = try TLSSession(context: try TLSContext.client(caFile: clientCA), serverName: "localhost")
        return (SocketTransport(socket: a, tls: server, readable: true, writable: true),
                SocketTransport(socket: b, tls: client, readable: true, writable: true))
    }

    static func shrinkSendBuffer(_ transport: SocketTransport) {
        var size: Int32 = 4096
        _ = setsockopt(transport.socket.fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Reads as an owner does on a readable edge, until the transport says the socket is drained or done; returns
    /// the last result.
    @discardableResult
    static func readAll(_ t: SocketTransport, into buffer: ByteBuffer) -> SocketTransport.ReadResult {
        t.readable = true
        var last = SocketTransport.ReadResult.wouldBlock
        while t.readable {
            last = t.read(into: buffer, reserve: 4096)
            if case .data = last { continue }
            break
        }
        return last
    }

    /// Moves handshake records both ways until both sides are done (bounded).
    static func handshake(_ server: SocketTransport, _ client: SocketTransport) {
        let scratch = ByteBuffer(capacity: 64)
        for _ in 0..<10 where server.isHandshaking || client.isHandshaking {
            #expect(client.advanceHandshake())
            _ = client.write(from: scratch)
            readAll(server, into: scratch)
            readAll(client, into: scratch)
        }
    }

    static func closeBoth(_ a: SocketTransport, _ b: SocketTransport) {
        a.close()
        b.close()
    }

    @Test(arguments: [false, true]) func bytesBothWaysAndAShortReadClearsReadable(tls: Bool) throws {
        let (server, client) = try Self.pair(tls: tls)
        defer { Self.closeBoth(server, client) }
        Self.handshake(server, client)
        #expect(!server.isHandshaking && !client.isHandshaking)
        let request = ByteBuffer(capacity: 64)
        request.append("GET / HTTP/1.1\r\n\r\n" as StaticString)
        #expect(client.write(from: request) == .done)
        #expect(request.isEmpty)
        let received = ByteBuffer(capacity: 64)
        server.readable = true
        #expect(server.read(into: received, reserve: 4096) == .data(18))
        #expect(!server.readable)   // short read: drained until the next edge
        #expect(String(decoding: received.readable, as: UTF8.self) == "GET / HTTP/1.1\r\n\r\n")
        server.readable = true
        #expect(server.read(into: received, reserve: 4096) == .wouldBlock)
        #expect(!server.readable)
    }

    @Test(arguments: [false, true]) func aFullSocketKeepsTheRestForTheNextWritableEdge(tls: Bool) throws {
        let (server, client) = try Self.pair(tls: tls)
        defer { Self.closeBoth(server, client) }
        Self.handshake(server, client)
        Self.shrinkSendBuffer(server)
        let response = ByteBuffer(capacity: 1 << 20)
        response.append([UInt8](repeating: 0x62, count: 1 << 20))
        #expect(server.write(from: response) == .wouldBlock)
        #expect(!server.writable)
        // Plain: what is not sent stays in the buffer. TLS: the plaintext went into the session; ciphertext waits.
        #expect(tls ? response.isEmpty && server.unsentCiphertext > 0 : response.readableBytes > 0)
        #expect(server.write(from: response) == .wouldBlock)   // no writable edge yet: nothing tried
        let received = ByteBuffer(capacity: 1 << 20)
        var rounds = 0
        while received.readableBytes < 1 << 20 && rounds < 10_000 {
            Self.readAll(client, into: received)
            server.writable = true   // the edge that draining the peer causes
            _ = server.write(from: response)
            rounds += 1
        }
        #expect(received.readableBytes == 1 << 20)
        #expect(response.isEmpty && server.unsentCiphertext == 0)
    }

    @Test(arguments: [false, true]) func halfCloseReachesThePeerAsClosed(tls: Bool) throws {
        let (server, client) = try Self.pair(tls: tls)
        defer { Self.closeBoth(server, client) }
        Self.handshake(server, client)
        server.shutdownWrite()   // TLS: close_notify first, then the FIN
        let received = ByteBuffer(capacity: 64)
        #expect(Self.readAll(client, into: received) == .closed)
        #expect(!client.readable)
        #expect(received.isEmpty)
        // The other direction still works.
        let late = ByteBuffer(capacity: 16)
        late.append("late" as StaticString)
        #expect(client.write(from: late) == .done)
        #expect(Self.readAll(server, into: received) == .data(4))
        #expect(String(decoding: received.readable, as: UTF8.self) == "late")
    }

    @Test func aHangUpWithTheLastBytesIsReadToTheEnd() throws {
        let (server, client) = try Self.pair(tls: false)
        defer { Self.closeBoth(server, client) }
        let last = ByteBuffer(capacity: 16)
        last.append("bye" as StaticString)
        #expect(client.write(from: last) == .done)
        client.socket.shutdownWrite()
        server.sawHangup = true   // epoll reported RDHUP with the data
        let received = ByteBuffer(capacity: 64)
        server.readable = true
        #expect(server.read(into: received, reserve: 4096) == .data(3))
        #expect(server.readable)   // short, but the hang-up means more is to be learnt: the EOF
        #expect(server.read(into: received, reserve: 4096) == .closed)
    }

    @Test func aHandshakeWithAnUntrustedCertificateFailsOnBothSides() throws {
        let (server, client) = try Self.pair(tls: true, clientCA: TLSSessionTests.pki.dir + "/other.pem")
        defer { Self.closeBoth(server, client) }
        let scratch = ByteBuffer(capacity: 64)
        #expect(client.advanceHandshake())
        #expect(client.write(from: scratch) == .done)   // ClientHello
        #expect(Self.readAll(server, into: scratch) == .data(0))   // a handshake step: ServerHello … Finished sent
        #expect(Self.readAll(client, into: scratch) == .tlsFailed)
        #expect(client.isHandshaking)
        // The client's alert reached the server.
        #expect(Self.readAll(server, into: scratch) == .tlsFailed)
    }

    @Test func closeIsIdempotent() throws {
        let (server, client) = try Self.pair(tls: false)
        server.close()
        server.close()
        #expect(server.isClosed)
        client.close()
    }
}
