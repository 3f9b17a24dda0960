import Foundation

/// `${NAME}` and `${NAME:-default}` in scalar values (CONFIG.md: "Any scalar value may use …"), expanded from the
/// environment when the file is read, before any value is decoded: `port: ${PORT:-8080}` is an integer when it
/// expands to one. Mapping keys are not expanded. `$${` is a literal `${`; a `$` not followed by `{` is itself.
///
/// An unset variable without a default, or a `${` that is not a reference, is an error at the scalar's line.
/// Expanded values never appear in messages: the context writes the reference back (`${REDIS_PASSWORD}`) wherever
/// an error or warning would quote one.
public enum ConfigExpansion {
    public typealias Environment = @Sendable (String) -> String?

    /// The process environment.
    public static let process: Environment = { name in ProcessInfo.processInfo.environment[name] }

    /// `node` with every scalar value under it expanded (mapping keys are kept as written); `path` is its YAML path.
    static func expand(_ node: YAMLNode, context: ConfigContext, environment: Environment, path: String = "") -> YAMLNode {
        var node = node
        switch node.content {
        case .scalar(let text, let plain):
            guard text.contains("$") else { return node }
            switch expand(text, environment: environment) {
            case .success(let expanded):
                guard expanded != text else { return node }
                node.content = .scalar(expanded, plain: plain)
                node.expandedFrom = text
                context.noteExpanded(expanded, from: text)
            case .failure(let problem):
                context.report(problem.message, at: node, path: path)
            }
        case .sequence(let items):
            node.content = .sequence(items.enumerated().map { i, item in
                expand(item, context: context, environment: environment, path: indexPath(path, i))
            })
        case .mapping(let pairs):
            node.content = .mapping(pairs.map { pair in
                YAMLNode.Pair(key: pair.key, value: expand(pair.value, context: context, environment: environment,
                                                           path: joinPath(path, pair.key.scalarText ?? "?")))
            })
        }
        return node
    }

    struct Problem: Error, Equatable {
        let message: String
    }

    /// `text` with its references replaced.
    static func expand(_ text: String, environment: Environment) -> Result<String, Problem> {
        var out = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            out += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            if after.hasPrefix("${") {                      // `$${` → a literal `${`
                out += "${"
                rest = after.dropFirst(2)
                continue
            }
            guard after.hasPrefix("{") else {               // a lone `$`
                out += "$"
                rest = after
                continue
            }
            guard let close = after.firstIndex(of: "}") else {
                return .failure(Problem(message: "unterminated ${ (use ${NAME} or ${NAME:-default}; $${ for a literal ${)"))
            }
            let reference = after[after.index(after: after.startIndex)..<close]
            let name: Substring, fallback: Substring?
            if let marker = reference.range(of: ":-") {
                name = reference[..<marker.lowerBound]
                fallback = reference[marker.upperBound...]
            } else {
                name = reference
                fallback = nil
            }
            guard isVariableName(name) else {
                return .failure(Problem(message: "invalid reference ${\(reference.prefix(40))} (use ${NAME} or ${NAME:-default}: "
                                        + "letters, digits and _, not starting with a digit)"))
            }
            if let value = environment(String(name)) {
                out += value
            } else if let fallback {
                out += fallback
            } else {
                return .failure(Problem(message: "environment variable \(name) is not set (use ${\(name):-default} for a default)"))
            }
            rest = after[after.index(after: close)...]
        }
        return .success(out + rest)
    }

    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }
    }
}
