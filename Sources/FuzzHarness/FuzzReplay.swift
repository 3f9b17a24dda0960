import Foundation

/// Replays saved inputs through a target without libFuzzer: the regression tests and `GatewayFuzz` built
/// without FUZZING use it, so a saved crash reproduces in an ordinary debug build with a readable stack trace.
public enum FuzzReplay {
    /// The regular files at or below `path`, sorted; names starting with "." (e.g. `.gitkeep`) are skipped.
    /// A missing path yields no files.
    public static func files(under path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        guard let walker = FileManager.default.enumerator(atPath: path) else { return [] }
        var found: [String] = []
        while let relative = walker.nextObject() as? String {
            let full = (path as NSString).appendingPathComponent(relative)
            var childIsDirectory: ObjCBool = false
            let name = (relative as NSString).lastPathComponent
            guard !name.hasPrefix("."), FileManager.default.fileExists(atPath: full, isDirectory: &childIsDirectory),
                  !childIsDirectory.boolValue else { continue }
            found.append(full)
        }
        return found.sorted()
    }

    /// The bytes of the file at `path`, nil when it cannot be read.
    public static func contents(of path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }
}
