/// Something in a configuration file that is valid but probably not what was meant (a `path_prefix` that also
/// matches longer segments). Warnings never stop the gateway: `check-config` prints them with the errors without
/// changing its exit status, and `serve` logs them once at start.
///
/// `description` is the line `check-config` prints: `gateway.yml:24:20: routes[0].match.path_prefix: warning: …`.
public struct ConfigWarning: Sendable, Equatable, CustomStringConvertible {
    /// The place and the message, as an error would carry them (file, 1-based line and column, YAML path).
    public var problem: ConfigError

    public init(file: String, line: Int, column: Int, path: String, message: String) {
        problem = ConfigError(file: file, line: line, column: column, path: path, message: message)
    }

    public var line: Int { problem.line }
    public var column: Int { problem.column }
    public var path: String { problem.path }
    public var message: String { problem.message }

    /// An error's line with `warning: ` before the message.
    public var description: String {
        var marked = problem
        marked.message = "warning: " + problem.message
        return marked.description
    }
}

/// Where each key of a configuration file is: the start of its value, by YAML path (`verifiers.ios.root_ca`,
/// `listeners[0]`), so problems found after loading (a file a key names cannot be read) point at the line that
/// caused them.
public struct ConfigPositions: Sendable, Equatable {
    var marks: [String: YAMLMark] = [:]

    /// The 1-based line and column of `path`'s value; for a path that was not recorded (a default value), the
    /// nearest recorded ancestor's; 1:1 when there is none.
    public func position(of path: String) -> (line: Int, column: Int) {
        var current = Substring(path)
        while true {
            if let mark = marks[String(current)] { return (mark.line, mark.column) }
            guard let cut = current.lastIndex(where: { $0 == "." || $0 == "[" }) else { return (1, 1) }
            current = current[..<cut]
        }
    }

    /// Whether `path` itself was recorded (it was written in the file).
    public func contains(_ path: String) -> Bool { marks[path] != nil }
}
