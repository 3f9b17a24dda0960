/// Something in a configuration file that is valid but probably not what was meant (a `path_prefix` that also
/// matches longer segments). Warnings never stop the gateway: `check-config` prints them with the errors without
/// changing its exit status, and `serve` logs them once at start.
///
/// `description` is the line `check-config` prints: `gateway.yml:24:20: routes[0].match.path_prefix: warning: …`.
public struct ConfigWarning: Sendable, Equatable, CustomStringConvertible {
    public var file: String
    /// 1-based line and column of the node the warning is about.
    public var line: Int
    public var column: Int
    /// YAML path such as `routes[0].match.path_prefix`.
    public var path: String
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
            ? "\(file):\(line):\(column): warning: \(message)"
            : "\(file):\(line):\(column): \(path): warning: \(message)"
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
