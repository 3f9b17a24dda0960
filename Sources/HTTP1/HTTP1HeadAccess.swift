import GatewayCore
/// Read helpers shared by ``HTTP1RequestHead`` and ``HTTP1ResponseHead``: they work on a head's `bytes` and
/// `fields` so both head types answer the same way.
enum HTTP1HeadAccess {
    static func fieldName(
        _ bytes: [UInt8], _ fields: [HTTP1Field], _ i: Int, equals lowercasedName: StaticString
    ) -> Bool {
        bytes.withUnsafeBytes { HTTP1Bytes.equalsLowercased($0, fields[i].name, lowercasedName) }
    }

    static func firstValue(_ bytes: [UInt8], _ fields: [HTTP1Field], named lowercasedName: StaticString) -> Range<Int>? {
        bytes.withUnsafeBytes { p in
            for f in fields where HTTP1Bytes.equalsLowercased(p, f.name, lowercasedName) { return f.value }
            return nil
        }
    }

    static func string(_ bytes: [UInt8], _ r: Range<Int>) -> String {
        String(decoding: bytes[r], as: UTF8.self)
    }

    /// Tokens of every Connection field, lower-cased; empty list elements are skipped.
    static func connectionTokens(_ bytes: [UInt8], _ fields: [HTTP1Field]) -> [String] {
        var tokens: [String] = []
        bytes.withUnsafeBytes { p in
            for f in fields where HTTP1Bytes.equalsLowercased(p, f.name, "connection") {
                HTTP1Bytes.forEachListElement(p, f.value) { element in
                    if !element.isEmpty {
                        let lowered = p[element].map { $0 &- 0x41 < 26 ? $0 | 0x20 : $0 }
                        tokens.append(String(decoding: lowered, as: UTF8.self))
                    }
                    return true
                }
            }
        }
        return tokens
    }
}
