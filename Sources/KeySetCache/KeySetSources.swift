#if canImport(Glibc)
import Glibc
#endif

/// Producers of `KeySetFetch` for the cache's `fetch` closure.
///
/// The HTTPS producer lives in OutboundHTTP (`HTTPClient.keySetFetch(url:timeoutMillis:)`), which this module
/// must not import; `adapting(_:)` turns its result into a `KeySetFetch`.
public enum KeySetSources {
    /// Reads a key set from a local file (deployments that ship the keys, tests). The file says nothing about
    /// caching, so the policy's `maxAgeSeconds` applies and the file is re-read on that schedule.
    public static func file(path: String, maxBytes: Int = 1 << 20) -> @Sendable () throws -> KeySetFetch {
        return { KeySetFetch(body: try readFile(path: path, maxBytes: maxBytes), maxAgeSeconds: nil) }
    }

    /// Adapts a fetch returning a body and its `Cache-Control` value (OutboundHTTP's `keySetFetch`).
    public static func adapting(_ fetch: @escaping @Sendable () throws -> (body: [UInt8], cacheControl: String?))
        -> @Sendable () throws -> KeySetFetch {
        return {
            let fetched = try fetch()
            return KeySetFetch(body: fetched.body, cacheControl: fetched.cacheControl)
        }
    }

    /// Reads a whole file with POSIX calls; fails if it is longer than `maxBytes`.
    static func readFile(path: String, maxBytes: Int) throws(KeySetSourceError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw KeySetSourceError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw KeySetSourceError("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { return bytes }
            guard bytes.count + n <= maxBytes else {
                throw KeySetSourceError("\(path) is larger than \(maxBytes) bytes")
            }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }
}

/// A key-set source could not produce a document (the cache reports it as `.failed` and keeps the old set).
public struct KeySetSourceError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
