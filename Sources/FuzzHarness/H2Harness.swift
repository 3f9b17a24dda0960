import GatewayCore
import HTTP2

/// The `http2-session` target: `H2ServerSession` (nghttp2 plus the gateway's limits) fed the client preface and
/// then the input as client frames, in two pieces split at a data-derived point, with a responder that answers every
/// request (no body, or 10 or 20 KB) and takes request bodies on at once — so streams open, flow, close and reset.
///
/// Invariants: request heads arrive once per stream, on odd (client) stream ids, within twice the header list
/// limit; request body bytes only for streams with a head; what the session writes is whole frames, each within
/// 16 KiB + 9 bytes of header; a session that failed or ended itself stops wanting input.
enum H2Harness {
    final class Responder: H2SessionDelegate {
        unowned(unsafe) var session: H2ServerSession!
        var open: Set<Int32> = []
        var bodies: [Int32: Int] = [:]
        let limit: Int
        static let contentType = Array("content-typetext/plain".utf8)

        init(limit: Int) { self.limit = limit }

        func h2Request(stream: Int32, head: H2RequestHead, endStream: Bool) {
            fuzzCheck(stream > 0 && stream % 2 == 1, "request head on a non-client stream \(stream)")
            fuzzCheck(!open.contains(stream), "two request heads on stream \(stream)")
            fuzzCheck(head.listSize <= 2 * limit, "a head of \(head.listSize) bytes passed the limit")
            open.insert(stream)
            let size = (head.path.count % 3) * 10_000
            bodies[stream] = size
            _ = session.submitResponse(stream: stream, status: 200 + head.fields.count % 300, bytes: Self.contentType,
                                       fields: [(0..<12, 12..<22)], hasBody: size > 0)
        }

        func h2RequestData(stream: Int32, _ bytes: UnsafeRawBufferPointer) {
            fuzzCheck(open.contains(stream), "request data on stream \(stream) without a head")
            session.consume(stream: stream, bytes.count)
        }

        func h2RequestEnd(stream: Int32) {}

        func h2StreamClosed(stream: Int32, errorCode: UInt32) {
            open.remove(stream)
            bodies[stream] = nil
        }

        func h2ResponseBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead {
            guard let left = bodies[stream] else { return .failed }
            let n = min(left, into.count)
            if n > 0 { into.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0x61, count: n) }
            bodies[stream] = left - n
            return .bytes(n, end: left == n)
        }
    }

    static func run(_ data: UnsafeRawBufferPointer) {
        var settings = H2Settings()
        settings.maxHeaderListSize = 4096
        settings.maxConcurrentStreams = 8
        let responder = Responder(limit: settings.maxHeaderListSize)
        guard let session = try? H2ServerSession(settings: settings, delegate: responder) else {
            fuzzCheck(false, "a session could not be created")
            return
        }
        responder.session = session
        let out = ByteBuffer(capacity: 4096)
        var now: UInt64 = 1_000
        var alive = H2Preface.bytes.withUnsafeBytes { session.receive($0, nowMillis: now) }
        fuzzCheck(alive, "the preface alone failed")
        let cut = data.isEmpty ? 0 : Int(data[0]) * data.count / 256
        for piece in [UnsafeRawBufferPointer(rebasing: data[0..<cut]), UnsafeRawBufferPointer(rebasing: data[cut...])] where alive {
            now += 37
            alive = session.receive(piece, nowMillis: now)
            _ = session.send(into: out, limit: 1 << 20)
            if !alive || session.failure != nil {
                _ = session.send(into: out, limit: 1 << 20)
                fuzzCheck(!session.wantsRead, "a failed session still wants input")
            }
        }
        checkFrames(out.readable)
    }

    /// Server output is a sequence of whole frames.
    static func checkFrames(_ bytes: UnsafeRawBufferPointer) {
        var i = 0
        while i < bytes.count {
            fuzzCheck(i + 9 <= bytes.count, "output ends inside a frame header")
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            fuzzCheck(n <= 16_384, "a frame of \(n) bytes exceeds the default maximum frame size")
            i += 9 + n
        }
        fuzzCheck(i == bytes.count, "output ends inside a frame")
    }
}
