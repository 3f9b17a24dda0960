import GatewayCore
import GatewayCrypto
import HTTP1

/// `X-Request-Id`: the client's value when it sent exactly one that is safe to log (1–128 visible ASCII characters
/// other than `"` and `\`), else one generated here — 128 bits in UUID layout: a random half fixed per loop and a
/// random start plus a counter, so ids are unique without a random draw per request. Forwarded to the upstream
/// and written to the access log.
final class RequestIDGenerator {
    private let high: UInt64
    private var low: UInt64

    init() {
        let r = SecureRandom.bytes(16)
        high = r[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = r[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    @inline(__always) func next() -> UInt64 {
        low &+= 1
        return low
    }

    /// Writes the id for counter value `low` (36 characters: 8-4-4-4-12 hex digits) into `out`.
    func format(_ low: UInt64, into out: UnsafeMutableRawBufferPointer) {
        let d = Self.digits.utf8Start
        var o = 0
        @inline(__always) func put(_ word: UInt64, _ i: Int) {
            out[o] = d[Int((word >> UInt64(60 - 4 * i)) & 0xF)]
            o += 1
        }
        for i in 0..<16 {
            if i == 8 || i == 12 { out[o] = UInt8(ascii: "-"); o += 1 }
            put(high, i)
        }
        for i in 0..<16 {
            if i == 0 || i == 4 { out[o] = UInt8(ascii: "-"); o += 1 }
            put(low, i)
        }
    }

    private static let digits: StaticString = "0123456789abcdef"

    static let length = 36
}

/// Where this request's id comes from.
enum RequestID {
    /// The client's `X-Request-Id` value (a range of the head's bytes).
    case client(Range<Int>)
    case generated(UInt64)

    /// The client's usable `X-Request-Id`, or nil (absent, repeated, empty, too long or with unsafe characters).
    static func fromClient(_ head: HTTP1RequestHead) -> Range<Int>? {
        head.bytes.withUnsafeBytes { raw -> Range<Int>? in
            var found: Range<Int>? = nil
            for f in head.fields where f.name.count == 12 && HeaderFilter.eq(UnsafeRawBufferPointer(rebasing: raw[f.name]), "x-request-id") {
                if found != nil { return nil }
                found = f.value
            }
            guard let v = found, !v.isEmpty, v.count <= 128 else { return nil }
            for i in v {
                let c = raw[i]
                if c < 0x21 || c > 0x7E || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { return nil }
            }
            return v
        }
    }
}

extension ProxyExchange {
    /// A fresh id for this request, formatted into the connection's buffer.
    func generateRequestID() {
        let low = worker.requestIDs.next()
        worker.requestIDs.format(low, into: UnsafeMutableRawBufferPointer(start: generatedRequestID, count: RequestIDGenerator.length))
        exchange.requestID = .generated(low)
    }

    /// Calls `body` with the current request's id bytes.
    func withRequestID<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch exchange.requestID {
        case .client(let range)?:
            if let head = exchange.head {
                return head.bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[range])) }
            }
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .generated?:
            // Formatted once per request, in beginRequest, into the connection's buffer.
            return body(UnsafeRawBufferPointer(start: generatedRequestID, count: RequestIDGenerator.length))
        case nil:
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }
}
