/// Strict base64url (RFC 7515 §2, RFC 4648 §5) as JWS uses it: no padding, no whitespace, canonical encodings only.
///
/// Strictness is a security property here: a decoder that accepted several spellings of the same bytes would let
/// a token be re-encoded without breaking its signature's meaning elsewhere (caches, replay keys, logs), and
/// lenient decoders are a classic source of parser differentials between the gateway and its upstreams.
public enum Base64URL {
    /// Decodes `bytes`; nil on any character outside `A–Z a–z 0–9 - _`, on padding or whitespace, on a length
    /// that is 1 mod 4, or when the unused low bits of the last character are not zero.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        let count = bytes.count
        let remainder = count & 3
        if remainder == 1 { return nil }
        let outCount = (count / 4) * 3 + (remainder == 0 ? 0 : remainder - 1)
        if outCount == 0 { return [] }
        guard let input = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var failed = false
        let out = [UInt8](unsafeUninitializedCapacity: outCount) { buffer, initialized in
            guard let output = buffer.baseAddress else { initialized = 0; failed = true; return }
            decodeTable.withUnsafeBufferPointer { t in
                let table = t.baseAddress!   // 256 entries: every UInt8 indexes it
                var i = 0, o = 0
                // Whole quads; one check per quad (0xFF marks a character outside the alphabet).
                while i + 4 <= count {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    let c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                    if (a | b | c | d) & 0x80 != 0 { failed = true; break }
                    output[o] = a << 2 | b >> 4
                    output[o + 1] = b << 4 | c >> 2
                    output[o + 2] = c << 6 | d
                    i += 4; o += 3
                }
                if !failed && remainder >= 2 {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    let c = remainder == 3 ? table[Int(input[i + 2])] : 0
                    if (a | b | c) & 0x80 != 0 {
                        failed = true
                    } else if remainder == 2 {
                        // 2 characters carry 12 bits for 8: the low 4 bits of the second must be zero ("QQ" yes, "QR" no).
                        if b & 0x0F != 0 { failed = true }
                        output[o] = a << 2 | b >> 4
                        o += 1
                    } else {
                        // 3 characters carry 18 bits for 16: the low 2 bits of the third must be zero.
                        if c & 0x03 != 0 { failed = true }
                        output[o] = a << 2 | b >> 4
                        output[o + 1] = b << 4 | c >> 2
                        o += 2
                    }
                }
                // Every byte up to `o` is initialised; on failure the array is discarded anyway.
                initialized = failed ? 0 : o
            }
        }
        return failed ? nil : out
    }

    /// The 6-bit value of each byte as a base64url character, 0xFF (high bit set) for anything else (`=` and
    /// whitespace included): `value` for all 256 bytes, looked up instead of branched on per character.
    private static let decodeTable: [UInt8] = (0...255).map { value(UInt8($0)) }

    /// Decodes the UTF-8 bytes of `s`; see `decode(_: UnsafeRawBufferPointer)`.
    public static func decode(_ s: String) -> [UInt8]? {
        var s = s
        return s.withUTF8 { decode(UnsafeRawBufferPointer($0)) }
    }

    /// Encodes without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        let table = alphabet.utf8Start
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(table[Int(v >> 18)]); out.append(table[Int(v >> 12 & 63)])
            out.append(table[Int(v >> 6 & 63)]); out.append(table[Int(v & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let v = UInt32(bytes[i]) << 16
            out.append(table[Int(v >> 18)]); out.append(table[Int(v >> 12 & 63)])
        case 2:
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(table[Int(v >> 18)]); out.append(table[Int(v >> 12 & 63)]); out.append(table[Int(v >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The 6-bit value of a base64url character, or 0xFF (high bit set) for anything else, `=` and whitespace included.
    @inline(__always)
    static func value(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c &- UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c &- UInt8(ascii: "a") &+ 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &- UInt8(ascii: "0") &+ 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return 0xFF
        }
    }
}
