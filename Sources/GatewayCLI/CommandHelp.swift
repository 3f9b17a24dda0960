/// One option of a command: what its help lists and what `Options.parse` accepts.
public struct OptionHelp: Sendable {
    /// `--config`.
    public let flag: String
    /// The value's placeholder (`FILE`); nil for a flag that takes no value.
    public let value: String?
    /// One line: what it does, and its default.
    public let text: String

    public init(_ flag: String, _ value: String?, _ text: String) {
        self.flag = flag
        self.value = value
        self.text = text
    }
}

/// One command's help: its synopsis, one line saying what it does and a line per option. The command parses its
/// arguments with `Options.parse(_:for:)`, so the options listed are exactly the ones it accepts.
///
/// Rendered as a block (Tests/e2e/test_cli.py reads it):
/// ```
///   attest-gateway serve [--config FILE] …     the command and its synopsis (continued at 10 spaces)
///       Serves …                               the summary (6 spaces)
///       --config FILE    the configuration …   one line per option (6 spaces, then --)
/// ```
public struct CommandHelp: Sendable {
    /// `attest-gateway serve`.
    public let command: String
    /// The synopsis after the command, one element per line (alternatives and required options as written).
    public let synopsis: [String]
    public let summary: String
    public let options: [OptionHelp]

    public init(_ command: String, synopsis: [String] = [], summary: String, options: [OptionHelp] = []) {
        self.command = command
        self.synopsis = synopsis
        self.summary = summary
        self.options = options
    }

    /// The flags that take a value.
    public var valued: Set<String> { Set(options.filter { $0.value != nil }.map(\.flag)) }
    /// The flags without a value.
    public var booleans: Set<String> { Set(options.filter { $0.value == nil }.map(\.flag)) }

    /// The block described above, without a trailing newline.
    public var block: String {
        var lines = ["  " + ([command] + synopsis.prefix(1)).joined(separator: " ")]
        lines += synopsis.dropFirst().map { String(repeating: " ", count: 10) + $0 }
        lines.append("      " + summary)
        let names = options.map { o in o.value.map { "\(o.flag) \($0)" } ?? o.flag }
        let width = (names.map(\.count).max() ?? 0) + 2
        for (name, option) in zip(names, options) {
            lines.append("      " + name + String(repeating: " ", count: width - name.count) + option.text)
        }
        return lines.joined(separator: "\n")
    }

    /// `Usage:`, the blocks of `commands` (one blank line apart) and, when given, `notes` after a blank line.
    public static func usage(_ commands: [CommandHelp], notes: String = "") -> String {
        "Usage:\n" + commands.map(\.block).joined(separator: "\n\n") + (notes.isEmpty ? "" : "\n\n" + notes)
    }
}

extension Options {
    /// Parses `args` with the options `help` lists.
    public static func parse(_ args: [String], for help: CommandHelp) -> Result<Options, UsageError> {
        parse(args, valued: help.valued, booleans: help.booleans)
    }
}
