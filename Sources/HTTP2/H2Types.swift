#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2

/// Limits and windows of one HTTP/2 server session.
public struct H2Settings: Sendable {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: more open streams are refused (RST_STREAM REFUSED_STREAM).
    public var maxConcurrentStreams: UInt32 = 100
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a client may send on one stream before the gateway has
    /// forwarded them.
    public var streamWindow: UInt32 = 256 * 1024
    /// The connection-level receive window (bounds the request body bytes buffered for all streams together).
    public var connectionWindow: Int32 = 1 << 20
    /// SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 size: name + value + 32 per field). Heads over it are answered 431 by
    /// the HTTP/1.1 rules; a header block over twice it ends the connection.
    public var maxHeaderListSize = 32 * 1024
    /// CONTINUATION frames allowed after one HEADERS frame.
    public var maxContinuations = 16
    /// PING and SETTINGS frames (not ACKs) from the client: a token bucket.
    public var controlFrameBurst = 100
    public var controlFramesPerSecond = 10
    /// RST_STREAM frames from the client (rapid reset): a token bucket.
    public var resetBurst = 200
    public var resetsPerSecond = 20
    /// ACKs (SETTINGS, PING) queued for a client that does not read before the session is ended.
    public var maxOutboundAcks = 1000

    public init() {}
}

/// A request's header block as received: every name and value back to back in `bytes` (one allocation per head),
/// the pseudo-header fields apart, names lower-case as HTTP/2 requires.
public struct H2RequestHead: Sendable {
    public var bytes: [UInt8] = []
    public var method: Range<Int> = 0..<0
    public var path: Range<Int> = 0..<0
    public var authority: Range<Int> = 0..<0
    public var scheme: Range<Int> = 0..<0
    public var fields: [(name: Range<Int>, value: Range<Int>)] = []
    /// The RFC 9113 size of the list so far.
    public var listSize = 0

    public init() { bytes.reserveCapacity(512) }

    /// `bytes[r]` as text (tests, logs).
    public func string(_ r: Range<Int>) -> String { String(decoding: bytes[r], as: UTF8.self) }

    /// Whether `bytes[r]` is exactly `literal`.
    @inline(__always) public func equals(_ r: Range<Int>, _ literal: StaticString) -> Bool {
        guard r.count == literal.utf8CodeUnitCount else { return false }
        return bytes.withUnsafeBytes { memcmp($0.baseAddress! + r.lowerBound, literal.utf8Start, r.count) == 0 }
    }
}

/// A header block to send (trailers, a request head): lower-case names and values back to back in `bytes`.
public struct H2Fields: Sendable {
    public var bytes: [UInt8] = []
    public var fields: [(name: Range<Int>, value: Range<Int>)] = []

    public init() {}

    public init(bytes: [UInt8], fields: [(name: Range<Int>, value: Range<Int>)]) {
        self.bytes = bytes
        self.fields = fields
    }

    public var isEmpty: Bool { fields.isEmpty }

    /// Appends one field (`name` as given: the caller lower-cases).
    public mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let n = bytes.count..<(bytes.count + name.count)
        bytes.append(contentsOf: name)
        bytes.append(contentsOf: value)
        fields.append((n, n.upperBound..<bytes.count))
    }

    /// Appends one field, its name lower-cased on the way in (HTTP/2 field names are lower-case).
    public mutating func addLowercased(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let n = bytes.count..<(bytes.count + name.count)
        for c in name { bytes.append(c >= 65 && c <= 90 ? c | 0x20 : c) }
        bytes.append(contentsOf: value)
        fields.append((n, n.upperBound..<bytes.count))
    }

    /// The block as nghttp2 name/value pairs, valid inside `body` only.
    func withNV<R>(_ body: ([nghttp2_nv]) -> R) -> R {
        bytes.withUnsafeBytes { raw -> R in
            let base = UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: UInt8.self))
            let none = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
            var nva: [nghttp2_nv] = []
            nva.reserveCapacity(fields.count)
            for f in fields {
                nva.append(nghttp2_nv(name: base! + f.name.lowerBound, value: base! + f.value.lowerBound,
                                      namelen: f.name.count, valuelen: f.value.count, flags: none))
            }
            return body(nva)
        }
    }
}

/// A response's header block as received (a client session): `status` from `:status` (0 when the block has none:
/// trailers), every other name and value back to back in `bytes`, names lower-case.
public struct H2ResponseHead: Sendable {
    public var bytes: [UInt8] = []
    public var status = 0
    public var fields: [(name: Range<Int>, value: Range<Int>)] = []
    /// The RFC 9113 size of the list so far.
    public var listSize = 0
    /// A pseudo-header other than `:status`, or `:status` not three digits: the response is malformed.
    public var malformed = false

    public init() {}

    public func string(_ r: Range<Int>) -> String { String(decoding: bytes[r], as: UTF8.self) }
}

/// What a body source (a response body on a server session, a request body on a client session) answers when
/// nghttp2 asks for bytes.
public enum H2BodyRead {
    /// `n` bytes were written; `end`: that was the last of the body.
    case bytes(Int, end: Bool)
    /// `n` bytes were written and they were the last of the body; the stream ends with these trailers.
    case trailers(Int, H2Fields)
    /// Nothing now: call ``H2ServerSession/resumeData(stream:)`` when there is.
    case deferred
    /// The body cannot be completed: the stream is reset.
    case failed
}

/// Events of an ``H2ServerSession``, delivered inside `receive` and `send`.
public protocol H2SessionDelegate: AnyObject {
    /// A request's complete header block; `endStream`: it has no body.
    func h2Request(stream: Int32, head: H2RequestHead, endStream: Bool)
    /// Request body bytes (to be acknowledged with ``H2ServerSession/consume(stream:_:)`` once taken on).
    func h2RequestData(stream: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The request's trailers (before ``h2RequestEnd(stream:)``): lower-case names, no pseudo-headers.
    func h2RequestTrailers(stream: Int32, _ trailers: H2Fields)
    /// The request body ended (END_STREAM).
    func h2RequestEnd(stream: Int32)
    /// The stream closed: its response was sent and its request ended, or it was reset (`errorCode` ≠ 0).
    func h2StreamClosed(stream: Int32, errorCode: UInt32)
    /// Up to `into.count` bytes of the stream's response body.
    func h2ResponseBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead
}

/// HTTP/2 error codes the gateway sends (RFC 9113 section 7).
public enum H2ErrorCode: UInt32, Sendable {
    case noError = 0x0
    case protocolError = 0x1
    case internalError = 0x2
    case refusedStream = 0x7
    case cancel = 0x8
    case enhanceYourCalm = 0xb
}

/// Why a session ended itself.
public enum H2Failure: Sendable, Equatable, CustomStringConvertible {
    case protocolError(String)
    case flood(String)

    public var description: String {
        switch self {
        case .protocolError(let s): "protocol error: \(s)"
        case .flood(let what): "\(what) flood"
        }
    }

    /// The metric label: `ping_flood`, `settings_flood`, `rapid_reset` or `protocol_error`.
    public var label: String {
        switch self {
        case .protocolError: "protocol_error"
        case .flood("PING"): "ping_flood"
        case .flood("SETTINGS"): "settings_flood"
        case .flood: "rapid_reset"
        }
    }
}

public struct H2Error: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// A token bucket over monotonic milliseconds: `burst` tokens, refilled at `perSecond`.
struct TokenBucket {
    private let burst: Double
    private let perMilli: Double
    private var tokens: Double
    private var last: UInt64 = 0

    init(burst: Int, perSecond: Int) {
        self.burst = Double(burst)
        perMilli = Double(perSecond) / 1000
        tokens = Double(burst)
    }

    /// Takes one token; false when there is none.
    mutating func take(now: UInt64) -> Bool {
        if now > last {
            tokens = min(burst, tokens + Double(now - last) * perMilli)
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// The client connection preface (RFC 9113 3.4), the first bytes of an h2c prior-knowledge connection.
public enum H2Preface {
    public static let bytes: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whether `prefix` could still be (or already is) the preface: nil = not yet known (too short).
    public static func matches(_ prefix: UnsafeRawBufferPointer) -> Bool? {
        let n = min(prefix.count, bytes.count)
        for i in 0..<n where prefix[i] != bytes[i] { return false }
        return n == bytes.count ? true : nil
    }
}

extension H2SessionDelegate {
    /// Delegates that do not relay request trailers drop them.
    public func h2RequestTrailers(stream: Int32, _ trailers: H2Fields) {}
}
