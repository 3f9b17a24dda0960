import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The Python server the tests talk to: plain HTTP, or HTTPS when given a certificate and key.
let serverScript = #"""
import http.server, os, signal, ssl, sys, threading

# Spawned from a thread that blocks most signals, so the mask is inherited: unblock it. And never outlive
# a crashed test run by more than a minute.
signal.pthread_sigmask(signal.SIG_SETMASK, [])
threading.Timer(60, lambda: os._exit(0)).start()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/jwks":
            self.reply(200, b'{"keys":[]}', [
                ("Content-Type", "application/json"),
                ("Cache-Control", "public, max-age=120"),
                ("X-Echo-Agent", self.headers.get("User-Agent", "")),
                ("X-Echo", self.headers.get("X-Req", "")),
            ])
        elif self.path == "/big":
            self.reply(200, b"x" * 100000)
        elif self.path == "/stream-big":
            # No Content-Length: only the client's running count can stop it.
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b"y" * 1000)
            self.close_connection = True
        elif self.path == "/redirect":
            self.reply(302, b"", [("Location", "/jwks")])
        else:
            self.reply(404, b"not found", [("Content-Type", "text/plain")])

    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.reply(200, data, [("X-Method", "POST"), ("X-Expect", self.headers.get("Expect", "none"))])

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if len(sys.argv) == 3:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""#

/// A scratch directory removed by `cleanUp()`.
final class TempDirectory {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "outbound-http-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    func cleanUp() { try? FileManager.default.removeItem(atPath: path) }
}

struct TestSetupError: Error, CustomStringConvertible { let description: String }

/// Runs a command to completion; throws if it fails.
func run(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw TestSetupError(description: "\(arguments[0]) failed") }
}

/// The test server process on 127.0.0.1; `stop()` kills it and waits for it.
final class TestServer {
    let port: Int
    private let process: Process

    /// Starts the server (HTTPS when `tls` gives a certificate and key path) and reads the port it bound.
    init(directory: TempDirectory, tls: (cert: String, key: String)? = nil) throws {
        let script = directory.path + "/server.py"
        try serverScript.write(toFile: script, atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script] + (tls.map { [$0.cert, $0.key] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // exited before printing its port
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestSetupError(description: "test server did not start")
        }
        self.port = port
    }

    var base: String { "http://127.0.0.1:\(port)" }
    var tlsBase: String { "https://127.0.0.1:\(port)" }

    /// SIGKILL: the child may have inherited a mask blocking SIGTERM (Foundation spawns from dispatch
    /// threads that block most signals), and SIGKILL cannot be blocked.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost, made with the openssl CLI.
func makeSelfSignedCertificate(in directory: TempDirectory) throws -> (cert: String, key: String) {
    let cert = directory.path + "/cert.pem"
    let key = directory.path + "/key.pem"
    try run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=attest-gateway test",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
    return (cert, key)
}

/// A listening socket on 127.0.0.1 that never accepts: the kernel completes handshakes, nobody answers.
final class SilentListener {
    let fd: Int32
    let port: Int

    init() throws {
        (fd, port) = try bindLoopback()
        guard listen(fd, 8) == 0 else { throw TestSetupError(description: "listen failed") }
    }

    func close() { _ = Glibc.close(fd) }
}

/// A loopback port with nothing listening (bound, then closed).
func refusedPort() throws -> Int {
    let (fd, port) = try bindLoopback()
    close(fd)
    return port
}

private func bindLoopback() throws -> (Int32, Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else { close(fd); throw TestSetupError(description: "bind failed") }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
