import Foundation
import GatewayCore
import GatewayTLS
import StateStore
@testable import StateStoreRedis
import Testing

/// A test CA and a server certificate for 127.0.0.1 made with the `openssl` command in `directory`: `ca.pem`,
/// `server.pem`, `server.key`.
private func makeTestPKI(in directory: String) throws {
    func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw RedisFixtureError(description: "openssl \(arguments.first ?? "") failed")
        }
    }
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    try openssl(["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA"])
    try openssl(["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"])
    try "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(toFile: directory + "/san.ext", atomically: true, encoding: .utf8)
    try openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "server.pem", "-days", "2", "-extfile", "san.ext"])
}

private func uniquePrefix() -> String { "m\(UUID().uuidString.prefix(8)):" }

/// The shared conformance suite against the Redis modes beyond a plain URL: TLS (`rediss://`, redis-server's
/// `--tls-port` with a CA made here) and Sentinel (a master found through `redis-server --sentinel`).
@Suite struct RedisModesConformanceTests {
    @Test(arguments: StateStoreConformance.Check.allCases)
    func overTLS(_ check: StateStoreConformance.Check) throws {
        let pkiDirectory = NSTemporaryDirectory() + "attest-pki-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: pkiDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: pkiDirectory) }
        try makeTestPKI(in: pkiDirectory)
        let tlsPort = try freeLoopbackPort()
        let server = try RedisServer(extraArguments: ["--tls-port", "\(tlsPort)", "--tls-cert-file", pkiDirectory + "/server.pem",
                                                      "--tls-key-file", pkiDirectory + "/server.key",
                                                      "--tls-ca-cert-file", pkiDirectory + "/ca.pem", "--tls-auth-clients", "no"])
        defer { server.stop() }
        let tls = RedisTLS(context: try TLSContext.client(caFile: pkiDirectory + "/ca.pem", alpn: []))
        try StateStoreConformance(make: {
            try RedisStateStore(url: "rediss://127.0.0.1:\(tlsPort)", keyPrefix: uniquePrefix(), timeoutMillis: 2_000, tls: tls)
        }, sweepCountsExpiredValues: false).run(check)
    }

    @Test(arguments: StateStoreConformance.Check.allCases)
    func throughSentinel(_ check: StateStoreConformance.Check) throws {
        let master = try RedisServer()
        defer { master.stop() }
        let sentinel = try RedisServer(sentinelOf: master.port)
        defer { sentinel.stop() }
        let settings = RedisSentinelSettings(master: "mymaster", nodes: [RedisNode(host: "127.0.0.1", port: Int32(sentinel.port))])
        try StateStoreConformance(make: {
            try RedisStateStore(sentinel: settings, keyPrefix: uniquePrefix(), timeoutMillis: 2_000)
        }, sweepCountsExpiredValues: false).run(check)
    }
}
