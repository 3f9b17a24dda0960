import Foundation
import Testing
import GatewayCore
import GatewayTLS

/// A client and a server session shaking hands and talking entirely in memory, as the event loops will drive them:
/// TLS 1.3, ALPN, SNI and the certificate checked against a test CA; and the failures (another CA, another name,
/// TLS 1.1 refused).
@Suite struct TLSSessionTests {
    /// A test CA and a server certificate for `localhost` (openssl CLI, made once per test run).
    static let pki: (dir: String, ca: String, cert: String, key: String) = {
        let dir = NSTemporaryDirectory() + "gateway-tls-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func run(_ args: [String]) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = args
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try! p.run()
            p.waitUntilExit()
            precondition(p.terminationStatus == 0, "openssl \(args.joined(separator: " ")) failed")
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        run(["req", "-x509"] + ec + ["-keyout", dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "2", "-subj", "/CN=test CA"])
        run(["req"] + ec + ["-keyout", dir + "/server.key", "-out", dir + "/server.csr", "-subj", "/CN=localhost"])
        try! "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: dir + "/san.ext", atomically: true, encoding: .utf8)
        run(["x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key", "-CAcreateserial",
             "-out", dir + "/server.pem", "-days", "2", "-extfile", dir + "/san.ext"])
        run(["req", "-x509"] + ec + ["-keyout", dir + "/other.key", "-out", dir + "/other.pem", "-days", "2", "-subj", "/CN=other CA"])
        return (dir, dir + "/ca.pem", dir + "/server.pem", dir + "/server.key")
    }()

    /// Moves ciphertext both ways until neither side has any left (bounded).
    func pump(_ a: TLSSession, _ b: TLSSession, aIn: ByteBuffer, bIn: ByteBuffer) {
        let wire = ByteBuffer(capacity: 16 * 1024)
        for _ in 0..<20 {
            wire.clear()
            let x = a.takeCiphertext(into: wire)
            b.feed(wire.readable)
            _ = b.read(into: bIn)
            wire.clear()
            let y = b.takeCiphertext(into: wire)
            a.feed(wire.readable)
            _ = a.read(into: aIn)
            if x == 0 && y == 0 && a.isHandshakeDone && b.isHandshakeDone { return }
        }
    }

    @Test func handshakeALPNAndDataBothWays() throws {
        let server = try TLSSession(context: try TLSContext.server(certificateChainFile: Self.pki.cert, privateKeyFile: Self.pki.key))
        let client = try TLSSession(context: try TLSContext.client(caFile: Self.pki.ca, alpn: ["h2", "http/1.1"]), serverName: "localhost")
        let toServer = ByteBuffer(capacity: 1024), toClient = ByteBuffer(capacity: 1024)
        #expect(client.handshake() == .wantMore)
        pump(client, server, aIn: toClient, bIn: toServer)
        #expect(client.isHandshakeDone && server.isHandshakeDone)
        #expect(server.negotiatedProtocol == "h2" && client.negotiatedProtocol == "h2")
        #expect(server.protocolVersion == "TLSv1.3")
        let request = Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { client.write($0) })
        pump(client, server, aIn: toClient, bIn: toServer)
        #expect(Array(toServer.readable) == request)
        #expect(Array("ok".utf8).withUnsafeBytes { server.write($0) })
        pump(client, server, aIn: toClient, bIn: toServer)
        #expect(String(decoding: toClient.readable, as: UTF8.self) == "ok")
        server.close()
        let wire = ByteBuffer(capacity: 256)
        server.takeCiphertext(into: wire)
        client.feed(wire.readable)
        #expect(client.read(into: toClient) == .closed)
    }

    @Test func aClientWithoutH2GetsHTTP11() throws {
        let server = try TLSSession(context: try TLSContext.server(certificateChainFile: Self.pki.cert, privateKeyFile: Self.pki.key))
        let client = try TLSSession(context: try TLSContext.client(caFile: Self.pki.ca, alpn: ["http/1.1"]), serverName: "localhost")
        _ = client.handshake()
        pump(client, server, aIn: ByteBuffer(capacity: 64), bIn: ByteBuffer(capacity: 64))
        #expect(server.negotiatedProtocol == "http/1.1")
    }

    @Test func anotherCAOrNameFailsTheHandshake() throws {
        for (ca, name) in [(Self.pki.dir + "/other.pem", "localhost"), (Self.pki.ca, "example.com")] {
            let server = try TLSSession(context: try TLSContext.server(certificateChainFile: Self.pki.cert, privateKeyFile: Self.pki.key))
            let client = try TLSSession(context: try TLSContext.client(caFile: ca), serverName: name)
            _ = client.handshake()
            let wire = ByteBuffer(capacity: 4096)
            var failed = false
            for _ in 0..<10 {
                wire.clear(); client.takeCiphertext(into: wire); server.feed(wire.readable); _ = server.read(into: ByteBuffer(capacity: 64))
                wire.clear(); server.takeCiphertext(into: wire); client.feed(wire.readable)
                if case .failed = client.handshake() { failed = true; break }
            }
            #expect(failed, "\(ca) \(name)")
            #expect(!client.isHandshakeDone)
        }
    }

    @Test func badFilesAreClearErrors() {
        #expect(throws: TLSError.self) { try TLSContext.server(certificateChainFile: "/nonexistent.pem", privateKeyFile: Self.pki.key) }
        #expect(throws: TLSError.self) { try TLSContext.server(certificateChainFile: Self.pki.cert, privateKeyFile: Self.pki.dir + "/other.key") }
    }
}
