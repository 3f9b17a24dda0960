/// The key ID as the app sends it: standard base64 (with `+ /` and `=` padding) of the 32-byte SHA-256 of the key.
enum AppAttestKeyID {
    /// The 32 bytes of `text`, or nil when it is not canonical padded base64 of exactly 32 bytes.
    static func decode(_ text: String) -> [UInt8]? {
        guard let bytes = StandardBase64.decode(text), bytes.count == 32 else { return nil }
        return bytes
    }
}
