import GatewayCore
import HTTP2
import XCTest

/// The nghttp2 server session against hand-made client frames (RFC 9113 layouts, HPACK static-table entries).
final class H2ServerSessionTests: XCTestCase {
    // MARK: frames a client sends

    static func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
                UInt8(stream >> 24 & 0x7f), UInt8(stream >> 16 & 0xff), UInt8(stream >> 8 & 0xff), UInt8(stream & 0xff)] + payload
    }
    static let preface = H2Preface.bytes + frame(0x4, 0, 0)
    /// :method GET, :path /, :scheme http (static indexes 2, 4, 6), :authority example.test (literal, indexed name 1).
    static let getHeaders: [UInt8] = [0x82, 0x84, 0x86, 0x41, 12] + Array("example.test".utf8)
    /// :method POST (index 3) instead.
    static let postHeaders: [UInt8] = [0x83, 0x84, 0x86, 0x41, 12] + Array("example.test".utf8)

    /// The frames in server output: (type, flags, stream, payload).
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])] {
        var out: [(UInt8, UInt8, UInt32, [UInt8])] = []
        var i = 0
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            let stream = UInt32(bytes[i + 5] & 0x7f) << 24 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 8 | UInt32(bytes[i + 8])
            guard i + 9 + n <= bytes.count else { break }
            out.append((bytes[i + 3], bytes[i + 4], stream, Array(bytes[(i + 9)..<(i + 9 + n)])))
            i += 9 + n
        }
        return out
    }

    final class Recorder: H2SessionDelegate {
        var requests: [(Int32, H2RequestHead, Bool)] = []
        var data: [Int32: [UInt8]] = [:]
        var ended: [Int32] = []
        var closed: [(Int32, UInt32)] = []
        var body: [UInt8] = []
        var bodyEnded = false

        func h2Request(stream: Int32, head: H2RequestHead, endStream: Bool) { requests.append((stream, head, endStream)) }
        func h2RequestData(stream: Int32, _ bytes: UnsafeRawBufferPointer) { data[stream, default: []] += bytes }
        func h2RequestEnd(stream: Int32) { ended.append(stream) }
        func h2StreamClosed(stream: Int32, errorCode: UInt32) { closed.append((stream, errorCode)) }
        func h2ResponseBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead {
            let n = min(into.count, body.count)
            if n == 0 && !bodyEnded { return .deferred }
            body.withUnsafeBytes { into.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            body.removeFirst(n)
            return .bytes(n, end: body.isEmpty && bodyEnded)
        }
    }

    private func make(_ settings: H2Settings = H2Settings()) throws -> (H2ServerSession, Recorder) {
        let r = Recorder()
        let s = try H2ServerSession(settings: settings, delegate: r)
        return (s, r)
    }

    @discardableResult
    private func feed(_ s: H2ServerSession, _ bytes: [UInt8], now: UInt64 = 1000) -> Bool {
        bytes.withUnsafeBytes { s.receive($0, nowMillis: now) }
    }

    private func output(_ s: H2ServerSession) -> [UInt8] {
        let out = ByteBuffer(capacity: 1024)
        XCTAssertTrue(s.send(into: out, limit: 1 << 20))
        return Array(out.readable)
    }

    // MARK: tests

    func testServerSettingsAnnounceTheLimits() throws {
        var settings = H2Settings()
        settings.maxHeaderListSize = 8192
        let (s, _) = try make(settings)
        XCTAssertTrue(feed(s, Self.preface))
        let first = try XCTUnwrap(Self.frames(output(s)).first)
        XCTAssertEqual(first.type, 0x4)
        var values: [UInt16: UInt32] = [:]
        for i in stride(from: 0, to: first.payload.count, by: 6) {
            let p = first.payload
            values[UInt16(p[i]) << 8 | UInt16(p[i + 1])] = UInt32(p[i + 2]) << 24 | UInt32(p[i + 3]) << 16 | UInt32(p[i + 4]) << 8 | UInt32(p[i + 5])
        }
        XCTAssertEqual(values[0x3], 100)          // MAX_CONCURRENT_STREAMS
        XCTAssertEqual(values[0x4], 256 * 1024)   // INITIAL_WINDOW_SIZE
        XCTAssertEqual(values[0x6], 8192)         // MAX_HEADER_LIST_SIZE
        XCTAssertEqual(values[0x2], 0)            // ENABLE_PUSH
    }

    func testARequestWithoutBodyAndItsResponse() throws {
        let (s, r) = try make()
        feed(s, Self.preface + Self.frame(0x1, 0x4 | 0x1, 1, Self.getHeaders + [0x40, 6] + Array("x-test".utf8) + [3] + Array("yes".utf8)))
        XCTAssertEqual(r.requests.count, 1)
        let (id, head, endStream) = r.requests[0]
        XCTAssertEqual(id, 1)
        XCTAssertTrue(endStream)
        XCTAssertEqual(head.string(head.method), "GET")
        XCTAssertEqual(head.string(head.path), "/")
        XCTAssertEqual(head.string(head.authority), "example.test")
        XCTAssertEqual(head.fields.map { head.string($0.name) }, ["x-test"])
        XCTAssertEqual(head.fields.map { head.string($0.value) }, ["yes"])
        r.body = Array("hello".utf8)
        r.bodyEnded = true
        XCTAssertTrue(s.submitResponse(stream: 1, status: 200, bytes: Array("content-typetext/plain".utf8),
                                       fields: [(0..<12, 12..<22)], hasBody: true))
        let frames = Self.frames(output(s)).filter { $0.stream == 1 }
        XCTAssertEqual(frames.map(\.type), [0x1, 0x0])
        XCTAssertEqual(frames[1].payload, Array("hello".utf8))
        XCTAssertEqual(frames[1].flags & 0x1, 0x1)   // END_STREAM on the last DATA
        XCTAssertEqual(r.closed.map(\.0), [1])
    }

    func testADeferredBodyResumes() throws {
        let (s, r) = try make()
        feed(s, Self.preface + Self.frame(0x1, 0x4 | 0x1, 1, Self.getHeaders))
        XCTAssertTrue(s.submitResponse(stream: 1, status: 200, bytes: [], fields: [], hasBody: true))
        XCTAssertEqual(Self.frames(output(s)).filter { $0.stream == 1 }.map(\.type), [0x1])   // head only: deferred
        r.body = Array("late".utf8)
        r.bodyEnded = true
        s.resumeData(stream: 1)
        let data = Self.frames(output(s)).filter { $0.stream == 1 }
        XCTAssertEqual(data.map(\.type), [0x0])
        XCTAssertEqual(data[0].payload, Array("late".utf8))
    }

    func testRequestBodyWindowOpensOnlyAsConsumed() throws {
        let (s, r) = try make()
        let chunk = Self.frame(0x0, 0, 1, [UInt8](repeating: 7, count: 10_000))   // frames stay under 16 KiB
        feed(s, Self.preface)
        let opening = Self.frames(output(s))
        XCTAssertTrue(opening.contains { $0.type == 0x8 && $0.stream == 0 }, "the connection window is raised to 1 MiB")
        feed(s, Self.frame(0x1, 0x4, 1, Self.postHeaders) + chunk + chunk + chunk + chunk)
        XCTAssertEqual(r.data[1]?.count, 40_000)
        XCTAssertTrue(r.requests[0].2 == false)
        XCTAssertFalse(Self.frames(output(s)).contains { $0.type == 0x8 }, "no WINDOW_UPDATE before the bytes are taken on")
        s.consume(stream: 1, 40_000)
        let updates = Self.frames(output(s)).filter { $0.type == 0x8 }
        XCTAssertTrue(updates.contains { $0.stream == 1 }, "consumed bytes are given back to the stream")
        feed(s, Self.frame(0x0, 0x1, 1, Array("end".utf8)))
        XCTAssertEqual(r.ended, [1])
    }

    func testAFewPingsAreAnsweredAndAFloodEndsTheSession() throws {
        let (s, _) = try make()
        let ping = Self.frame(0x6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8])
        feed(s, Self.preface + Array([[UInt8]](repeating: ping, count: 5).joined()))
        let acks = Self.frames(output(s)).filter { $0.type == 0x6 && $0.flags & 0x1 != 0 }
        XCTAssertEqual(acks.count, 5)
        XCTAssertNil(s.failure)
        feed(s, Array([[UInt8]](repeating: ping, count: 500).joined()))
        let goaway = try XCTUnwrap(Self.frames(output(s)).first { $0.type == 0x7 })
        XCTAssertEqual(Array(goaway.payload[4..<8]), [0, 0, 0, 0xb])   // ENHANCE_YOUR_CALM
        XCTAssertEqual(s.failure, .flood("PING"))
        XCTAssertTrue(s.isFinished)
    }

    func testTheControlFrameBucketRefills() throws {
        var settings = H2Settings()
        settings.controlFrameBurst = 10
        settings.controlFramesPerSecond = 10
        let (s, _) = try make(settings)
        let ping = Self.frame(0x6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8])
        feed(s, Self.preface, now: 1000)   // the SETTINGS takes one token
        for second in 0..<5 {
            feed(s, Array([[UInt8]](repeating: ping, count: 9).joined()), now: 1000 + UInt64(second + 1) * 1000)
        }
        XCTAssertNil(s.failure, "9 pings a second stay within a 10/s bucket")
    }

    func testRapidResetEndsTheSession() throws {
        let (s, _) = try make()
        var bytes = Self.preface
        for i in 0..<400 {
            let id = UInt32(1 + 2 * i)
            bytes += Self.frame(0x1, 0x4 | 0x1, id, Self.getHeaders) + Self.frame(0x3, 0, id, [0, 0, 0, 8])
        }
        feed(s, bytes)
        XCTAssertEqual(s.failure, .flood("RST_STREAM (rapid reset)"))
        let goaway = try XCTUnwrap(Self.frames(output(s)).first { $0.type == 0x7 })
        XCTAssertEqual(Array(goaway.payload[4..<8]), [0, 0, 0, 0xb])
    }

    func testAContinuationFloodIsRefused() throws {
        let (s, r) = try make()
        var bytes = Self.preface + Self.frame(0x1, 0, 1, Self.getHeaders)
        for _ in 0..<1000 { bytes += Self.frame(0x9, 0, 1, [0x40, 1, 0x61, 1, 0x62]) }
        XCTAssertFalse(feed(s, bytes))
        XCTAssertTrue(r.requests.isEmpty)
        XCTAssertNotNil(s.failure)
    }

    func testAnOversizedHeaderBlockEndsTheSession() throws {
        var settings = H2Settings()
        settings.maxHeaderListSize = 1024
        let (s, r) = try make(settings)
        var block = Self.getHeaders
        for _ in 0..<40 { block += [0x40, 6] + Array("x-fill".utf8) + [100] + [UInt8](repeating: 0x61, count: 100) }   // ~5.5 KiB listed
        XCTAssertFalse(feed(s, Self.preface + Self.frame(0x1, 0x4 | 0x1, 1, block)))
        XCTAssertTrue(r.requests.isEmpty)
    }

    func testAWrongPrefaceFails() throws {
        let (s, _) = try make()
        XCTAssertFalse(feed(s, Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)))
    }

    func testPrefaceRecognition() {
        func m(_ s: String) -> Bool? { Array(s.utf8).withUnsafeBytes { H2Preface.matches($0) } }
        XCTAssertNil(m("PRI * HT"))
        XCTAssertEqual(m("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nextra"), true)
        XCTAssertEqual(m("GET / HTTP/1.1\r\n"), false)
        XCTAssertEqual(m("PRX"), false)
    }
}
