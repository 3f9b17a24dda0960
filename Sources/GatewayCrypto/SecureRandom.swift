internal import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (`RAND_bytes`), for nonces, challenges and key ids.
public enum SecureRandom {
    /// `n` random bytes. Traps if the generator fails: continuing with predictable "random" bytes would be worse
    /// than stopping, and OpenSSL's DRBG fails only when the system entropy source is unusable.
    public static func bytes(_ n: Int) -> [UInt8] {
        precondition(n >= 0 && n <= Int(Int32.max), "SecureRandom.bytes: bad count \(n)")
        guard n > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: n)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(n)) }
        guard ok == 1 else { fatalError(CryptoError(openSSL: "RAND_bytes").description) }
        return out
    }
}
