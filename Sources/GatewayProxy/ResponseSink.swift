import GatewayCore
import HTTP1
import HTTP2

/// Where an exchange's response goes, in typed parts: a head (the upstream's, or one the gateway made), body
/// bytes, the end. An HTTP/1.1 connection writes them as HTTP/1.1 (`HTTP1ResponseWriter`); an HTTP/2 stream
/// submits them to nghttp2 (`H2Stream`), so an h2 response is never written as HTTP/1.1 text and parsed again.
///
/// The sink only frames; the exchange decides (status, which fields, when to close) and flushes. Loop-confined.
protocol ResponseSink: AnyObject {
    /// Response bytes produced over the sink's life (head and body as the client receives them; bytes_out is
    /// the difference across one response).
    var bytesOut: Int { get }

    /// An interim response (1xx other than 100 and 101) for the clients that know them.
    func sendInterim(_ response: HTTP1ResponseHead, request: HTTP1RequestHead)
    /// `100 Continue`, when the request expects it; whether one was sent.
    func sendContinue(request: HTTP1RequestHead) -> Bool
    /// The upstream's final response head. `closeAfter`: the connection ends with this response; a sink whose
    /// framing needs the connection's end to end the body sets it.
    func sendHead(_ response: HTTP1ResponseHead, request: HTTP1RequestHead, closeAfter: inout Bool)
    /// Response body bytes, after `sendHead`.
    func sendBody(_ bytes: UnsafeRawBufferPointer)
    /// The response's trailers, before `sendEnd` (dropped where the framing has no place for them).
    func sendTrailers(_ trailers: ResponseTrailers)
    /// The response is complete.
    func sendEnd()
    /// A whole response the gateway made. `close`: the connection ends with it; `request`: nil when no head was
    /// read (a timeout or a parse error).
    func sendLocal(_ response: LocalResponse, request: HTTP1RequestHead?, close: Bool, date: [UInt8])
}

/// An HTTP/1.1 connection's responses, written into its output buffer: the head re-framed (chunked when the
/// upstream's body has no length and the client speaks 1.1), `Connection` as the exchange decided.
final class HTTP1ResponseWriter: ResponseSink {
    private let out: ByteBuffer
    /// The current response's body goes out as chunks.
    private var chunked = false
    private(set) var bytesOut = 0

    init(out: ByteBuffer) { self.out = out }

    /// Runs `write` and counts what it appended.
    @inline(__always) private func counting(_ write: () -> Void) {
        let before = out.readableBytes
        write()
        bytesOut += out.readableBytes - before
    }

    func sendInterim(_ response: HTTP1ResponseHead, request: HTTP1RequestHead) {
        // 100 was answered by us already and 101 can't happen (Upgrade is not forwarded); others (103 Early
        // Hints) reach HTTP/1.1 clients.
        guard response.status != 100 && response.status != 101 && request.version == .http11 else { return }
        counting {
            HeaderFilter.appendClientResponseHead(response, keepFraming: true, chunked: false, connection: nil, to: out)
        }
    }

    func sendContinue(request: HTTP1RequestHead) -> Bool {
        guard request.expectsContinue && request.version == .http11 else { return false }
        counting { out.append("HTTP/1.1 100 Continue\r\n\r\n" as StaticString) }
        return true
    }

    func sendHead(_ response: HTTP1ResponseHead, request: HTTP1RequestHead, closeAfter: inout Bool) {
        switch response.framing {
        case .none, .contentLength:
            chunked = false
        case .chunked, .untilClose:
            chunked = request.version == .http11
            if !chunked { closeAfter = true }   // HTTP/1.0: the end of the body is the end of the connection
        }
        let connection: StaticString? = closeAfter ? "close" : (request.version == .http10 ? "keep-alive" : nil)
        let keepFraming = request.methodIs("HEAD") || response.status == 304
        counting {
            HeaderFilter.appendClientResponseHead(response, keepFraming: keepFraming, chunked: chunked,
                                                  connection: connection, to: out)
        }
    }

    @inline(__always) func sendBody(_ bytes: UnsafeRawBufferPointer) {
        counting { if chunked { out.appendChunk(bytes) } else { out.append(bytes) } }
    }

    /// Kept for the last chunk; a body framed by Content-Length has no room for trailers.
    private var trailers: ResponseTrailers? = nil

    func sendTrailers(_ trailers: ResponseTrailers) {
        if chunked { self.trailers = trailers }
    }

    func sendEnd() {
        if chunked {
            if let t = trailers {
                trailers = nil
                counting { out.appendLastChunk(trailers: t) }
            } else {
                counting { out.appendLastChunk() }
            }
        }
        chunked = false
    }

    func sendLocal(_ response: LocalResponse, request: HTTP1RequestHead?, close: Bool, date: [UInt8]) {
        chunked = false
        trailers = nil
        counting { response.append(to: out, close: close, keepAlive10: request?.version == .http10 && !close, date: date) }
    }
}
