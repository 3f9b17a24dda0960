import GatewayCore
import HTTP2
import XCTest

/// The nghttp2 client session against the server session, bytes passed between them in memory: requests with
/// bodies and trailers one way, response heads, bodies and trailers the other, windows that close until the
/// receiver takes the bytes, GOAWAY.
final class H2ClientSessionTests: XCTestCase {
    final class Server: H2SessionDelegate {
        var requests: [(Int32, H2RequestHead, Bool)] = []
        var data: [Int32: [UInt8]] = [:]
        var trailers: [Int32: [(String, String)]] = [:]
        var ended: [Int32] = []
        var body: [UInt8] = []
        var bodyEnded = false
        var responseTrailers: H2Fields? = nil
        var consumeData = true
        weak var session: H2ServerSession?

        func h2Request(stream: Int32, head: H2RequestHead, endStream: Bool) { requests.append((stream, head, endStream)) }
        func h2RequestData(stream: Int32, _ bytes: UnsafeRawBufferPointer) {
            data[stream, default: []] += bytes
            if consumeData { session?.consume(stream: stream, bytes.count) }
        }
        func h2RequestTrailers(stream: Int32, _ t: H2Fields) {
            trailers[stream] = t.fields.map { (String(decoding: t.bytes[$0.name], as: UTF8.self), String(decoding: t.bytes[$0.value], as: UTF8.self)) }
        }
        func h2RequestEnd(stream: Int32) { ended.append(stream) }
        func h2StreamClosed(stream: Int32, errorCode: UInt32) {}
        func h2ResponseBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead {
            let n = min(into.count, body.count)
            if n == 0 && !bodyEnded { return .deferred }
            body.withUnsafeBytes { into.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            body.removeFirst(n)
            if body.isEmpty && bodyEnded, let t = responseTrailers { return .trailers(n, t) }
            return .bytes(n, end: body.isEmpty && bodyEnded)
        }
    }

    final class Client: H2ClientDelegate {
        var heads: [(Int32, H2ResponseHead, Bool)] = []
        var data: [Int32: [UInt8]] = [:]
        var ended: [Int32] = []
        var closed: [(Int32, UInt32)] = []
        var goAway = false
        var body: [UInt8] = []
        var bodyEnded = false
        var requestTrailers: H2Fields? = nil

        func h2ResponseHeaders(stream: Int32, head: H2ResponseHead, endStream: Bool) { heads.append((stream, head, endStream)) }
        func h2ResponseData(stream: Int32, _ bytes: UnsafeRawBufferPointer) { data[stream, default: []] += bytes }
        func h2ResponseEnd(stream: Int32) { ended.append(stream) }
        func h2StreamClosed(stream: Int32, errorCode: UInt32) { closed.append((stream, errorCode)) }
        func h2RequestBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead {
            let n = min(into.count, body.count)
            if n == 0 && !bodyEnded { return .deferred }
            body.withUnsafeBytes { into.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            body.removeFirst(n)
            if body.isEmpty && bodyEnded, let t = requestTrailers { return .trailers(n, t) }
            return .bytes(n, end: body.isEmpty && bodyEnded)
        }
        func h2GoAway() { goAway = true }
    }

    static func fields(_ pairs: [(String, String)]) -> H2Fields {
        var f = H2Fields()
        for (n, v) in pairs {
            Array(n.utf8).withUnsafeBytes { nb in Array(v.utf8).withUnsafeBytes { vb in f.add(nb, vb) } }
        }
        return f
    }

    private var client: H2ClientSession!
    private var server: H2ServerSession!
    private let c = Client()
    private let s = Server()

    override func setUpWithError() throws {
        client = try H2ClientSession(settings: H2Settings(), delegate: c)
        server = try H2ServerSession(settings: H2Settings(), delegate: s)
        s.session = server
    }

    /// Moves bytes both ways until neither side has anything to send.
    private func pump() {
        for _ in 0..<50 {
            let a = ByteBuffer(capacity: 0), b = ByteBuffer(capacity: 0)
            XCTAssertTrue(client.send(into: a, limit: 1 << 20))
            XCTAssertTrue(server.receive(a.readable, nowMillis: 0))
            XCTAssertTrue(server.send(into: b, limit: 1 << 20))
            XCTAssertTrue(client.receive(b.readable))
            if a.isEmpty && b.isEmpty { return }
        }
    }

    private func request(body: Bool) -> Int32? {
        client.submitRequest(Self.fields([(":method", body ? "POST" : "GET"), (":scheme", "http"),
                                          (":authority", "api.test"), (":path", "/svc/Call"), ("te", "trailers"),
                                          ("content-type", "application/grpc")]), hasBody: body)
    }

    func testRequestWithBodyAndTrailersThenResponseWithTrailers() throws {
        c.body = Array("hello upstream".utf8)
        c.bodyEnded = true
        c.requestTrailers = Self.fields([("x-request-trailer", "1")])
        let id = try XCTUnwrap(request(body: true))
        pump()
        XCTAssertEqual(s.requests.count, 1)
        let head = s.requests[0].1
        XCTAssertEqual(head.string(head.path), "/svc/Call")
        XCTAssertEqual(head.string(head.authority), "api.test")
        XCTAssertEqual(s.data[id], Array("hello upstream".utf8))
        XCTAssertEqual(s.trailers[id]?.first?.0, "x-request-trailer", "request trailers reach the server")
        XCTAssertEqual(s.ended, [id])

        s.body = Array("reply".utf8)
        s.bodyEnded = true
        s.responseTrailers = Self.fields([("grpc-status", "0"), ("grpc-message", "ok")])
        let list = Self.fields([("content-type", "application/grpc")])
        XCTAssertTrue(server.submitResponse(stream: id, status: 200, bytes: list.bytes, fields: list.fields, hasBody: true))
        pump()
        XCTAssertEqual(c.heads.count, 2, "a head and then trailers")
        XCTAssertEqual(c.heads[0].1.status, 200)
        XCTAssertFalse(c.heads[0].2)
        XCTAssertEqual(c.heads[1].1.status, 0, "trailers carry no :status")
        let t = c.heads[1].1
        XCTAssertEqual(t.fields.map { t.string($0.name) }, ["grpc-status", "grpc-message"])
        XCTAssertTrue(c.heads[1].2, "the trailers end the stream")
        XCTAssertEqual(c.data[id], Array("reply".utf8))
        XCTAssertEqual(c.closed.first?.1, 0)
    }

    func testTrailersOnlyResponseIsOneHeaderBlockEndingTheStream() throws {
        let id = try XCTUnwrap(request(body: false))
        pump()
        let list = Self.fields([("content-type", "application/grpc"), ("grpc-status", "16"), ("grpc-message", "missing_token")])
        XCTAssertTrue(server.submitResponse(stream: id, status: 200, bytes: list.bytes, fields: list.fields, hasBody: false))
        pump()
        XCTAssertEqual(c.heads.count, 1)
        XCTAssertEqual(c.heads[0].1.status, 200)
        XCTAssertTrue(c.heads[0].2)
    }

    func testResponseWindowStaysClosedUntilTheClientConsumes() throws {
        let id = try XCTUnwrap(request(body: false))
        pump()
        s.body = [UInt8](repeating: 7, count: 1 << 20)
        s.bodyEnded = true
        let list = Self.fields([("content-type", "application/octet-stream")])
        XCTAssertTrue(server.submitResponse(stream: id, status: 200, bytes: list.bytes, fields: list.fields, hasBody: true))
        pump()
        let window = Int(H2Settings().streamWindow)
        XCTAssertEqual(c.data[id]?.count, window, "the server sends one stream window and waits")
        client.consume(stream: id, window)
        pump()
        XCTAssertEqual(c.data[id]?.count, 2 * window, "consuming reopens the window by that much")
    }

    func testGoAwayIsReportedAndNewRequestsAreRefused() throws {
        _ = try XCTUnwrap(request(body: false))
        pump()
        server.goAway()
        pump()
        XCTAssertTrue(c.goAway)
        XCTAssertTrue(client.goingAway)
        XCTAssertNil(request(body: false), "no stream is opened on a session the server is closing")
    }

    func testAProtocolErrorFromTheServerEndsTheSession() {
        _ = request(body: false)
        let a = ByteBuffer(capacity: 0)
        XCTAssertTrue(client.send(into: a, limit: 1 << 20))
        // SETTINGS (empty), then DATA on stream 0: a connection error (RFC 9113 6.1).
        let garbage: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0] + [0, 0, 1, 0, 0, 0, 0, 0, 0, 0x78]
        _ = garbage.withUnsafeBytes { client.receive($0) }
        let goaway = ByteBuffer(capacity: 0)
        XCTAssertTrue(client.send(into: goaway, limit: 1 << 20))
        XCTAssertTrue(Array(goaway.readable).count >= 17, "a GOAWAY went out")
        XCTAssertFalse(client.wantsRead, "the session is over")
        XCTAssertTrue(client.goingAway)
        XCTAssertNil(request(body: false))
    }
}
