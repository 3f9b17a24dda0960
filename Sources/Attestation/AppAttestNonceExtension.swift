/// The leaf certificate extension 1.2.840.113635.100.8.2 that certifies the attestation nonce.
///
/// Its DER is `SEQUENCE { [1] EXPLICIT OCTET STRING (32 bytes) }` — `30 24 A1 22 04 20 …`. The reader is strict
/// (definite short lengths, nothing left over at any level): the bytes are Apple-signed, so anything else is not
/// an Apple certificate we understand and is rejected rather than guessed at.
enum AppAttestNonceExtension {
    static let oid = "1.2.840.113635.100.8.2"

    /// The 32-byte nonce inside `der`, or nil.
    static func nonce(fromExtensionDER der: [UInt8]) -> [UInt8]? {
        guard let sequence = element(der[...], tag: 0x30), sequence.rest.isEmpty,
              let tagged = element(sequence.content, tag: 0xA1), tagged.rest.isEmpty,
              let octets = element(tagged.content, tag: 0x04), octets.rest.isEmpty,
              octets.content.count == 32 else { return nil }
        return Array(octets.content)
    }

    /// One TLV with tag `tag` at the start of `bytes`: its content and what follows. Lengths up to 0x7F only, as
    /// nothing in this structure is longer.
    private static func element(_ bytes: ArraySlice<UInt8>, tag: UInt8) -> (content: ArraySlice<UInt8>, rest: ArraySlice<UInt8>)? {
        guard bytes.count >= 2, bytes.first == tag else { return nil }
        let length = Int(bytes[bytes.startIndex + 1])
        guard length < 0x80 else { return nil }
        let start = bytes.startIndex + 2
        guard bytes.endIndex - start >= length else { return nil }
        return (bytes[start..<start + length], bytes[(start + length)...])
    }
}
