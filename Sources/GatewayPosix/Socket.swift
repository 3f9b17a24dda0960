#if canImport(Glibc)
import Glibc
#endif
import CGatewayShims

/// A stream socket's descriptor: how the gateway opens sockets (listen, connect, accept) and, in `Socket+IO.swift`,
/// the calls made on a connected one. Knows nothing of HTTP or TLS. A plain value: whoever holds the connection
/// (`SocketTransport`, a listener) closes it, exactly once.
public struct Socket: Sendable, Equatable {
    public let fd: Int32

    public init(fd: Int32) { self.fd = fd }

    /// A non-blocking listening socket with SO_REUSEADDR and SO_REUSEPORT, so each loop binds its own and a
    /// restart rebinds at once.
    public static func listen(on address: SocketAddress, backlog: Int32 = 1024) throws(PosixError) -> Socket {
        let fd = CGateway_socket(address.family)
        guard fd >= 0 else { throw PosixError("socket") }
        guard CGateway_setReuse(fd) == 0 else { let e = PosixError("setsockopt(SO_REUSEPORT)"); Glibc.close(fd); throw e }
        var storage = address.storage
        let rc = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, address.length) }
        }
        guard rc == 0 else { let e = PosixError("bind(\(address))"); Glibc.close(fd); throw e }
        guard Glibc.listen(fd, backlog) == 0 else { let e = PosixError("listen(\(address))"); Glibc.close(fd); throw e }
        return Socket(fd: fd)
    }

    /// Starts a non-blocking connect; returns the socket and whether the connection is already established.
    public static func connect(to address: SocketAddress) throws(PosixError) -> (socket: Socket, connected: Bool) {
        let fd = CGateway_socket(address.family)
        guard fd >= 0 else { throw PosixError("socket") }
        _ = CGateway_setNoDelay(fd)
        var storage = address.storage
        let rc = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
        }
        if rc == 0 { return (Socket(fd: fd), true) }
        if errno == EINPROGRESS { return (Socket(fd: fd), false) }
        let e = PosixError("connect(\(address))")
        Glibc.close(fd)
        throw e
    }

    /// Accepts one connection on this listening socket (non-blocking, close-on-exec); nil when none is pending or
    /// on a transient error.
    public func accept() -> (socket: Socket, peer: SocketAddress)? {
        var peer = SocketAddress(storage: sockaddr_storage(), length: socklen_t(MemoryLayout<sockaddr_storage>.size))
        let client = CGateway_accept(fd, &peer.storage, &peer.length)
        guard client >= 0 else { return nil }
        _ = CGateway_setNoDelay(client)
        return (Socket(fd: client), peer)
    }

    /// A connected pair of non-blocking local stream sockets (tests drive transports over it).
    public static func pair() throws(PosixError) -> (Socket, Socket) {
        var fds: (Int32, Int32) = (-1, -1)
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let rc = withUnsafeMutableBytes(of: &fds) { socketpair(AF_UNIX, type, 0, $0.baseAddress!.assumingMemoryBound(to: Int32.self)) }
        guard rc == 0 else { throw PosixError("socketpair") }
        return (Socket(fd: fds.0), Socket(fd: fds.1))
    }

    /// The pending error of a socket whose connect finished (0 when connected).
    public var pendingError: Int32 { CGateway_socketError(fd) }

    /// The local address the socket is bound to (tests bind port 0).
    public var localAddress: SocketAddress? {
        var address = SocketAddress(storage: sockaddr_storage(), length: socklen_t(MemoryLayout<sockaddr_storage>.size))
        let rc = withUnsafeMutablePointer(to: &address.storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &address.length) }
        }
        return rc == 0 ? address : nil
    }
}
