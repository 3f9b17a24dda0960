#if canImport(Glibc)
import Glibc
#endif

/// Exit codes of `attest-gateway` and `attest-gateway-dev` (documented in docs/cli.md): 0 success, 1 failure (bad
/// configuration, cannot bind, runtime error), 2 usage error.
public enum ExitCode {
    public static let ok: Int32 = 0
    public static let failure: Int32 = 1
    public static let usage: Int32 = 2
}

/// Parsed `--flag value` options; unknown flags are usage errors.
public struct Options {
    public var values: [String: String] = [:]
    public var flags: Set<String> = []
    public var help = false

    /// `valued`: flags taking a value; `booleans`: flags without one.
    public static func parse(_ args: [String], valued: Set<String>, booleans: Set<String> = []) -> Result<Options, UsageError> {
        var o = Options()
        var i = 0
        while i < args.count {
            let a = args[i]
            if a == "--help" || a == "-h" { o.help = true; i += 1; continue }
            var name = a
            var inline: String? = nil
            if let eq = a.firstIndex(of: "="), a.hasPrefix("--") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            if valued.contains(name) {
                if let inline { o.values[name] = inline; i += 1; continue }
                guard i + 1 < args.count else { return .failure(UsageError(message: "\(name) needs a value")) }
                o.values[name] = args[i + 1]
                i += 2
            } else if booleans.contains(name) && inline == nil {
                o.flags.insert(name)
                i += 1
            } else {
                return .failure(UsageError(message: "unknown option \"\(a)\""))
            }
        }
        return .success(o)
    }
}

public struct UsageError: Error {
    public let message: String
    public init(message: String) { self.message = message }
}

/// Writes `s` and a newline (unless it ends with one) to standard error.
public func printErr(_ s: String) {
    var line = s
    if !line.hasSuffix("\n") { line += "\n" }
    line.withUTF8 { p in _ = write(2, p.baseAddress, p.count) }
}
