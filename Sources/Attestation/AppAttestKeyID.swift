import JOSE

/// The key ID as the app sends it: standard base64 (with `+ /` and `=` padding) of the 32-byte SHA-256 of the key.
enum AppAttestKeyID {
    /// The 32 bytes of `text`, or nil when it is not canonical padded base64 of exactly 32 bytes.
    static func decode(_ text: String) -> [UInt8]? {
        // 32 bytes encode to 43 characters plus one '='. Reject the URL alphabet so one key has one spelling.
        guard text.utf8.count == 44, text.hasSuffix("="), !text.dropLast().contains("="),
              !text.contains("-"), !text.contains("_") else { return nil }
        let url = String(text.dropLast()).replacingCharacters("+", with: "-").replacingCharacters("/", with: "_")
        guard let bytes = Base64URL.decode(url), bytes.count == 32 else { return nil }
        return bytes
    }
}

extension String {
    fileprivate func replacingCharacters(_ old: Character, with new: Character) -> String {
        String(map { $0 == old ? new : $0 })
    }
}
