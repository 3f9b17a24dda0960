#if canImport(Glibc)
public import Glibc
#endif
public import GatewayCore
/// The calls made on a connected non-blocking socket: one system call each (EINTR retried), outcomes as small enums
/// instead of -1 and errno. `receive` and `send` run several times per proxied request and are inlined into the
/// transport (see SocketTransport.swift).
extension Socket {
    public enum ReadResult: Equatable {
        /// `n` (> 0) bytes were appended.
        case bytes(Int)
        /// Nothing to read now (EAGAIN): wait for the next readable edge.
        case wouldBlock
        /// The peer closed its sending side (FIN).
        case eof
        /// A socket error (a reset, mostly): the connection is gone.
        case failed
    }

    public enum WriteResult: Equatable {
        /// `n` (> 0) bytes were taken; fewer than offered means the socket buffer is full.
        case bytes(Int)
        /// The socket buffer is full (EAGAIN): wait for the next writable edge.
        case wouldBlock
        case failed
    }

    /// Reads into `buffer`'s writable space (the caller reserves it).
    @inlinable @inline(__always) public func receive(into buffer: ByteBuffer) -> ReadResult {
        while true {
            let n = recv(fd, buffer.writablePointer, buffer.writableBytes, 0)
            if n > 0 {
                buffer.didWrite(n)
                return .bytes(n)
            }
            if n == 0 { return .eof }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .failed
        }
    }

    /// Sends what it can of `bytes` (never raising SIGPIPE: a peer that is gone is `.failed`).
    @inlinable @inline(__always) public func send(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        while true {
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if n > 0 { return .bytes(n) }
            if n < 0 && errno == EINTR { continue }
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? .wouldBlock : .failed
        }
    }

    /// Reads and drops everything the peer has sent so far: `.wouldBlock` once drained, else `.eof` or `.failed`
    /// (lingering after a final response, where the input no longer matters but must not turn into a reset).
    public func discardInput() -> ReadResult {
        var scratch = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while true {
            let n = withUnsafeMutableBytes(of: &scratch) { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { continue }
            if n == 0 { return .eof }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .failed
        }
    }

    /// Looks at the input without taking it or waiting: `.bytes(1)` when something (unsolicited) is there,
    /// `.eof` when the peer has closed, `.wouldBlock` when the connection is quiet.
    public func peek() -> ReadResult {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if n > 0 { return .bytes(n) }
        if n == 0 { return .eof }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .failed
    }

    /// Sends FIN; reading stays possible.
    public func shutdownWrite() { _ = shutdown(fd, Int32(SHUT_WR)) }

    public func close() { _ = Glibc.close(fd) }
}
