#if canImport(Glibc)
public import Glibc
#endif

/// A failed system call: what was called and the errno it left.
public struct PosixError: Error, Sendable, CustomStringConvertible {
    public let call: String
    public let code: Int32

    public init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    /// `call: strerror(code)`; a failure that is not an errno (`code` 0: a resolver error, whose text `call` already
    /// carries) is `call` alone, never "…: Success".
    public var description: String { code == 0 ? call : "\(call): \(String(cString: strerror(code)))" }
}
