public import GatewayCore
public import GatewayPosix
/// One connected socket and, on a TLS connection, its `TLSSession` with the ciphertext both ways: the caller reads
/// and writes plaintext `ByteBuffer`s, and the handshake, alerts and close_notify happen in here. Used by the client,
/// upstream and admin connections alike. Loop-confined.
///
/// Edge-triggered readiness is tracked here: the owner sets `readable` / `writable` (and `sawHangup`) from epoll's
/// events, and `read` / `write` clear them on a short read or write, which means the socket is drained or full
/// until the next edge. Registering with and deregistering from the event loop stays with the owner; so does
/// closing (`close()`, once, after deregistering).
public final class SocketTransport {
    public let socket: Socket
    /// Present on TLS connections.
    public let tls: TLSSession?
    /// Ciphertext from and for the peer (TLS only); the plaintext buffers are the owner's.
    @usableFromInline let cipherIn: ByteBuffer?
    @usableFromInline let cipherOut: ByteBuffer?
    /// More input may be waiting (set by the owner on a readable edge).
    public var readable: Bool
    /// The socket takes more output (set by the owner on a writable edge).
    public var writable: Bool
    /// The peer's FIN (or a reset) was reported: edge-triggered epoll reports it once, possibly with the last data,
    /// so a short read no longer means drained; read on until `.closed`.
    public var sawHangup = false
    public private(set) var isClosed = false
    /// A TLS connection whose handshake has not finished (kept here: the session is asked only while it is true).
    public private(set) var isHandshaking: Bool

    public enum ReadResult: Equatable {
        /// Bytes came from the socket; this many plaintext bytes were appended (with TLS possibly 0: a handshake
        /// step, a partial record).
        case data(Int)
        /// Nothing more now: wait for the next readable edge.
        case wouldBlock
        /// The peer is done sending: FIN, or TLS close_notify.
        case closed
        /// A socket error.
        case failed
        /// The peer's bytes failed TLS (handshake, certificate, record); the alert has been sent if the socket
        /// took it.
        case tlsFailed
    }

    public enum WriteResult: Equatable {
        /// Everything the transport can send now is on the wire (with TLS before the handshake has finished, the
        /// plaintext waits in its buffer).
        case done
        /// The socket is full: the rest waits for the next writable edge.
        case wouldBlock
        case failed
    }

    public init(socket: Socket, tls: TLSSession? = nil, readable: Bool, writable: Bool) {
        self.socket = socket
        self.tls = tls
        cipherIn = tls == nil ? nil : ByteBuffer(capacity: 16 * 1024)
        cipherOut = tls == nil ? nil : ByteBuffer(capacity: 16 * 1024)
        self.readable = readable
        self.writable = writable
        isHandshaking = tls != nil
    }

    /// Ciphertext waiting for the socket (part of what a connection still has to send).
    @inlinable public var unsentCiphertext: Int { cipherOut?.readableBytes ?? 0 }

    // MARK: reading

    // `read`, `write`, `sendAll` and `advanceHandshake` are inlined into the connections (and `Socket`'s calls into
    // them): left as calls they cost ~130 instructions, 0.5 %, of a plain proxied request (scripts/instructions.py).
    // The TLS halves stay calls; OpenSSL's work dwarfs them.

    /// One read from the socket of up to `reserve` bytes (or more when the buffer has room), decrypted into
    /// `plaintext` on a TLS connection.
    @inlinable @inline(__always) public func read(into plaintext: ByteBuffer, reserve: Int) -> ReadResult {
        let target = cipherIn ?? plaintext
        target.reserve(reserve)
        let space = target.writableBytes
        switch socket.receive(into: target) {
        case .bytes(let n):
            if n < space && !sawHangup { readable = false }
            guard let tls else { return .data(n) }
            return decrypt(tls, into: plaintext)
        case .wouldBlock:
            readable = false
            return .wouldBlock
        case .eof:
            readable = false
            return .closed
        case .failed:
            return .failed
        }
    }

    @usableFromInline func decrypt(_ tls: TLSSession, into plaintext: ByteBuffer) -> ReadResult {
        guard let cipherIn, let cipherOut else { return .failed }
        tls.feed(cipherIn.readable)
        cipherIn.clear()
        let result = tls.read(into: plaintext)
        let wasHandshaking = isHandshaking
        if wasHandshaking { isHandshaking = !tls.isHandshakeDone }
        // What the session answers during the handshake (its records, session tickets) or on a failure (the alert)
        // goes out now. After the handshake a read rarely makes output (a KeyUpdate's answer); that leaves with the
        // next write, sparing every read a look at the session's output.
        var sent = WriteResult.done
        if wasHandshaking || result.isFailure, tls.takeCiphertext(into: cipherOut) > 0 { sent = sendAll(cipherOut) }
        switch result {
        case .failed: return .tlsFailed
        case _ where sent == .failed: return .failed
        case .data(let n): return .data(n)
        case .wantMore: return .data(0)
        case .closed:
            readable = false
            return .closed
        }
    }

    // MARK: writing

    /// Sends `plaintext` (encrypted first on a TLS connection, once its handshake is done) while the socket takes
    /// it; what was sent — or handed to the TLS session — is consumed from the buffer.
    @inlinable @inline(__always) public func write(from plaintext: ByteBuffer) -> WriteResult {
        guard let cipherOut else { return sendAll(plaintext) }
        return encrypt(plaintext, into: cipherOut)
    }

    @usableFromInline func encrypt(_ plaintext: ByteBuffer, into cipherOut: ByteBuffer) -> WriteResult {
        guard let tls else { return .failed }
        if !plaintext.isEmpty && tls.isHandshakeDone {
            guard tls.write(plaintext.readable) else { return .failed }
            plaintext.consume(plaintext.readableBytes)
        }
        tls.takeCiphertext(into: cipherOut)
        return sendAll(cipherOut)
    }

    /// Sends what `wire` holds (ciphertext, or the plaintext of a plain connection) until it is empty or the socket
    /// is full.
    @inlinable @inline(__always) func sendAll(_ wire: ByteBuffer) -> WriteResult {
        while !wire.isEmpty {
            guard writable else { return .wouldBlock }
            switch socket.send(wire.readable) {
            case .bytes(let n):
                if n < wire.readableBytes { writable = false }
                wire.consume(n)
            case .wouldBlock:
                writable = false
                return .wouldBlock
            case .failed:
                return .failed
            }
        }
        return .done
    }

    /// A TLS client starts (or continues) its handshake; false when it failed. Nothing to do without TLS or after
    /// the handshake.
    @inlinable @inline(__always) public func advanceHandshake() -> Bool {
        guard isHandshaking, let tls else { return true }
        return stepHandshake(tls)
    }

    @usableFromInline func stepHandshake(_ tls: TLSSession) -> Bool {
        if case .failed = tls.handshake() { return false }
        isHandshaking = !tls.isHandshakeDone
        return true
    }

    // MARK: closing

    /// Half-close: close_notify first on a TLS connection (best effort: one send, even when the socket is full;
    /// the FIN follows anyway), then shut the write side. Reading stays possible.
    public func shutdownWrite() {
        if let tls, let cipherOut {
            tls.close()
            tls.takeCiphertext(into: cipherOut)
            if !cipherOut.isEmpty { _ = socket.send(cipherOut.readable) }
            cipherOut.clear()
        }
        socket.shutdownWrite()
    }

    /// Closes the descriptor (the owner has deregistered it); a second call does nothing, so a reused descriptor
    /// number is never closed by mistake.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        socket.close()
    }
}

extension TLSSession.ReadResult {
    fileprivate var isFailure: Bool {
        if case .failed = self { return true }
        return false
    }
}
