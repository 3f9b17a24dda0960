internal import COpenSSL

/// Standard padded base64 (RFC 4648 §4, `+ /` and `=`, no line breaks), the spelling App Attest key IDs,
/// attestation objects and assertions travel in (`EVP_EncodeBlock`).
public enum StandardBase64 {
    public static func encode(_ bytes: [UInt8]) -> String {
        guard !bytes.isEmpty else { return "" }
        // 4 output characters per 3 input bytes, rounded up, plus the NUL EVP_EncodeBlock writes.
        var out = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let written = out.withUnsafeMutableBufferPointer { o in
            bytes.withUnsafeBufferPointer { EVP_EncodeBlock(o.baseAddress, $0.baseAddress, Int32($0.count)) }
        }
        return String(decoding: out.prefix(Int(written)), as: UTF8.self)
    }
}
