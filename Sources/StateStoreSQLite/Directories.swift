#if canImport(Glibc)
import Glibc
#endif
import StateStore

/// `mkdir -p` for the folder of the database file, with POSIX calls (no Foundation in the backend).
enum Directories {
    /// Creates every missing folder above `path`. Folders are made 0700: only the gateway's user needs them.
    static func createParents(of path: String) throws(StateStoreError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        try create(String(path[..<slash]))
    }

    private static func create(_ directory: String) throws(StateStoreError) {
        if directory.isEmpty || directory == "/" { return }
        if mkdir(directory, 0o700) == 0 || errno == EEXIST { return }
        guard errno == ENOENT else { throw failure(directory) }
        try createParents(of: directory)
        if mkdir(directory, 0o700) == 0 || errno == EEXIST { return }
        throw failure(directory)
    }

    private static func failure(_ directory: String) -> StateStoreError {
        StateStoreError(.unavailable, "cannot create folder \(directory): \(String(cString: strerror(errno)))")
    }
}
