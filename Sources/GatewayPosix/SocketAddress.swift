#if canImport(Glibc)
import Glibc
#endif
public import CGatewayShims
/// A resolved IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, CustomStringConvertible {
    public var storage: sockaddr_storage
    public var length: socklen_t

    public var family: Int32 { Int32(storage.ss_family) }

    /// Resolves `host` (a literal or a name, resolved once at start-up) and `port`; the first result wins.
    public static func resolve(host: String, port: UInt16) throws(PosixError) -> SocketAddress {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw PosixError("getaddrinfo(\(host)): \(String(cString: gai_strerror(rc)))", code: 0)
        }
        defer { freeaddrinfo(result) }
        var address = SocketAddress(storage: sockaddr_storage(), length: first.pointee.ai_addrlen)
        withUnsafeMutableBytes(of: &address.storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(first.pointee.ai_addrlen)))
        }
        return address
    }

    /// The numeric host, without port (`127.0.0.1`, `::1`).
    public var hostString: String {
        var buf = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var copy = storage
        let ok: Bool = withUnsafePointer(to: &copy) { p in
            if family == AF_INET {
                return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var a = sin.pointee.sin_addr
                    return inet_ntop(AF_INET, &a, &buf, socklen_t(buf.count)) != nil
                }
            } else if family == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var a = sin6.pointee.sin6_addr
                    return inet_ntop(AF_INET6, &a, &buf, socklen_t(buf.count)) != nil
                }
            }
            return false
        }
        guard ok else { return "?" }
        return buf.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// The address in network order: 4 bytes (IPv4) or 16 (IPv6); empty for another family.
    public var addressBytes: [UInt8] {
        var copy = storage
        return withUnsafePointer(to: &copy) { p in
            if family == AF_INET {
                return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    withUnsafeBytes(of: sin.pointee.sin_addr) { Array($0) }
                }
            } else if family == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    withUnsafeBytes(of: sin6.pointee.sin6_addr) { Array($0) }
                }
            }
            return []
        }
    }

    public var port: UInt16 {
        var copy = storage
        return withUnsafePointer(to: &copy) { p in
            if family == AF_INET {
                return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            }
            return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
        }
    }

    public var description: String { family == AF_INET6 ? "[\(hostString)]:\(port)" : "\(hostString):\(port)" }
}

/// Socket system calls the gateway uses, returning descriptors or throwing `PosixError`.
public enum Socket {
    /// A non-blocking listening socket with SO_REUSEADDR and SO_REUSEPORT, so each loop binds its own and a
    /// restart rebinds at once.
    public static func listen(on address: SocketAddress, backlog: Int32 = 1024) throws(PosixError) -> Int32 {
        let fd = CGateway_socket(address.family)
        guard fd >= 0 else { throw PosixError("socket") }
        guard CGateway_setReuse(fd) == 0 else { let e = PosixError("setsockopt(SO_REUSEPORT)"); close(fd); throw e }
        var storage = address.storage
        let rc = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, address.length) }
        }
        guard rc == 0 else { let e = PosixError("bind(\(address))"); close(fd); throw e }
        guard Glibc.listen(fd, backlog) == 0 else { let e = PosixError("listen(\(address))"); close(fd); throw e }
        return fd
    }

    /// Starts a non-blocking connect; returns the descriptor and whether the connection is already established.
    public static func connect(to address: SocketAddress) throws(PosixError) -> (fd: Int32, connected: Bool) {
        let fd = CGateway_socket(address.family)
        guard fd >= 0 else { throw PosixError("socket") }
        _ = CGateway_setNoDelay(fd)
        var storage = address.storage
        let rc = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
        }
        if rc == 0 { return (fd, true) }
        if errno == EINPROGRESS { return (fd, false) }
        let e = PosixError("connect(\(address))")
        close(fd)
        throw e
    }

    /// Accepts one connection (non-blocking, close-on-exec); nil when none is pending or on a transient error.
    public static func accept(_ fd: Int32) -> (fd: Int32, peer: SocketAddress)? {
        var peer = SocketAddress(storage: sockaddr_storage(), length: socklen_t(MemoryLayout<sockaddr_storage>.size))
        let client = CGateway_accept(fd, &peer.storage, &peer.length)
        guard client >= 0 else { return nil }
        _ = CGateway_setNoDelay(client)
        return (client, peer)
    }

    /// The pending error of a socket whose connect finished (0 when connected).
    public static func pendingError(_ fd: Int32) -> Int32 { CGateway_socketError(fd) }

    /// The local address a socket is bound to (tests bind port 0).
    public static func localAddress(_ fd: Int32) -> SocketAddress? {
        var address = SocketAddress(storage: sockaddr_storage(), length: socklen_t(MemoryLayout<sockaddr_storage>.size))
        let rc = withUnsafeMutablePointer(to: &address.storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &address.length) }
        }
        return rc == 0 ? address : nil
    }
}
