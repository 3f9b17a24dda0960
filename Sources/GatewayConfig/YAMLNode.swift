/// A 1-based position in the YAML source.
struct YAMLMark: Sendable, Equatable {
    var line: Int
    var column: Int
}

/// One node of a parsed YAML document: a Swift tree with the start mark of every node, so the loader can say
/// exactly where a problem is. Built by `YAMLDocument`; no libyaml type escapes it.
struct YAMLNode: Sendable, Equatable {
    /// A key and its value, in file order (duplicates are kept so the loader can report them).
    struct Pair: Sendable, Equatable {
        var key: YAMLNode
        var value: YAMLNode
    }

    enum Content: Sendable, Equatable {
        /// `plain` is false for quoted and block scalars: only plain scalars may be booleans, integers or null.
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        case mapping([Pair])
    }

    var content: Content
    var mark: YAMLMark
    /// The scalar as written, when `${…}` expansion changed it (ConfigExpansion).
    var expandedFrom: String? = nil

    /// The scalar text, whatever its style; nil for collections.
    var scalarText: String? {
        if case .scalar(let text, _) = content { return text }
        return nil
    }

    /// YAML 1.2 core-schema null: `~`, `null`, or nothing at all, unquoted.
    var isNull: Bool {
        guard case .scalar(let text, plain: true) = content else { return false }
        return text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL"
    }

    /// YAML 1.2 core-schema booleans only (`true`/`false` in three spellings), unquoted. `yes`/`on` are not
    /// booleans here: a typo must not silently turn into a setting.
    var boolValue: Bool? {
        guard case .scalar(let text, plain: true) = content else { return nil }
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: return nil
        }
    }

    /// A plain decimal integer (optional sign); hex, octal, underscores and floats are rejected.
    var intValue: Int? {
        guard case .scalar(let text, plain: true) = content else { return nil }
        var digits = Substring(text)
        if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(text.hasPrefix("+") ? String(text.dropFirst()) : text)
    }

    /// "a mapping", "a list", "a string" — for messages such as `expected a boolean, got a list`.
    var kindDescription: String {
        switch content {
        case .scalar: return isNull ? "null" : "a scalar"
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        }
    }
}
