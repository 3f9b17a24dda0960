import GatewayCore
import HTTP2

/// A body queued for nghttp2 to pull, with its end and trailers: an HTTP/2 client's response (`H2Stream`) or an
/// HTTP/2 upstream's request (`UpstreamH2Stream`). nghttp2 asks (`read`) as windows allow; an empty queue that is
/// not ended answers "deferred", and `wake` says when it must be asked again. Loop-confined.
struct H2OutgoingBody {
    let bytes = ByteBuffer(capacity: 0)
    /// The body is complete once `bytes` is empty.
    var ended = false
    /// Sent after the last bytes (the stream ends with them).
    private(set) var trailers: H2Fields? = nil
    private var deferred = false

    /// The trailer fields that may be relayed (`HeaderFilter.allowedInTrailer`); none kept: none sent.
    mutating func setTrailers(_ trailers: H2Fields) {
        var kept = H2Fields()
        trailers.bytes.withUnsafeBytes { p in
            for f in trailers.fields {
                let name = UnsafeRawBufferPointer(rebasing: p[f.name])
                if HeaderFilter.allowedInTrailer(name) { kept.add(name, UnsafeRawBufferPointer(rebasing: p[f.value])) }
            }
        }
        self.trailers = kept.isEmpty ? nil : kept
    }

    /// More bytes or the end came: true when nghttp2 answered "deferred" last and must be told (`resumeData`).
    mutating func wake() -> Bool {
        guard deferred && (!bytes.isEmpty || ended) else { return false }
        deferred = false
        return true
    }

    /// Up to `buffer.count` bytes for nghttp2, and how many were taken.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> (H2BodyRead, taken: Int) {
        let n = min(buffer.count, bytes.readableBytes)
        if n > 0 {
            buffer.baseAddress!.copyMemory(from: bytes.readable.baseAddress!, byteCount: n)
            bytes.consume(n)
            if bytes.isEmpty { bytes.clear() }
        }
        if bytes.isEmpty && ended {
            if let t = trailers {
                trailers = nil
                return (.trailers(n, t), n)
            }
            return (.bytes(n, end: true), n)
        }
        if n == 0 {
            deferred = true
            return (.deferred, 0)
        }
        return (.bytes(n, end: false), n)
    }
}
