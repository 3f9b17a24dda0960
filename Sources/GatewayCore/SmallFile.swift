#if canImport(Glibc)
import Glibc
#endif

/// Reads a small file whole (`/proc` entries, key files of the dev tools), with stdio; nil when it cannot be opened
/// or is larger than `maxBytes`.
public enum SmallFile {
    public static func read(_ path: String, maxBytes: Int = 1 << 20) -> [UInt8]? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, file)
            if n == 0 { break }
            bytes += buffer[..<n]
            if bytes.count > maxBytes { return nil }
        }
        return bytes
    }
}
