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
        try resolveAll(host: host, port: port)[0]
    }

    /// Every address `host` resolves to, in the resolver's order (never empty: no address is an error).
    public static func resolveAll(host: String, port: UInt16) throws(PosixError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, result != nil else {
            throw PosixError("getaddrinfo(\(host)): \(String(cString: gai_strerror(rc)))", code: 0)
        }
        defer { freeaddrinfo(result) }
        var addresses: [SocketAddress] = []
        var next = result
        while let entry = next {
            var address = SocketAddress(storage: sockaddr_storage(), length: entry.pointee.ai_addrlen)
            withUnsafeMutableBytes(of: &address.storage) { dst in
                dst.copyMemory(from: UnsafeRawBufferPointer(start: entry.pointee.ai_addr, count: Int(entry.pointee.ai_addrlen)))
            }
            addresses.append(address)
            next = entry.pointee.ai_next
        }
        return addresses
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
