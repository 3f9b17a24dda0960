/// Reads one YAML mapping of the configuration: typed getters that report every problem (wrong type, bad
/// format, out of range, missing required key, unknown or duplicate key) to the `ConfigContext` with the
/// node's position and YAML path, and return nil so decoding can carry on and find the next problem.
///
/// A key whose value is null (`key:`, `key: ~`) counts as absent for optional keys.
struct MappingReader {
    let context: ConfigContext
    let node: YAMLNode
    let path: String
    /// First occurrence of each key (later duplicates are reported and ignored).
    private var entries: [String: YAMLNode.Pair] = [:]
    private var order: [String] = []

    /// Nil (after reporting `expected a mapping`) when `node` is not a mapping.
    init?(_ node: YAMLNode, path: String, context: ConfigContext) {
        guard case .mapping(let pairs) = node.content else {
            context.report("expected a mapping, got \(node.kindDescription)", at: node, path: path)
            return nil
        }
        self.context = context
        self.node = node
        self.path = path
        context.record(path, at: node.mark)
        for pair in pairs {
            guard let key = pair.key.scalarText, !pair.key.isNull else {
                context.report("expected a string key, got \(pair.key.kindDescription)", at: pair.key, path: path)
                continue
            }
            if entries[key] != nil {
                context.report("duplicate key \"\(key)\"", at: pair.key, path: path)
                continue
            }
            entries[key] = pair
            order.append(key)
            context.record(joinPath(path, key), at: pair.value.mark)
        }
    }

    /// Keys in file order, with their key and value nodes.
    var pairs: [(name: String, pair: YAMLNode.Pair)] { order.map { ($0, entries[$0]!) } }

    /// Reports each key not in `allowed`, at the key's position.
    func rejectUnknownKeys(allowed: [String]) {
        for key in order where !allowed.contains(key) {
            context.report("unknown key \"\(key)\"", at: entries[key]!.key, path: path)
        }
    }

    func childPath(_ key: String) -> String { joinPath(path, key) }

    /// The value node, or nil when the key is absent or null.
    func value(_ key: String) -> YAMLNode? {
        guard let value = entries[key]?.value, !value.isNull else { return nil }
        return value
    }

    func keyNode(_ key: String) -> YAMLNode? { entries[key]?.key }

    func contains(_ key: String) -> Bool { value(key) != nil }

    /// The value for a required key; reports `missing required key` (at this mapping) when absent, or
    /// `expected …` at the value when it is null.
    func required(_ key: String, expected: String) -> YAMLNode? {
        if let value = value(key) { return value }
        if let present = entries[key]?.value {
            context.report("expected \(expected)", at: present, path: childPath(key))
        } else {
            reportMissing(key)
        }
        return nil
    }

    func reportMissing(_ key: String) {
        context.report("missing required key \"\(key)\"", at: node, path: path)
    }

    func report(_ message: String, key: String) {
        let at = value(key) ?? entries[key]?.value ?? node
        context.report(message, at: at, path: childPath(key))
    }

    // MARK: - Typed getters

    func string(_ key: String, required isRequired: Bool = false) -> String? {
        guard let node = isRequired ? required(key, expected: "a string") : value(key) else { return nil }
        guard let text = node.scalarText else {
            context.report("expected a string, got \(node.kindDescription)", at: node, path: childPath(key))
            return nil
        }
        return text
    }

    /// A non-empty string.
    func nonEmptyString(_ key: String, required isRequired: Bool = false) -> String? {
        guard let text = string(key, required: isRequired) else { return nil }
        guard !text.isEmpty else {
            report("must not be empty", key: key)
            return nil
        }
        return text
    }

    /// A file path, resolved against the configuration file's directory.
    func filePath(_ key: String, required isRequired: Bool = false) -> String? {
        nonEmptyString(key, required: isRequired).map(context.resolve)
    }

    /// `builtin` or a PEM file path (resolved).
    func builtinOrPath(_ key: String) -> String? {
        guard let text = nonEmptyString(key) else { return nil }
        return text == "builtin" ? text : context.resolve(text)
    }

    func bool(_ key: String) -> Bool? {
        guard let node = value(key) else { return nil }
        guard let flag = node.boolValue else {
            context.report("expected a boolean (true or false)", at: node, path: childPath(key))
            return nil
        }
        return flag
    }

    func int(_ key: String, min: Int? = nil, max: Int? = nil, required isRequired: Bool = false) -> Int? {
        guard let node = isRequired ? required(key, expected: "an integer") : value(key) else { return nil }
        guard let number = node.intValue else {
            context.report("expected an integer", at: node, path: childPath(key))
            return nil
        }
        if let min, number < min {
            context.report("must be at least \(min)", at: node, path: childPath(key))
            return nil
        }
        if let max, number > max {
            context.report("must be at most \(max)", at: node, path: childPath(key))
            return nil
        }
        return number
    }

    /// Milliseconds; `positive` rejects `0s`, `max` is an upper bound in milliseconds shown as `maxText`.
    func duration(_ key: String, positive: Bool = true, max: (millis: Int, text: String)? = nil) -> Int? {
        guard let text = string(key) else { return nil }
        guard let millis = ConfigValue.parseDuration(text) else {
            report("invalid duration \"\(text)\" (use 500ms, 30s, 5m, 6h)", key: key)
            return nil
        }
        if positive && millis == 0 {
            report("must be greater than 0", key: key)
            return nil
        }
        if let max, millis > max.millis {
            report("must be at most \(max.text)", key: key)
            return nil
        }
        return millis
    }

    /// Bytes; `positive` rejects 0.
    func size(_ key: String, positive: Bool = true) -> Int? {
        guard let text = string(key) else { return nil }
        guard let bytes = ConfigValue.parseSize(text) else {
            report("invalid size \"\(text)\" (use 512, 64KiB, 10MiB, 1GiB)", key: key)
            return nil
        }
        if positive && bytes == 0 {
            report("must be greater than 0", key: key)
            return nil
        }
        return bytes
    }

    /// One of `cases`, by raw value: `invalid mode "x" (use enforce or monitor)`.
    func oneOf<E: RawRepresentable>(_ key: String, _ cases: [E]) -> E? where E.RawValue == String {
        guard let text = string(key) else { return nil }
        if let match = cases.first(where: { $0.rawValue == text }) { return match }
        let names = cases.map(\.rawValue)
        let choices = names.count == 2 ? "\(names[0]) or \(names[1])"
            : names.dropLast().joined(separator: ", ") + " or " + names.last!
        report("invalid \(key) \"\(text)\" (use \(choices))", key: key)
        return nil
    }

    /// A header field name (`X-Firebase-AppCheck`).
    func headerName(_ key: String, required isRequired: Bool = false) -> String? {
        guard let text = string(key, required: isRequired) else { return nil }
        guard ConfigValue.isHeaderName(text) else {
            report("invalid header name \"\(text)\"", key: key)
            return nil
        }
        return text
    }

    /// The list items, or nil (after reporting) when the value is not a list or is empty and `nonEmpty`.
    func list(_ key: String, nonEmpty: Bool = false, required isRequired: Bool = false) -> [YAMLNode]? {
        guard let node = isRequired ? required(key, expected: "a list") : value(key) else { return nil }
        guard case .sequence(let items) = node.content else {
            context.report("expected a list, got \(node.kindDescription)", at: node, path: childPath(key))
            return nil
        }
        if nonEmpty && items.isEmpty {
            context.report("must not be empty", at: node, path: childPath(key))
            return nil
        }
        return items
    }

    /// A list of non-empty strings; nil if the list or any item is invalid.
    func stringList(_ key: String, nonEmpty: Bool = false, required isRequired: Bool = false) -> [String]? {
        guard let items = list(key, nonEmpty: nonEmpty, required: isRequired) else { return nil }
        var strings: [String] = []
        var valid = true
        for (index, item) in items.enumerated() {
            guard let text = item.scalarText, !item.isNull, !text.isEmpty else {
                context.report("expected a non-empty string", at: item, path: indexPath(childPath(key), index))
                valid = false
                continue
            }
            strings.append(text)
        }
        return valid ? strings : nil
    }

    /// A nested mapping, or nil when absent, null, or not a mapping (reported).
    func mapping(_ key: String, required isRequired: Bool = false) -> MappingReader? {
        guard let node = isRequired ? required(key, expected: "a mapping") : value(key) else { return nil }
        return MappingReader(node, path: childPath(key), context: context)
    }
}
