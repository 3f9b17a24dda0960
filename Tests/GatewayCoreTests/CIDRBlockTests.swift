import GatewayCore
import Testing

/// `CIDRBlock` (`listeners[].trusted_proxies`): what parses, what does not, and which addresses a block contains —
/// IPv4, IPv6, IPv4-mapped IPv6 peers of an IPv4 block, /0 and single hosts.
@Suite("CIDR blocks")
struct CIDRBlockTests {
    // MARK: Parsing

    @Test(arguments: [
        ("10.0.0.0/8", [10, 0, 0, 0], 8, "10.0.0.0/8"),
        ("127.0.0.1/32", [127, 0, 0, 1], 32, "127.0.0.1/32"),
        ("127.0.0.1", [127, 0, 0, 1], 32, "127.0.0.1/32"),
        ("0.0.0.0/0", [0, 0, 0, 0], 0, "0.0.0.0/0"),
        ("192.168.128.0/17", [192, 168, 128, 0], 17, "192.168.128.0/17"),
        ("255.255.255.255/32", [255, 255, 255, 255], 32, "255.255.255.255/32"),
        ("10.0.0.0/08", [10, 0, 0, 0], 8, "10.0.0.0/8"),
    ] as [(String, [UInt8], Int, String)])
    func ipv4BlocksParse(_ text: String, _ network: [UInt8], _ prefix: Int, _ description: String) throws {
        let block = try #require(CIDRBlock(text))
        #expect(block.network == network)
        #expect(block.prefixLength == prefix)
        #expect(block.description == description)
        #expect(CIDRBlock(block.description) == block, "the description parses back")
    }

    @Test(arguments: [
        ("::1/128", v6([15: 1]), 128, "::1/128"),
        ("::1", v6([15: 1]), 128, "::1/128"),
        ("::/0", v6(), 0, "::/0"),
        ("fd00::/8", v6([0: 0xFD]), 8, "fd00::/8"),
        ("FD00::/8", v6([0: 0xFD]), 8, "fd00::/8"),
        ("2001:db8::/32", v6([0: 0x20, 1: 0x01, 2: 0x0D, 3: 0xB8]), 32, "2001:db8::/32"),
        ("fe80::/10", v6([0: 0xFE, 1: 0x80]), 10, "fe80::/10"),
    ] as [(String, [UInt8], Int, String)])
    func ipv6BlocksParse(_ text: String, _ network: [UInt8], _ prefix: Int, _ description: String) throws {
        let block = try #require(CIDRBlock(text))
        #expect(block.network == network)
        #expect(block.prefixLength == prefix)
        #expect(block.description == description)
        #expect(CIDRBlock(block.description) == block, "the description parses back")
    }

    @Test(arguments: [
        "", "/", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8/8", "10.0.0.0/ 8",
        "10.0.0.0 /8", " 10.0.0.0/8", "10.0.0.0/8 ", "10.0.0.0/0008", "10.0.0.0/x", "10.0.0/8", "10.0.0.0.0/8",
        "256.0.0.0/8", "010.0.0.0/8", "10.0.0.0x/8", "0x0a.0.0.0/8", "10.0.0.0/1e1", "::/129", "::1/1280", "[::1]/128",
        "[::1]", "::1%eth0/128", "fe80::1%1", ":::/0", "1:2:3:4:5:6:7:8:9/128", "g::/16", "localhost", "10.0.0.0/８",
    ])
    func malformedBlocksAreRefused(_ text: String) {
        #expect(CIDRBlock(text) == nil, "\(text) parsed")
    }

    /// `-0` is not a prefix length anyone writes on purpose; `Int("-0")` is 0, so it has to be refused explicitly.
    @Test func aNegativeZeroPrefixIsRefused() {
        #expect(CIDRBlock("10.0.0.0/-0") == nil)
        #expect(CIDRBlock("::/-0") == nil)
    }

    @Test(arguments: [
        "10.0.0.1/8", "11.0.0.0/7", "192.168.1.1/24", "192.168.1.128/24", "127.0.0.1/31", "0.0.0.1/0",
        "128.0.0.0/0", "192.168.0.1/23", "::1/127", "::1/0", "fd00::1/8", "2001:db8::1/32", "fe80::/8", "ffff::/15",
    ])
    func bitsSetPastThePrefixAreRefused(_ text: String) {
        #expect(CIDRBlock(text) == nil, "\(text) parsed (a typo, not the block it would round to)")
    }

    // MARK: Containment

    @Test func ipv4BlockContainsItsAddressesOnly() throws {
        let block = try #require(CIDRBlock("10.0.0.0/8"))
        #expect(block.contains([10, 0, 0, 0]))
        #expect(block.contains([10, 1, 2, 3]))
        #expect(block.contains([10, 255, 255, 255]))
        #expect(!block.contains([11, 0, 0, 0]))
        #expect(!block.contains([9, 255, 255, 255]))
        #expect(!block.contains([138, 0, 0, 0]), "the top bit counts")

        let odd = try #require(CIDRBlock("192.168.128.0/17"))
        #expect(odd.contains([192, 168, 128, 0]) && odd.contains([192, 168, 255, 255]))
        #expect(!odd.contains([192, 168, 127, 255]) && !odd.contains([192, 169, 128, 0]))

        let host = try #require(CIDRBlock("127.0.0.1"))
        #expect(host.contains([127, 0, 0, 1]))
        #expect(!host.contains([127, 0, 0, 2]) && !host.contains([127, 0, 0, 0]))
    }

    @Test func ipv6BlockContainsItsAddressesOnly() throws {
        let block = try #require(CIDRBlock("2001:db8::/32"))
        #expect(block.contains(v6([0: 0x20, 1: 0x01, 2: 0x0D, 3: 0xB8])))
        #expect(block.contains(v6([0: 0x20, 1: 0x01, 2: 0x0D, 3: 0xB8, 4: 0xFF, 15: 0xFF])))
        #expect(!block.contains(v6([0: 0x20, 1: 0x01, 2: 0x0D, 3: 0xB9])))
        #expect(!block.contains(v6([0: 0x20, 1: 0x01, 2: 0x0D, 3: 0xB7])))

        let tenBits = try #require(CIDRBlock("fe80::/10"))
        #expect(tenBits.contains(v6([0: 0xFE, 1: 0x80])) && tenBits.contains(v6([0: 0xFE, 1: 0xBF, 15: 1])))
        #expect(!tenBits.contains(v6([0: 0xFE, 1: 0xC0])) && !tenBits.contains(v6([0: 0xFE, 1: 0x7F])))

        let loopback = try #require(CIDRBlock("::1"))
        #expect(loopback.contains(v6([15: 1])))
        #expect(!loopback.contains(v6([15: 2])) && !loopback.contains(v6()))
    }

    /// A dual-stack socket reports an IPv4 peer as `::ffff:a.b.c.d`; an IPv4 block must still match it, and
    /// nothing else that merely ends in the same four bytes.
    @Test func ipv4BlockContainsTheIPv4MappedFormOfItsAddresses() throws {
        let block = try #require(CIDRBlock("10.0.0.0/8"))
        #expect(block.contains(mapped(10, 1, 2, 3)))
        #expect(!block.contains(mapped(11, 1, 2, 3)))
        #expect(!block.contains(v6([12: 10, 13: 1, 14: 2, 15: 3])), "IPv4-compatible (::a.b.c.d) is not mapped")
        #expect(!block.contains(v6([10: 0xFF, 11: 0xFE, 12: 10])), "::fffe:… is not mapped")
        #expect(!block.contains(v6([0: 0x20, 10: 0xFF, 11: 0xFF, 12: 10])), "a global address ending in ffff:10.x")
        #expect(!block.contains(v6([9: 1, 10: 0xFF, 11: 0xFF, 12: 10])))

        let host = try #require(CIDRBlock("127.0.0.1/32"))
        #expect(host.contains(mapped(127, 0, 0, 1)))
        #expect(!host.contains(mapped(127, 0, 0, 2)))
    }

    /// An IPv4 block written in its mapped IPv6 form is the IPv4 block: it matches IPv4 peers and their mapped form.
    @Test func aMappedIPv6BlockIsItsIPv4Block() throws {
        let block = try #require(CIDRBlock("::ffff:10.0.0.0/104"))
        #expect(block == CIDRBlock("10.0.0.0/8"))
        #expect(block.description == "10.0.0.0/8")
        #expect(block.contains([10, 9, 8, 7]) && block.contains(mapped(10, 9, 8, 7)))
        #expect(!block.contains([11, 0, 0, 1]))
        #expect(CIDRBlock("::fffe:0:0/95")?.network.count == 16,
                "shorter than /96 covers more than the mapped range: stays IPv6")
    }

    @Test func zeroPrefixBlocksContainTheirWholeFamily() throws {
        let anyV4 = try #require(CIDRBlock("0.0.0.0/0"))
        for address: [UInt8] in [[0, 0, 0, 0], [255, 255, 255, 255], [10, 0, 0, 1], [128, 0, 0, 0]] {
            #expect(anyV4.contains(address))
        }
        #expect(anyV4.contains(mapped(203, 0, 113, 9)), "mapped IPv4 peers too")
        #expect(!anyV4.contains(v6([15: 1])), "not IPv6 addresses")

        let anyV6 = try #require(CIDRBlock("::/0"))
        #expect(anyV6.contains(v6()) && anyV6.contains(v6([0: 0xFF, 15: 0xFF])) && anyV6.contains(mapped(10, 0, 0, 1)))
        #expect(!anyV6.contains([10, 0, 0, 1]), "not a 4-byte IPv4 address")
    }

    @Test func addressesOfTheWrongLengthAreNeverContained() throws {
        let v4 = try #require(CIDRBlock("0.0.0.0/0"))
        let v6Block = try #require(CIDRBlock("::/0"))
        for address: [UInt8] in [[], [10], [10, 0, 0], [10, 0, 0, 0, 0], [UInt8](repeating: 0, count: 15),
                                 [UInt8](repeating: 0, count: 17)] {
            #expect(!v4.contains(address), "\(address.count) bytes")
            #expect(!v6Block.contains(address), "\(address.count) bytes")
        }
    }

    /// Every prefix length of one address: the block contains the address, and flipping the first bit past the
    /// prefix stays inside while flipping the last bit of the prefix leaves it.
    @Test func everyPrefixLengthSplitsAtItsBit() throws {
        let v4: [UInt8] = [0b1010_1100, 0b0001_0000, 0b1111_0000, 0b0000_1111]
        let v6Address: [UInt8] = (0..<16).map { UInt8(truncatingIfNeeded: 0xA5 &+ $0 &* 37) }
        for address in [v4, v6Address] {
            let bits = address.count * 8
            for prefix in 0...bits {
                let network = masked(address, prefix)
                let text = (address.count == 4 ? network.map(String.init).joined(separator: ".") : v6Text(network)) + "/\(prefix)"
                let block = try #require(CIDRBlock(text), "\(text)")
                #expect(block.prefixLength == prefix && block.network == network)
                #expect(block.contains(address), "\(text) contains its own address")
                if prefix < bits { #expect(block.contains(flip(address, bit: prefix)), "\(text): bit \(prefix) is free") }
                if prefix > 0 { #expect(!block.contains(flip(address, bit: prefix - 1)), "\(text): bit \(prefix - 1) is fixed") }
            }
        }
    }
}

/// 16 bytes, zero but for the ones given (index: byte).
private func v6(_ bytes: [Int: UInt8] = [:]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 16)
    for (i, b) in bytes { out[i] = b }
    return out
}

private func mapped(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> [UInt8] {
    v6([10: 0xFF, 11: 0xFF, 12: a, 13: b, 14: c, 15: d])
}

private func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
    address.enumerated().map { i, byte in
        let keep = max(0, min(8, prefix - i * 8))
        return keep == 0 ? 0 : byte & UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
    }
}

private func flip(_ address: [UInt8], bit: Int) -> [UInt8] {
    var out = address
    out[bit / 8] ^= 0x80 >> UInt8(bit % 8)
    return out
}

/// Full, uncompressed hex groups: `inet_pton` reads them, whatever the block's own description prints.
private func v6Text(_ bytes: [UInt8]) -> String {
    stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        .joined(separator: ":")
}
