#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address block (`10.0.0.0/8`, `::1/128`; a bare address is a single host), for
/// `listeners[].trusted_proxies`. An IPv4 block also matches the IPv4-mapped IPv6 form (`::ffff:10.1.2.3`) of its
/// addresses, since dual-stack sockets report IPv4 peers that way.
public struct CIDRBlock: Sendable, Equatable, CustomStringConvertible {
    /// 4 or 16 bytes, network order, the bits past `prefixLength` cleared.
    public let network: [UInt8]
    public let prefixLength: Int

    /// Parses `address[/prefix]`; nil when either part is malformed (bits set past the prefix are an error too:
    /// `10.0.0.1/8` more likely means a typo than the block it would be rounded to).
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.parseAddress(String(parts[0])) else { return nil }
        let bits = bytes.count * 8
        var prefix = bits
        if parts.count == 2 {
            // Digits only: Int("+8") and Int("-0") parse, but no one means a signed prefix length.
            guard !parts[1].isEmpty, parts[1].count <= 3, parts[1].utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let p = Int(parts[1]), p <= bits else { return nil }
            prefix = p
        }
        guard Self.mask(bytes, prefix) == bytes else { return nil }
        if bytes.count == 16 && prefix >= 96 && bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            // `::ffff:10.0.0.0/104` is an IPv4 block written as IPv6: held as `10.0.0.0/8`, so it matches IPv4 peers
            // (and, like every IPv4 block, their mapped form).
            network = Array(bytes[12..<16])
            prefixLength = prefix - 96
            return
        }
        network = bytes
        prefixLength = prefix
    }

    public var description: String {
        var text: String
        if network.count == 4 {
            text = network.map(String.init).joined(separator: ".")
        } else {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let ok = network.withUnsafeBytes { raw in
                inet_ntop(AF_INET6, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
            }
            let end = buffer.firstIndex(of: 0) ?? buffer.count
            text = ok ? String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        }
        return "\(text)/\(prefixLength)"
    }

    /// Whether `address` (4 or 16 bytes, network order) lies in the block.
    public func contains(_ address: UnsafeRawBufferPointer) -> Bool {
        var bytes = address
        if network.count == 4 && address.count == 16 {
            // ::ffff:a.b.c.d
            for i in 0..<10 where address[i] != 0 { return false }
            guard address[10] == 0xFF && address[11] == 0xFF else { return false }
            bytes = UnsafeRawBufferPointer(rebasing: address[12..<16])
        }
        guard bytes.count == network.count else { return false }
        var remaining = prefixLength
        var i = 0
        while remaining > 0 {
            let take = min(8, remaining)
            let m: UInt8 = take == 8 ? 0xFF : UInt8(0xFF << (8 - take) & 0xFF)
            if bytes[i] & m != network[i] { return false }
            remaining -= take
            i += 1
        }
        return true
    }

    public func contains(_ address: [UInt8]) -> Bool { address.withUnsafeBytes { contains($0) } }

    /// A dotted-quad IPv4 or an IPv6 address (no brackets, no zone), as bytes.
    static func parseAddress(_ text: String) -> [UInt8]? {
        if text.contains(":") {
            var out = [UInt8](repeating: 0, count: 16)
            let ok = out.withUnsafeMutableBytes { inet_pton(AF_INET6, text, $0.baseAddress) == 1 }
            return ok ? out : nil
        }
        // inet_pton's IPv4 form is strict (four decimal parts, no leading zeros' octal reading).
        var out = [UInt8](repeating: 0, count: 4)
        let ok = out.withUnsafeMutableBytes { inet_pton(AF_INET, text, $0.baseAddress) == 1 }
        return ok ? out : nil
    }

    private static func mask(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var out = bytes
        for i in 0..<out.count {
            let keep = max(0, min(8, prefix - i * 8))
            out[i] &= keep == 8 ? 0xFF : UInt8(0xFF << (8 - keep) & 0xFF)
        }
        return out
    }
}
