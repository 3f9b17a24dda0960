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

    public var description: String { "\(call): \(String(cString: strerror(code)))" }
}
