/// One problem found in a configuration file, with the place it came from.
///
/// `description` is the line `attest-gateway check-config` prints:
/// `gateway.yml:14:5: routes[1].upstream: unknown upstream "apii"` (the path part is left out when the
/// problem concerns the whole document).
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file name as given to the loader (e.g. `gateway.yml`).
    public var file: String
    /// 1-based line of the offending node.
    public var line: Int
    /// 1-based column of the offending node.
    public var column: Int
    /// YAML path such as `routes[1].upstream` or `limits.max_body_bytes`; `""` for the document itself.
    public var path: String
    /// A short, actionable message; never echoes secret values.
    public var message: String

    public init(file: String, line: Int, column: Int, path: String, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
        self.message = message
    }

    public var description: String {
        path.isEmpty
            ? "\(file):\(line):\(column): \(message)"
            : "\(file):\(line):\(column): \(path): \(message)"
    }
}

/// Every problem found in one configuration file, ordered by position in the file.
///
/// The loader never stops at the first problem, so one `check-config` run shows them all.
public struct ConfigErrors: Error, Sendable, CustomStringConvertible {
    public var errors: [ConfigError]
    /// The warnings found before decoding stopped (`check-config` prints them with the errors).
    public var warnings: [ConfigWarning]

    public init(errors: [ConfigError], warnings: [ConfigWarning] = []) {
        self.errors = errors
        self.warnings = warnings
    }

    /// One line per error.
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
