import GatewayCrypto
/// A compact JWE (RFC 7516 §7.1) with exactly one algorithm pair: `alg` A256KW (RFC 7518 §4.4, AES key wrap of the
/// content key) and `enc` A256GCM (§5.3) — what Play Integrity's classic tokens with developer-managed keys are.
///
/// Strict as `UnverifiedJWS`: five parts, each strict base64url, a protected header that is a JSON object naming
/// exactly these algorithms, no `zip` (compression before encryption is refused, not inflated) and no `crit`; the
/// sizes A256KW and A256GCM fix (a 40-byte wrapped key, a 12-byte IV, a 16-byte tag). The additional
/// authenticated data is the header part's ASCII bytes as received (RFC 7516 §5.1 step 14).
public enum CompactJWE {
    /// Why a token did not decrypt.
    public enum Failure: String, Error, Sendable, Equatable {
        /// Not five well-formed parts, a header that is not a JSON object, a wrong size, `zip` or `crit`.
        case malformed
        /// `alg` or `enc` other than A256KW / A256GCM.
        case unsupportedAlgorithm
        /// The wrapped key did not unwrap under the key-encryption key: a wrong key (or a tampered wrapped key).
        case keyUnwrapFailed
        /// The GCM tag did not verify: a tampered ciphertext, IV, tag or header.
        case decryptionFailed
    }

    /// The plaintext of `token` under the 32-byte key-encryption key `kek`.
    public static func decrypt(_ token: UnsafeRawBufferPointer, kek: [UInt8]) -> Result<[UInt8], Failure> {
        var dots: [Int] = []
        for (k, byte) in token.enumerated() where byte == UInt8(ascii: ".") {
            dots.append(k)
            if dots.count > 4 { return .failure(.malformed) }
        }
        guard dots.count == 4 else { return .failure(.malformed) }
        func part(_ i: Int) -> UnsafeRawBufferPointer {
            let start = i == 0 ? 0 : dots[i - 1] + 1
            let end = i == 4 ? token.count : dots[i]
            return UnsafeRawBufferPointer(rebasing: token[start..<end])
        }
        let headerPart = part(0)
        guard !headerPart.isEmpty, let headerBytes = Base64URL.decode(headerPart),
              let wrappedKey = Base64URL.decode(part(1)), let iv = Base64URL.decode(part(2)),
              let ciphertext = Base64URL.decode(part(3)), let tag = Base64URL.decode(part(4)) else {
            return .failure(.malformed)
        }
        guard case .object(let header)? = try? StrictJSON.parse(headerBytes) else { return .failure(.malformed) }
        // Byte comparison, as for JWS `alg`: Unicode equivalence must play no part in choosing an algorithm.
        guard case .string(let alg)? = header["alg"], case .string(let enc)? = header["enc"] else { return .failure(.malformed) }
        guard alg.utf8.elementsEqual("A256KW".utf8), enc.utf8.elementsEqual("A256GCM".utf8) else {
            return .failure(.unsupportedAlgorithm)
        }
        guard header["zip"] == nil, header["crit"] == nil else { return .failure(.malformed) }
        guard wrappedKey.count == 40, iv.count == 12, tag.count == 16, !ciphertext.isEmpty else { return .failure(.malformed) }
        guard let contentKey = AES256.unwrapKey(wrappedKey, kek: kek) else { return .failure(.keyUnwrapFailed) }
        guard let plaintext = AES256.gcmOpen(ciphertext, key: contentKey, iv: iv, aad: headerPart, tag: tag) else {
            return .failure(.decryptionFailed)
        }
        return .success(plaintext)
    }

    /// String convenience for `decrypt(_: UnsafeRawBufferPointer, kek:)`.
    public static func decrypt(_ token: String, kek: [UInt8]) -> Result<[UInt8], Failure> {
        var token = token
        return token.withUTF8 { decrypt(UnsafeRawBufferPointer($0), kek: kek) }
    }

    /// Encrypts `plaintext` under `kek` with a fresh content key and IV (tests, the dev tool's token minter).
    /// `header` is used as given, so tests can mint tokens that must be refused.
    public static func encrypt(_ plaintext: [UInt8], kek: [UInt8], header: JSONValue = ["alg": "A256KW", "enc": "A256GCM"]) -> String? {
        let contentKey = SecureRandom.bytes(32)
        let iv = SecureRandom.bytes(12)
        let headerPart = Base64URL.encode(Array(JSONEncoding.encode(header).utf8))
        guard let wrapped = AES256.wrapKey(contentKey, kek: kek),
              let sealed = AES256.gcmSeal(plaintext, key: contentKey, iv: iv, aad: Array(headerPart.utf8)) else { return nil }
        return [headerPart, Base64URL.encode(wrapped), Base64URL.encode(iv), Base64URL.encode(sealed.ciphertext),
                Base64URL.encode(sealed.tag)].joined(separator: ".")
    }
}
