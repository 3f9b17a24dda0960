internal import COpenSSL

/// Incremental SHA-256 over OpenSSL's EVP interface. One instance per digest; not shared between threads.
public final class SHA256Hasher {
    private let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()!
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    public func update(_ bytes: [UInt8]) { bytes.withUnsafeBytes { update($0) } }

    /// The 32-byte digest; the hasher is reset to hash a new message.
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        out.withUnsafeMutableBufferPointer { _ = EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        return out
    }

    /// SHA-256 of `bytes` in one call.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        let h = SHA256Hasher()
        h.update(bytes)
        return h.finish()
    }
}

/// Lower-case hexadecimal, as digests appear in logs and JSON.
public func hexString(_ bytes: [UInt8]) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
    return String(decoding: out, as: UTF8.self)
}
