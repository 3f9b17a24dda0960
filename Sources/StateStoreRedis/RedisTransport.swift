#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
internal import GatewayPosix
public import GatewayTLS
import StateStore

/// TLS to Redis (`rediss://`): the client context (trust anchor, client certificate, `tls_verify`) built once by
/// whoever read the configuration, and the name the server's certificate must carry (`tls_server_name`; nil: the
/// host connected to — an address literal is then checked against the certificate's IP addresses).
public struct RedisTLS: Sendable {
    public let context: TLSContext
    public let serverName: String?

    public init(context: TLSContext, serverName: String? = nil) {
        self.context = context
        self.serverName = serverName
    }
}

/// One blocking byte stream to Redis over a socket of the gateway's own, plain or through a `TLSSession` (OpenSSL
/// with memory BIOs, as on the listeners): Debian's hiredis has no TLS, so hiredis only formats commands and reads
/// replies (`RedisConnection`) and the bytes travel here. Every wait on the socket is a `poll` bounded by what is
/// left of the operation's deadline (`state.timeout`), connecting and the TLS handshake included; resolving a host
/// name (`getaddrinfo`, the system resolver) is not bounded by it; each address it gives is tried in turn.
///
/// A thrown error leaves the stream unusable; the owner drops it.
final class RedisTransport {
    private let socket: Socket
    private let session: TLSSession?
    /// What the peer is called in errors (`redis://host:port/db`, never a password).
    private let peer: String
    /// Ciphertext read from the socket (TLS) before it is fed to the session.
    private let cipherIn = ByteBuffer(capacity: 16 * 1024)
    /// Ciphertext waiting to be sent (TLS).
    private let cipherOut = ByteBuffer(capacity: 16 * 1024)
    /// Whether any plaintext came back yet: with TLS 1.3 a server refuses a missing or bad client certificate after
    /// the handshake, by an alert — which a reset can overtake (the gateway's first command already on its way), so a
    /// connection that ends before its first answer is told as TLS's failure either way, not as a lost connection
    /// (one steady cause, logged once).
    private var answered = false

    /// Resolves `host`, connects and, with `tls`, completes the handshake (certificate and name checked) within
    /// `deadline`.
    init(host: String, port: Int32, tls: RedisTLS?, peer: String, deadline: RedisDeadline) throws(StateStoreError) {
        self.peer = peer
        let addresses: [SocketAddress]
        do {
            addresses = try SocketAddress.resolveAll(host: host, port: UInt16(clamping: port))
        } catch {
            throw StateStoreError(.unavailable, "redis connect to \(peer): \(error)", cause: "dns")
        }
        do {
            session = try tls.map { tls throws(TLSError) in try TLSSession(context: tls.context, serverName: tls.serverName ?? host) }
        } catch {
            throw StateStoreError(.unavailable, "redis connect to \(peer): \(error)", cause: "tls")
        }
        socket = try Self.connect(addresses, deadline, peer: peer)
        // Fully initialised from here: a throw releases the object, and `deinit` closes the socket.
        if let session { try handshake(session, deadline) }
    }

    /// A connected socket to the first of `addresses` that takes the connection (a name may resolve to IPv6 and
    /// IPv4, or to several hosts: as hiredis did, each is tried in turn), within `deadline`; a timeout ends the
    /// attempts (nothing is left for the next address).
    private static func connect(_ addresses: [SocketAddress], _ deadline: RedisDeadline, peer: String) throws(StateStoreError) -> Socket {
        var last = StateStoreError(.unavailable, "redis connect to \(peer): no address", cause: "dns")
        for address in addresses {
            let started: (socket: Socket, connected: Bool)
            do {
                started = try Socket.connect(to: address)
            } catch {
                last = socketError(error.code, doing: "connect to \(peer)")
                continue
            }
            if started.connected { return started.socket }
            do throws(StateStoreError) {
                try waitReady(started.socket.fd, Int16(POLLOUT), deadline, doing: "connect", peer: peer)
            } catch {
                started.socket.close()
                throw error
            }
            let pending = started.socket.pendingError
            if pending == 0 { return started.socket }
            started.socket.close()
            last = socketError(pending, doing: "connect to \(peer)")
        }
        throw last
    }

    deinit { socket.close() }

    /// Sends all of `bytes`.
    func send(_ bytes: UnsafeRawBufferPointer, deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        guard let session else { return try flush(bytes, deadline, doing: what) }
        guard session.write(bytes) else { throw tlsError(session, "TLS write failed", doing: what) }
        try flushCiphertext(session, deadline, doing: what)
    }

    /// Appends at least one byte of the peer's answer to `plaintext`, waiting as long as `deadline` allows.
    func receive(into plaintext: ByteBuffer, deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        guard let session else {
            // The caller asks only once what it read is used up, so wait first: poll + recv, not a recv that
            // would block, a poll and a recv again (system calls are the cost of a Redis round trip here).
            while true {
                try wait(for: Int16(POLLIN), deadline, doing: what)
                plaintext.reserve(16 * 1024)
                switch socket.receive(into: plaintext) {
                case .bytes: return
                case .wouldBlock: continue
                case .eof: throw closedError(doing: what)
                case .failed: throw socketFailure(errno, doing: what)
                }
            }
        }
        while true {
            switch session.read(into: plaintext) {
            case .data(let n) where n > 0:
                answered = true
                try flushCiphertext(session, deadline, doing: what)   // a key update's answer, if any
                return
            case .data, .wantMore:
                try flushCiphertext(session, deadline, doing: what)
                try readCiphertext(session, deadline, doing: what)
            case .closed:
                throw closedError(doing: what)
            case .failed(let why):
                throw tlsError(session, why, doing: what)
            }
        }
    }

    // MARK: - TLS

    private func handshake(_ session: TLSSession, _ deadline: RedisDeadline) throws(StateStoreError) {
        while true {
            let step = session.handshake()
            try flushCiphertext(session, deadline, doing: "TLS handshake")
            switch step {
            case .data: return
            case .wantMore: try readCiphertext(session, deadline, doing: "TLS handshake")
            case .closed: throw closedError(doing: "TLS handshake")
            case .failed(let why): throw tlsError(session, why, doing: "TLS handshake")
            }
        }
    }

    /// Waits for ciphertext (the session needs more), reads what the socket has and feeds it to the session.
    private func readCiphertext(_ session: TLSSession, _ deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        cipherIn.clear()
        cipherIn.reserve(16 * 1024)
        while true {
            try wait(for: Int16(POLLIN), deadline, doing: what)
            switch socket.receive(into: cipherIn) {
            case .bytes:
                session.feed(cipherIn.readable)
                return
            case .wouldBlock: continue
            case .eof: throw closedError(doing: what)
            case .failed: throw socketFailure(errno, doing: what)
            }
        }
    }

    private func flushCiphertext(_ session: TLSSession, _ deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        cipherOut.clear()
        guard session.takeCiphertext(into: cipherOut) > 0 else { return }
        try flush(cipherOut.readable, deadline, doing: what)
    }

    /// A TLS failure: `certificate` when the server's certificate (or its name) was refused, else `tls` with
    /// OpenSSL's reason (`wrong version number`: not a TLS port; `tlsv13 alert certificate required`: the server
    /// wants a client certificate).
    private func tlsError(_ session: TLSSession, _ why: String, doing what: String) -> StateStoreError {
        // Only while certificates are checked: OpenSSL keeps a verify result under SSL_VERIFY_NONE too.
        if session.verifiesPeer, let refused = session.certificateError {
            return StateStoreError(.unavailable, "redis \(what) with \(peer): server certificate refused: \(refused)", cause: "certificate")
        }
        return StateStoreError(.unavailable, "redis \(what) with \(peer): \(why)", cause: "tls")
    }

    // MARK: - Socket

    private func flush(_ bytes: UnsafeRawBufferPointer, _ deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        var offset = 0
        while offset < bytes.count {
            switch socket.send(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .bytes(let n): offset += n
            case .wouldBlock: try wait(for: Int16(POLLOUT), deadline, doing: what)
            case .failed: throw socketFailure(errno, doing: what)
            }
        }
    }

    /// Waits until the socket is ready for `events` (or has an error to report), within what is left of `deadline`.
    private func wait(for events: Int16, _ deadline: RedisDeadline, doing what: String) throws(StateStoreError) {
        try Self.waitReady(socket.fd, events, deadline, doing: what, peer: peer)
    }

    private static func waitReady(_ fd: Int32, _ events: Int16, _ deadline: RedisDeadline, doing what: String, peer: String)
        throws(StateStoreError) {
        var descriptor = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let budget = try remaining(deadline, doing: what, peer: peer)
            let rc = poll(&descriptor, 1, Int32(clamping: budget))
            if rc > 0 { return }
            if rc == 0 || (rc < 0 && errno != EINTR) {
                throw StateStoreError(.timeout, "redis \(what) on \(peer): timed out (state.timeout)", cause: "timeout")
            }
        }
    }

    private static func remaining(_ deadline: RedisDeadline, doing what: String, peer: String) throws(StateStoreError) -> Int {
        do {
            return try deadline.remainingMillis(doing: what)
        } catch {
            throw StateStoreError(.timeout, "redis \(what) on \(peer): timed out (state.timeout)", cause: "timeout")
        }
    }

    private func closedError(doing what: String) -> StateStoreError {
        if let refused = refusedAfterHandshake(doing: what) { return refused }
        return StateStoreError(.unavailable, "redis \(what) on \(peer): connection closed by the server", cause: "connection_lost")
    }

    /// A TLS connection the server ended (closed or reset) after the handshake and before any answer: it refused
    /// the session — in practice a client certificate it requires (TLS 1.3 says so only after the handshake).
    private func refusedAfterHandshake(doing what: String) -> StateStoreError? {
        guard let session, session.isHandshakeDone, !answered else { return nil }
        return StateStoreError(.unavailable, "redis \(what) with \(peer): the server ended the TLS session before answering "
                               + "(does it require a client certificate? state.client_certificate)", cause: "tls")
    }

    private func socketFailure(_ code: Int32, doing what: String) -> StateStoreError {
        if code == ECONNRESET || code == EPIPE, let refused = refusedAfterHandshake(doing: what) { return refused }
        return Self.socketError(code, doing: "\(what) on \(peer)")
    }

    private static func socketError(_ code: Int32, doing what: String) -> StateStoreError {
        let message = String(cString: strerror(code))
        switch code {
        case ECONNREFUSED: return StateStoreError(.unavailable, "redis \(what): \(message)", cause: "refused")
        case ETIMEDOUT: return StateStoreError(.timeout, "redis \(what): \(message)", cause: "timeout")
        case ECONNRESET, EPIPE: return StateStoreError(.unavailable, "redis \(what): \(message)", cause: "connection_lost")
        default: return StateStoreError(.unavailable, "redis \(what): \(message)", cause: "io")
        }
    }
}
