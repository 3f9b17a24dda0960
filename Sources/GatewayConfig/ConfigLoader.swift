import Foundation

/// Reads `gateway.yml` into a validated `GatewayConfiguration`, or reports every problem in the file.
///
/// Decoding is split by section (`ConfigLoader+Listeners.swift`, `+Upstreams`, `+Verifiers`, `+Routes`,
/// `+State`); each section reports into one `ConfigContext` and carries on, so all errors come out at once.
/// The loader only reads the configuration file itself: files it names (certificates, keys) are resolved but not
/// opened here. `check-config` reads them afterwards with GatewayProxy's `ConfigFileCheck` — the code `serve` reads
/// them with — and reports a bad one at its key through `LoadedConfiguration.error(at:_:)`.
public enum ConfigLoader {
    static let topLevelKeys = ["version", "listeners", "admin", "limits", "state", "upstreams", "verifiers", "routes",
                               "forward_auth", "paths", "verdict_token"]

    /// Reads and validates the file. Relative paths inside (tls files, jwks_file, private keys, root CAs,
    /// state.path) are resolved against the config file's directory and stored resolved.
    public static func load(path: String) throws(ConfigErrors) -> GatewayConfiguration {
        try loadDetailed(path: path).configuration
    }

    /// Validates `yaml` as if read from `fileName`; relative paths are resolved against `baseDirectory`
    /// (left relative when it is empty).
    public static func load(yaml: String, fileName: String, baseDirectory: String) throws(ConfigErrors) -> GatewayConfiguration {
        try loadDetailed(yaml: yaml, fileName: fileName, baseDirectory: baseDirectory).configuration
    }

    /// `load(path:)`, also returning the file's warnings and the positions of its keys (`check-config`, and `serve`
    /// to log the warnings). A thrown `ConfigErrors` carries the warnings found too.
    public static func loadDetailed(path: String) throws(ConfigErrors) -> LoadedConfiguration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigErrors(errors: [ConfigError(file: path, line: 1, column: 1, path: "",
                                                    message: "cannot read the configuration file")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigErrors(errors: [ConfigError(file: path, line: 1, column: 1, path: "",
                                                    message: "the configuration file is not valid UTF-8")])
        }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return try loadDetailed(yaml: text, fileName: path, baseDirectory: directory)
    }

    /// `load(yaml:fileName:baseDirectory:)` with the warnings and key positions.
    public static func loadDetailed(yaml: String, fileName: String, baseDirectory: String,
                                    environment: @escaping @Sendable (String) -> String? = ConfigExpansion.process) throws(ConfigErrors)
        -> LoadedConfiguration {
        let context = ConfigContext(file: fileName, baseDirectory: baseDirectory)
        let root: YAMLNode
        switch YAMLDocument.parse(yaml) {
        case .failure(let error):
            context.report(error.message, at: error.mark, path: "")
            throw ConfigErrors(errors: context.sortedErrors)
        case .success(nil):
            context.report("the file is empty; expected a mapping with \"version: 1\"", at: YAMLMark(line: 1, column: 1), path: "")
            throw ConfigErrors(errors: context.sortedErrors)
        case .success(let node?):
            root = ConfigExpansion.expand(node, context: context, environment: environment)
        }
        // A reference that cannot be expanded stops here: decoding its scalar as written would report it again.
        guard context.errors.isEmpty else { throw ConfigErrors(errors: context.sortedErrors) }
        let configuration = decode(root, context: context)
        guard let configuration, context.errors.isEmpty else {
            throw ConfigErrors(errors: context.sortedErrors, warnings: context.sortedWarnings)
        }
        return LoadedConfiguration(configuration: configuration, warnings: context.sortedWarnings,
                                   positions: context.positions, fileName: fileName)
    }

    /// Decodes every section; nil when any error was reported.
    static func decode(_ root: YAMLNode, context: ConfigContext) -> GatewayConfiguration? {
        guard let top = MappingReader(root, path: "", context: context) else { return nil }
        top.rejectUnknownKeys(allowed: topLevelKeys)

        let version = top.int("version", required: true)
        if let version, version != 1 {
            top.report("unsupported version \(version) (expected 1)", key: "version")
        }
        let listeners = decodeListeners(top)
        let admin = decodeAdmin(top, listeners: listeners)
        let limits = decodeLimits(top)
        let state = decodeState(top)
        let upstreams = decodeUpstreams(top)
        let verifiers = decodeVerifiers(top)
        let paths = decodePaths(top)
        let routes = decodeRoutes(top, upstreams: upstreams.declared, http2Upstreams: upstreams.http2, verifiers: verifiers.declared, limits: limits,
                                  paths: paths)
        let forwardAuth = decodeForwardAuth(top)
        let verdictToken = decodeVerdictToken(top)

        guard context.errors.isEmpty else { return nil }
        var configuration = GatewayConfiguration(version: version ?? 1, listeners: listeners.map(\.config), admin: admin,
                                                 limits: limits, state: state, upstreams: upstreams.configs,
                                                 verifiers: verifiers.configs, routes: routes)
        configuration.forwardAuth = forwardAuth
        configuration.verdictToken = verdictToken
        configuration.paths = paths
        return configuration
    }
}
