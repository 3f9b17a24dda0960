import Foundation

/// The few file operations the simulators' save and load need. Secrets (private keys) are written mode 0600.
enum SimulatorFiles {
    /// Why a saved CA or device could not be written or read.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func path(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func createDirectory(_ directory: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "cannot create \(directory): \(error.localizedDescription)")
        }
    }

    /// Replaces `path` atomically (write a temporary file beside it, then rename), so a crash never leaves half a key.
    static func write(_ text: String, to path: String, secret: Bool = false) throws {
        let temporary = path + ".tmp"
        let attributes: [FileAttributeKey: Any] = [.posixPermissions: secret ? 0o600 : 0o644]
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: attributes) else {
            throw Failure(description: "cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else { throw Failure(description: "cannot rename \(temporary) to \(path)") }
    }

    static func read(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
        return String(decoding: data, as: UTF8.self)
    }
}
