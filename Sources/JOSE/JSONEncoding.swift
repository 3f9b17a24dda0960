/// Compact JSON output, for minting tokens and key sets in dev tools and tests (not on the verification path).
///
/// Objects keep member order, numbers their literal text, and non-ASCII characters are written as UTF-8, so
/// `StrictJSON.parse(encode(v)) == v` for every value the parser produces.
public enum JSONEncoding {
    /// `s` as a quoted JSON string: `"` and `\` escaped, control characters as `\n`-style or `\u00XX` escapes.
    public static func string(_ s: String) -> String {
        var out: [UInt8] = []
        appendString(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `v` as compact JSON text (no whitespace).
    public static func encode(_ v: JSONValue) -> String {
        var out: [UInt8] = []
        append(v, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private static func append(_ v: JSONValue, to out: inout [UInt8]) {
        switch v {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.literal.utf8)
        case .string(let s): appendString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (k, element) in elements.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                append(element, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (k, member) in object.members.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                appendString(member.0, to: &out)
                out.append(UInt8(ascii: ":"))
                append(member.1, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func appendString(_ s: String, to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
            case 0x0A: out.append(contentsOf: "\\n".utf8)
            case 0x0D: out.append(contentsOf: "\\r".utf8)
            case 0x09: out.append(contentsOf: "\\t".utf8)
            case 0x00..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex.utf8Start[Int(b >> 4)])
                out.append(hex.utf8Start[Int(b & 0xF)])
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
