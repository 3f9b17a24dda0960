#if canImport(Glibc)
import Glibc
#endif
import GatewayCLI
import JOSE

/// Reading the `appattest` commands' inputs: files or standard input, base64 or raw CBOR, hex.
extension AppAttestCommand {
    /// Larger inputs are refused before parsing: a real attestation is about 5 KiB, an assertion about 200 bytes.
    static let maxInputBytes = 1 << 20

    /// The bytes of `path`, or of standard input for `-`.
    static func readInput(_ path: String, option: String) throws(UsageError) -> [UInt8] {
        let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw UsageError(message: "\(option) \(path): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw UsageError(message: "\(option) \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
            guard bytes.count <= maxInputBytes else {
                throw UsageError(message: "\(option) \(path): larger than \(maxInputBytes) bytes")
            }
        }
    }

    /// A CBOR object from file bytes holding either the CBOR itself or its base64 text (standard or URL alphabet,
    /// padding and line breaks allowed). Raw App Attest CBOR starts with a map byte (0xA0–0xBF), which is never
    /// base64 text, so the two cannot be confused. Text that is not valid base64 is returned as is and then
    /// fails to parse as CBOR, which is reported as a rejection like any other malformed object.
    static func cborOrBase64(_ bytes: [UInt8]) -> [UInt8] {
        let text = bytes.filter { !isASCIIWhitespace($0) }
        guard !text.isEmpty, text.allSatisfy(isBase64Character) else { return bytes }
        return decodeBase64(String(decoding: text, as: UTF8.self)) ?? bytes
    }

    /// Standard (`+/`, padded) or URL-alphabet base64; nil when it is neither.
    static func decodeBase64(_ text: String) -> [UInt8]? {
        var url = Array(text.utf8).map { c -> UInt8 in
            switch c {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            default: c
            }
        }
        var padding = 0
        while url.last == UInt8(ascii: "="), padding < 2 { url.removeLast(); padding += 1 }
        guard padding == 0 || (url.count + padding) % 4 == 0 else { return nil }
        return url.withUnsafeBytes { Base64URL.decode($0) }
    }

    /// Standard padded base64, as App Attest key IDs are written.
    static func encodeBase64(_ bytes: [UInt8]) -> String {
        let url = Base64URL.encode(bytes).map { c -> Character in
            switch c {
            case "-": "+"
            case "_": "/"
            default: c
            }
        }
        return String(url) + String(repeating: "=", count: (4 - url.count % 4) % 4)
    }

    /// The bytes of an even-length hex string (either case); nil for anything else, including "".
    static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        // Checked first: `UInt8(_:radix:)` alone would also take a sign ("+f").
        guard !digits.isEmpty, digits.count % 2 == 0, digits.allSatisfy("0123456789abcdefABCDEF".utf8.contains) else { return nil }
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    private static func isASCIIWhitespace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\t")
    }

    private static func isBase64Character(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }
}
