import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why a test fixture could not be set up; fails the test loudly (CI installs redis-server, so no skipping).
struct RedisFixtureError: Error, CustomStringConvertible {
    let description: String
}

/// A real `redis-server` on a loopback port, in a temporary directory, with no persistence. Killed by `stop()` or,
/// if a test fails before reaching it, by `deinit`. Its pid is recorded with the test process's pid in the temporary
/// directory, so a server orphaned by a crashed test run is killed by the next run (`reapOrphans`).
final class RedisServer: @unchecked Sendable {
    /// Where Debian installs it, then `$PATH`.
    static func executable() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            + path.split(separator: ":").map { "\($0)/redis-server" }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw RedisFixtureError(description: "redis-server not found (install the redis-server package: "
                                    + "scripts/install-deps.sh test)")
        }
        return found
    }

    static let directoryPrefix = "attest-redis-"

    private(set) var port: UInt16
    let password: String?
    let directory: String
    private var pid: pid_t = 0
    /// More `redis-server` arguments (`--tls-port …`, `--replicaof …`).
    private let extraArguments: [String]
    /// Set: run as a sentinel (`redis-server sentinel.conf --sentinel`) monitoring this port as `mymaster`.
    private let sentinelOf: UInt16?

    /// Starts a server on a free port (or on `port`), optionally with `--requirepass`; `sentinelOf`: a sentinel
    /// monitoring that port as `mymaster` instead.
    init(port: UInt16? = nil, password: String? = nil, extraArguments: [String] = [], sentinelOf: UInt16? = nil) throws {
        Self.reapOrphans()
        self.port = port ?? 0
        self.password = password
        self.extraArguments = extraArguments
        self.sentinelOf = sentinelOf
        var template = Array("/tmp/\(Self.directoryPrefix)XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw RedisFixtureError(description: "mkdtemp failed") }
        directory = String(cString: made)
        try start(fixedPort: port != nil)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var url: String { password.map { "redis://:\($0)@127.0.0.1:\(port)" } ?? "redis://127.0.0.1:\(port)" }

    /// (Re)starts the server; with `fixedPort` false a new free port is picked on each of a few attempts (another
    /// test may grab the port between probing and binding).
    func start(fixedPort: Bool = true) throws {
        stop()
        let executable = try Self.executable()
        for _ in 0..<5 {
            if !fixedPort { port = try freeLoopbackPort() }
            var arguments = [executable, "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly",
                             "no", "--daemonize", "no", "--dir", directory, "--logfile", "redis.log"] + extraArguments
            if let password { arguments += ["--requirepass", password] }
            if let master = sentinelOf {
                // A sentinel needs a configuration file it can rewrite.
                let conf = directory + "/sentinel.conf"
                try ("port \(port)\nbind 127.0.0.1\ndir \(directory)\nlogfile sentinel.log\n"
                     + "sentinel monitor mymaster 127.0.0.1 \(master) 1\n").write(toFile: conf, atomically: true, encoding: .utf8)
                arguments = [executable, conf, "--sentinel"]
            }
            pid = try spawn(arguments)
            try "\(getpid()) \(pid)\n".write(toFile: directory + "/owner", atomically: true, encoding: .utf8)
            let deadline = Date().addingTimeInterval(5)
            var status: Int32 = 0
            while Date() < deadline && waitpid(pid, &status, WNOHANG) == 0 {
                if (try? command("PING")) != nil { return }
                usleep(10_000)
            }
            stop()
            if fixedPort { usleep(200_000) }
        }
        let log = (try? String(contentsOfFile: directory + "/redis.log", encoding: .utf8)) ?? ""
        throw RedisFixtureError(description: "redis-server did not start on port \(port): \(log.suffix(500))")
    }

    /// Kills the server (SIGKILL: an abrupt stop is what the reconnect tests want) and reaps it.
    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0
    }

    /// Kills servers whose test process is gone (a crashed or killed run), identified by their `owner` files.
    static func reapOrphans() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in names where name.hasPrefix(directoryPrefix) {
            let dir = "/tmp/" + name
            guard let owner = try? String(contentsOfFile: dir + "/owner", encoding: .utf8) else { continue }
            let pids = owner.split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
            guard pids.count == 2, kill(pids[0], 0) == -1, errno == ESRCH else { continue }
            let cmdline = (try? String(contentsOfFile: "/proc/\(pids[1])/cmdline", encoding: .utf8)) ?? ""
            if cmdline.contains("redis-server") { kill(pids[1], SIGKILL) }
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// posix_spawn with stdio on /dev/null and a clean signal mask (the test process may block signals, and a
    /// child inherits that).
    private func spawn(_ arguments: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0) }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var envp: [UnsafeMutablePointer<CChar>?] = [nil]
        var child: pid_t = 0
        let rc = posix_spawn(&child, arguments[0], &actions, &attr, &argv, &envp)
        guard rc == 0 else { throw RedisFixtureError(description: "posix_spawn \(arguments[0]): \(rc)") }
        return child
    }

    /// Sends one inline command (after AUTH when the server has a password) and returns the first reply line.
    @discardableResult
    func command(_ line: String) throws -> String {
        let fd = try connectLoopback(port: port)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = (password.map { "AUTH \($0)\r\n" } ?? "") + line + "\r\n"
        let bytes = Array(request.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { throw RedisFixtureError(description: "write") }
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            if let answer = Self.parseReply(reply, skippingLines: password == nil ? 0 : 1) { return answer }
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else { throw RedisFixtureError(description: "no reply to \(line)") }
            reply += buffer[0..<n]
        }
    }

    /// The first reply after `skippingLines` lines: a bulk string's content, or any other reply's whole line
    /// (`+OK`, `-ERR …`, `:1`, `$-1`); nil while incomplete. Enough RESP for test probes, not for arrays.
    private static func parseReply(_ bytes: [UInt8], skippingLines skip: Int) -> String? {
        var lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        lines.removeLast()  // the incomplete tail (or "" after a final CRLF)
        guard lines.count > skip else { return nil }
        let first = lines[skip]
        guard first.hasPrefix("$"), first != "$-1" else { return first }
        return lines.count > skip + 1 ? lines[skip + 1] : nil
    }
}

/// A TCP listener that never accepts and never answers: connects succeed (the kernel's backlog) and every request
/// hangs — what a wedged server looks like to a client.
final class SilentListener {
    let fd: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { close(fd); throw RedisFixtureError(description: "listen") }
        self.fd = fd
        port = boundPort(fd)
    }

    deinit { close(fd) }
}

private func loopbackAddress(port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return addr
}

private func boundPort(_ fd: Int32) -> UInt16 {
    var addr = sockaddr_in()
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return UInt16(bigEndian: addr.sin_port)
}

/// A port nobody listens on right now (bind to 0, read it back, close).
func freeLoopbackPort() throws -> UInt16 {
    let listener = try SilentListener()
    return listener.port
}

private func connectLoopback(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = loopbackAddress(port: port)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else { close(fd); throw RedisFixtureError(description: "connect to \(port) failed") }
    return fd
}
