import JOSE

/// The token Firebase's SDKs send in place of an App Check token when attestation failed on the device: the
/// base64 of `{"error":"UNKNOWN_ERROR"}` (other upper-case error names accepted too). It is refused like any
/// invalid token, but as `client_attestation_failed`, so a rollout can tell devices that could not attest from
/// forged tokens.
enum AppCheckPlaceholder {
    /// Longest placeholder considered: base64 of `{"error":"` + a name of up to 64 bytes + `"}` (76 bytes) is at most
    /// 104 characters.
    static let maxBytes = 104

    /// Whether `token` is such a placeholder: no '.' (a JWS always has two), standard base64 (padded or not) or
    /// base64url, decoding to exactly `{"error":"NAME"}` with NAME of `A–Z`, `0–9`, `_`.
    static func matches(_ token: UnsafeRawBufferPointer) -> Bool {
        guard token.count >= 16, token.count <= maxBytes else { return false }
        // Standard base64 (padding as long as needed, or none) or base64url (unpadded): the strict decoders.
        let text = String(decoding: token, as: UTF8.self)
        let missing = (4 - text.utf8.count % 4) % 4
        guard let decoded = StandardBase64.decode(text) ?? (missing > 0 && missing < 3 ? StandardBase64.decode(text + String(repeating: "=", count: missing)) : nil)
                ?? Base64URL.decode(text) else { return false }
        let prefix = Array(#"{"error":""#.utf8), suffix = Array(#""}"#.utf8)
        guard decoded.count > prefix.count + suffix.count, decoded.starts(with: prefix), decoded.suffix(2).elementsEqual(suffix) else { return false }
        return decoded[prefix.count..<(decoded.count - suffix.count)].allSatisfy {
            ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "_")
        }
    }
}
