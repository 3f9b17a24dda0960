import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real Redis Cluster on loopback: `masters` `redis-server --cluster-enabled yes` processes (each with its own
/// cluster bus port), joined by `redis-cli --cluster create` with no replicas, ready once every node reports
/// `cluster_state:ok`.
final class RedisClusterFixture: @unchecked Sendable {
    let servers: [RedisServer]

    init(masters: Int = 3) throws {
        var servers: [RedisServer] = []
        for _ in 0..<masters {
            let bus = try freeLoopbackPort()
            servers.append(try RedisServer(extraArguments: ["--cluster-enabled", "yes", "--cluster-port", "\(bus)",
                                                            "--cluster-node-timeout", "2000"]))
        }
        self.servers = servers
        try Self.redisCLI(["--cluster", "create"] + servers.map { "127.0.0.1:\($0.port)" } + ["--cluster-replicas", "0", "--cluster-yes"])
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if servers.allSatisfy({ (try? $0.command("CLUSTER INFO"))?.contains("cluster_state:ok") ?? false }) { return }
            usleep(50_000)
        }
        throw RedisFixtureError(description: "the cluster did not reach cluster_state:ok")
    }

    func stop() { for s in servers { s.stop() } }

    /// `redis-cli` with `arguments`; its output, or an error with it when it fails.
    @discardableResult
    static func redisCLI(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw RedisFixtureError(description: "redis-cli \(arguments.prefix(2).joined(separator: " ")) failed: \(output.suffix(400))")
        }
        return output
    }
}
