import JOSE

/// Standard base64 (RFC 4648 §4: `+ /` and `=` padding) as Apple's device APIs and mobile plugins send key ids,
/// attestations and assertions. Strict like `Base64URL`: one spelling per byte string — padding exactly as long
/// as the length needs, no whitespace, no URL alphabet, unused bits zero.
public enum StandardBase64 {
    /// The bytes of `text`, or nil when it is not canonical padded standard base64.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var url: [UInt8] = []
        url.reserveCapacity(text.utf8.count)
        var padding = 0
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "="): padding += 1; continue
            case UInt8(ascii: "-"), UInt8(ascii: "_"): return nil
            case UInt8(ascii: "+"): url.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): url.append(UInt8(ascii: "_"))
            default: url.append(c)
            }
            if padding > 0 { return nil }   // '=' only at the end
        }
        guard text.utf8.count % 4 == 0, padding == (4 - url.count % 4) % 4 else { return nil }
        return url.withUnsafeBytes { Base64URL.decode($0) }
    }

    /// Padded standard base64 of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = Array(Base64URL.encode(bytes).utf8)
        for i in out.indices {
            if out[i] == UInt8(ascii: "-") { out[i] = UInt8(ascii: "+") } else if out[i] == UInt8(ascii: "_") { out[i] = UInt8(ascii: "/") }
        }
        while out.count % 4 != 0 { out.append(UInt8(ascii: "=")) }
        return String(decoding: out, as: UTF8.self)
    }
}
