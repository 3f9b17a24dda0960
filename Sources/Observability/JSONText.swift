public import GatewayCore
/// JSON string escaping for log lines and error bodies, byte-level.
public enum JSONText {
    /// Appends `bytes` escaped for the inside of a JSON string. Bytes above 0x7F are written as `\u00XX` so a line
    /// stays valid JSON whatever a client sent.
    public static func appendEscaped(_ bytes: UnsafeRawBufferPointer, to b: ByteBuffer) {
        // Fast path: paths and methods rarely need escaping; copy them whole.
        var clean = true
        for byte in bytes where byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            clean = false
            break
        }
        if clean { b.append(bytes); return }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): b.append("\\\"" as StaticString)
            case UInt8(ascii: "\\"): b.append("\\\\" as StaticString)
            case 0x20..<0x7F: b.append(byte: byte)
            default:
                b.append("\\u00" as StaticString)
                let hex: StaticString = "0123456789abcdef"
                b.append(byte: hex.utf8Start[Int(byte >> 4)])
                b.append(byte: hex.utf8Start[Int(byte & 0xF)])
            }
        }
    }

    /// `s` as a quoted JSON string.
    public static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let h = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
