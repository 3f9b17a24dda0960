import Foundation

/// Collects errors, warnings and the positions of keys while one file is decoded, and resolves the relative paths
/// it contains.
///
/// Loop-confined: one instance per `ConfigLoader.load` call, never shared.
final class ConfigContext {
    let file: String
    let baseDirectory: String
    private(set) var errors: [ConfigError] = []
    private(set) var warnings: [ConfigWarning] = []
    /// Where each key's value starts, by YAML path (recorded by `MappingReader`).
    private(set) var positions = ConfigPositions()
    /// Expanded values (from the environment) and the text that named them, longest first: written back into any
    /// message that would quote one, so no error or warning prints a secret.
    private var expanded: [(value: String, written: String)] = []

    init(file: String, baseDirectory: String) {
        self.file = file
        self.baseDirectory = baseDirectory
    }

    func report(_ message: String, at mark: YAMLMark, path: String) {
        errors.append(ConfigError(file: file, line: mark.line, column: mark.column, path: path, message: redacted(message)))
    }

    func report(_ message: String, at node: YAMLNode, path: String) {
        report(redacted(message, node: node), at: node.mark, path: path)
    }

    /// A warning: valid, but probably not what was meant. Never makes the load fail.
    func warn(_ message: String, at node: YAMLNode, path: String) {
        warnings.append(ConfigWarning(file: file, line: node.mark.line, column: node.mark.column, path: path,
                                      message: redacted(redacted(message, node: node))))
    }

    /// Records a value `${…}` expansion produced from `written`.
    func noteExpanded(_ value: String, from written: String) {
        guard !value.isEmpty else { return }
        expanded.append((value, written))
        expanded.sort { $0.value.count > $1.value.count }
    }

    /// `message` with the expanded value of `node` (whatever its length) written back as it was written.
    private func redacted(_ message: String, node: YAMLNode) -> String {
        guard let written = node.expandedFrom, let value = node.scalarText, !value.isEmpty else { return message }
        return message.replacingOccurrences(of: value, with: written)
    }

    /// `message` with every expanded value of 6 characters or more written back (a message about one key may quote
    /// another's value; shorter ones are left, or "must be at least 1" could turn into a reference).
    private func redacted(_ message: String) -> String {
        var out = message
        for e in expanded where e.value.count >= 6 && out.contains(e.value) {
            out = out.replacingOccurrences(of: e.value, with: e.written)
        }
        return out
    }

    /// Records where `path` is written (the first record of a path wins, like the first of duplicate keys).
    func record(_ path: String, at mark: YAMLMark) {
        if positions.marks[path] == nil { positions.marks[path] = mark }
    }

    /// Warnings ordered by line then column.
    var sortedWarnings: [ConfigWarning] {
        warnings.enumerated().sorted { a, b in
            (a.element.line, a.element.column, a.offset) < (b.element.line, b.element.column, b.offset)
        }.map(\.element)
    }

    /// Errors ordered by line then column; equal positions keep their discovery order.
    var sortedErrors: [ConfigError] {
        errors.enumerated().sorted { a, b in
            (a.element.line, a.element.column, a.offset) < (b.element.line, b.element.column, b.offset)
        }.map(\.element)
    }

    /// A relative path is taken relative to the directory of the configuration file, so the gateway finds its
    /// files wherever it is started from.
    func resolve(_ path: String) -> String {
        if path.hasPrefix("/") || baseDirectory.isEmpty { return path }
        var base = baseDirectory
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        return base == "/" ? "/" + path : base + "/" + path
    }
}

/// Joins YAML path segments: `key` under `""` is `key`, under `limits` is `limits.key`; `[i]` appends directly.
func joinPath(_ parent: String, _ key: String) -> String {
    parent.isEmpty ? key : parent + "." + key
}

func indexPath(_ parent: String, _ index: Int) -> String {
    parent + "[\(index)]"
}
