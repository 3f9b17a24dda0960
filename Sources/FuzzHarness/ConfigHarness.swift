import GatewayConfig

/// The `config-yaml` target: `ConfigLoader.load(yaml:fileName:baseDirectory:)`, the entry `load(path:)` calls
/// after reading the file (which also refuses bytes that are not UTF-8, as done here).
///
/// Invariants: a refused document carries at least one error, every error points at a line and column inside
/// the document, and errors come out ordered by position (as `check-config` promises).
enum ConfigHarness {
    static func run(_ data: UnsafeRawBufferPointer) {
        guard let text = String(validating: data, as: UTF8.self) else { return }
        do {
            _ = try ConfigLoader.load(yaml: text, fileName: "fuzz.yml", baseDirectory: "/etc/attest-gateway")
        } catch {
            let errors = error.errors
            fuzzCheck(!errors.isEmpty, "a refused document without errors")
            // An upper bound on the lines libyaml counts: LF, CR, and the last bytes of NEL, LS and PS all end lines,
            // and libyaml may place an error one line past a last line that has no line break ("12:1" in 11 lines).
            let lines = data.reduce(2) { $0 + ([0x0A, 0x0D, 0x85, 0xA8, 0xA9].contains($1) ? 1 : 0) }
            for e in errors {
                fuzzCheck(e.line >= 1 && e.line <= lines && e.column >= 1, "error at \(e.line):\(e.column) in \(lines) lines: \(e)")
            }
            for (a, b) in zip(errors, errors.dropFirst()) {
                fuzzCheck((a.line, a.column) <= (b.line, b.column), "errors out of order: \(a) before \(b)")
            }
        }
    }
}
