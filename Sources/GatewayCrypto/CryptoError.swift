internal import COpenSSL

/// An error from a cryptographic operation: a key that does not parse or is refused by policy, or an OpenSSL failure.
///
/// The description names the operation and, when OpenSSL reported one, its first queued reason. Building the
/// error drains OpenSSL's thread-local error queue so a later, unrelated call never sees a stale entry.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public let description: String

    /// A policy refusal (no OpenSSL call failed).
    package init(policy: String) {
        description = policy
    }

    /// An OpenSSL failure during `operation`; appends the first queued OpenSSL reason and clears the queue.
    package init(openSSL operation: String) {
        let code = ERR_get_error()
        var text = operation
        if code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            buffer.withUnsafeMutableBufferPointer { ERR_error_string_n(code, $0.baseAddress, $0.count) }
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            text += ": " + String(decoding: bytes, as: UTF8.self)
        }
        ERR_clear_error()
        description = text
    }
}
