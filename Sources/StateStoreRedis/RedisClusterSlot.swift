/// Redis Cluster's key → slot function: CRC16 (XMODEM: polynomial 0x1021, initial value 0, no reflection) of the
/// key's hash tag, modulo 16384 — the function every cluster node applies, so the gateway sends each command to the
/// node that owns its key without a redirect.
///
/// The hash tag (cluster specification, "Hash tags"): if the key holds a `{`, and a `}` follows it with at least one
/// byte between, only the bytes between the first `{` and the first `}` after it are hashed; otherwise the whole key.
enum RedisClusterSlot {
    static let count = 16_384

    /// The slot of `key`'s bytes.
    static func of<Bytes: Collection>(_ key: Bytes) -> Int where Bytes.Element == UInt8 {
        Int(crc16(hashTag(key)) & 0x3FFF)
    }

    static func of(_ key: String) -> Int { of(Array(key.utf8)) }

    /// The part of `key` that decides its slot.
    static func hashTag<Bytes: Collection>(_ key: Bytes) -> Bytes.SubSequence where Bytes.Element == UInt8 {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let start = key.index(after: open)
        guard let close = key[start...].firstIndex(of: UInt8(ascii: "}")), close != start else { return key[...] }
        return key[start..<close]
    }

    /// CRC16-XMODEM, table-driven (the table is built once, from the polynomial).
    static func crc16<Bytes: Sequence>(_ bytes: Bytes) -> UInt16 where Bytes.Element == UInt8 {
        var crc: UInt16 = 0
        for b in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ b)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { (i: Int) -> UInt16 in
        var crc = UInt16(i) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
