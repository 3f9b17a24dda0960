#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import GatewayPosix
import Testing

/// `Socket`'s calls on a connected pair: their outcomes (bytes, would-block, EOF, failure) instead of -1 and errno.
@Suite struct SocketTests {
    /// Limits `socket`'s send buffer so a large write is short (the kernel rounds it up to its minimum).
    static func shrinkSendBuffer(_ socket: Socket) {
        var size: Int32 = 4096
        _ = setsockopt(socket.fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    static func send(_ text: String, on socket: Socket) {
        let bytes = Array(text.utf8)
        #expect(bytes.withUnsafeBytes { socket.send($0) } == .bytes(bytes.count))
    }

    @Test func receiveReportsWouldBlockThenBytesThenEOF() throws {
        let (a, b) = try Socket.pair()
        defer { a.close(); b.close() }
        let buffer = ByteBuffer(capacity: 64)
        #expect(a.receive(into: buffer) == .wouldBlock)
        Self.send("hello", on: b)
        #expect(a.receive(into: buffer) == .bytes(5))
        #expect(String(decoding: buffer.readable, as: UTF8.self) == "hello")
        b.shutdownWrite()
        #expect(a.receive(into: buffer) == .eof)
    }

    @Test func aFullSendBufferMakesAShortWriteThenWouldBlock() throws {
        let (a, b) = try Socket.pair()
        defer { a.close(); b.close() }
        Self.shrinkSendBuffer(a)
        let big = [UInt8](repeating: 0x61, count: 1 << 20)
        guard case .bytes(let first) = big.withUnsafeBytes({ a.send($0) }) else {
            Issue.record("the first send took nothing")
            return
        }
        #expect(first > 0 && first < big.count)
        #expect(big.withUnsafeBytes { a.send(UnsafeRawBufferPointer(rebasing: $0[first...])) } == .wouldBlock)
        // The peer takes what was sent; then the socket takes more.
        let sink = ByteBuffer(capacity: 1 << 20)
        var received = 0
        while case .bytes(let n) = b.receive(into: sink) { received += n; sink.clear() }
        #expect(received == first)
        guard case .bytes(let second) = big.withUnsafeBytes({ a.send(UnsafeRawBufferPointer(rebasing: $0[first...])) }) else {
            Issue.record("no room after the peer read")
            return
        }
        #expect(second > 0)
    }

    @Test func sendingToAClosedPeerFailsWithoutSIGPIPE() throws {
        let (a, b) = try Socket.pair()
        defer { a.close() }
        b.close()
        #expect(Array("x".utf8).withUnsafeBytes { a.send($0) } == .failed)
    }

    @Test func peekLeavesTheInputAndSeesAHangUp() throws {
        let (a, b) = try Socket.pair()
        defer { a.close() }
        #expect(a.peek() == .wouldBlock)
        Self.send("x", on: b)
        #expect(a.peek() == .bytes(1))
        let buffer = ByteBuffer(capacity: 16)
        #expect(a.receive(into: buffer) == .bytes(1))
        b.close()
        #expect(a.peek() == .eof)
    }

    @Test func discardInputDrainsUntilWouldBlockOrEOF() throws {
        let (a, b) = try Socket.pair()
        defer { a.close() }
        Self.send(String(repeating: "y", count: 10_000), on: b)
        #expect(a.discardInput() == .wouldBlock)
        #expect(a.peek() == .wouldBlock)
        Self.send("z", on: b)
        b.close()
        #expect(a.discardInput() == .eof)
    }
}
