/// A configuration as `ConfigLoader.loadDetailed` returns it: the validated `GatewayConfiguration` together with
/// what the loader found out about the file besides errors — its warnings and where each key is written.
///
/// Kept apart from `GatewayConfiguration` on purpose: two files that configure the same gateway compare equal
/// (the reload's "did the listeners change?" checks) whatever their layout or warnings.
public struct LoadedConfiguration: Sendable {
    public let configuration: GatewayConfiguration
    /// Ordered by position in the file.
    public let warnings: [ConfigWarning]
    public let positions: ConfigPositions
    /// The file name as given to the loader (the first part of every error and warning line).
    public let fileName: String

    /// An error about the setting at `path` (`verifiers.ios.root_ca`), at the position of its value — for problems
    /// found after loading, such as a file the setting names that cannot be read.
    public func error(at path: String, _ message: String) -> ConfigError {
        let (line, column) = positions.position(of: path)
        return ConfigError(file: fileName, line: line, column: column, path: path, message: message)
    }
}
