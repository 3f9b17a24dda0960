#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
import GatewayCore

/// What nghttp2 calls back into, for both session kinds (``H2ServerSession``, ``H2ClientSession``): the C
/// trampolines below turn `user_data` (the session, unretained: it outlives its nghttp2 object) into a call of
/// these. Subclassed only in this module; nothing here is for use outside it.
public class H2SessionCallbacks {
    /// The nghttp2 session (set by the subclass's initializer; deleted with this object).
    var session: OpaquePointer?

    init() {}

    deinit { nghttp2_session_del(session) }

    /// Appends the frames nghttp2 has queued to `out` until it has none or `out` holds `limit` bytes (bodies are
    /// pulled through `readBody` here). Nil, or nghttp2's error text when the session failed.
    func pull(into out: ByteBuffer, limit: Int) -> String? {
        while out.readableBytes < limit {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { return String(cString: nghttp2_strerror(Int32(n))) }
            if n == 0 { break }
            out.append(UnsafeRawBufferPointer(start: data, count: n))
        }
        return nil
    }

    /// The session wants more input (false once GOAWAY was exchanged and the last stream closed, or it failed).
    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    /// The session has frames to write.
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// A body that answered "deferred" has more bytes (or its end): ask for it again.
    public func resumeData(stream: Int32) { _ = nghttp2_session_resume_data(session, stream) }

    /// Resets one stream (RST_STREAM with `code`).
    public func reset(stream: Int32, code: H2ErrorCode) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// `n` bytes of a stream's incoming body were taken on: open the stream's and the connection's windows by that.
    public func consume(stream: Int32, _ n: Int) {
        guard n > 0 else { return }
        _ = nghttp2_session_consume(session, stream, n)
    }

    /// `n` bytes of a stream's body are held for a slow reader: the connection's window reopens now (the other
    /// streams keep flowing), the stream's only by ``consumeStream(_:_:)`` once the reader took them.
    public func consumeConnection(_ n: Int) {
        guard n > 0 else { return }
        _ = nghttp2_session_consume_connection(session, n)
    }

    /// The stream-level half of ``consume(stream:_:)`` (after ``consumeConnection(_:)``).
    public func consumeStream(_ stream: Int32, _ n: Int) {
        guard n > 0 else { return }
        _ = nghttp2_session_consume_stream(session, stream, n)
    }

    func beginHeaders(stream: Int32, category: nghttp2_headers_category) {}
    /// 0, or the nghttp2 error code that answers the header (a stream or a connection failure).
    func header(stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int32 { 0 }
    func frameReceived(type: UInt8, flags: UInt8, stream: Int32) {}
    func dataChunk(stream: Int32, _ bytes: UnsafeRawBufferPointer) {}
    func streamClosed(stream: Int32, code: UInt32) {}
    func readBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }

    /// Points `callbacks` at the trampolines.
    static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, h2OnBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, h2OnHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, h2OnFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, h2OnDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, h2OnStreamClose)
    }

    /// A body pulled through `readBody`.
    static var bodyProvider: nghttp2_data_provider {
        nghttp2_data_provider(source: nghttp2_data_source(fd: 0), read_callback: h2ReadBody)
    }
}

@inline(__always) private func owner(_ p: UnsafeMutableRawPointer?) -> H2SessionCallbacks {
    Unmanaged<H2SessionCallbacks>.fromOpaque(p!).takeUnretainedValue()
}

private func h2OnBeginHeaders(_ s: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    owner(user).beginHeaders(stream: frame.pointee.hd.stream_id, category: frame.pointee.headers.cat)
    return 0
}

private func h2OnHeader(_ s: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
                        _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    return owner(user).header(stream: frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                              value: UnsafeRawBufferPointer(start: value, count: valueLength))
}

private func h2OnFrameRecv(_ s: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    owner(user).frameReceived(type: frame.pointee.hd.type, flags: frame.pointee.hd.flags, stream: frame.pointee.hd.stream_id)
    return 0
}

private func h2OnDataChunk(_ s: OpaquePointer?, _ flags: UInt8, _ stream: Int32, _ data: UnsafePointer<UInt8>?, _ length: Int,
                           _ user: UnsafeMutableRawPointer?) -> Int32 {
    owner(user).dataChunk(stream: stream, UnsafeRawBufferPointer(start: data, count: length))
    return 0
}

private func h2OnStreamClose(_ s: OpaquePointer?, _ stream: Int32, _ code: UInt32, _ user: UnsafeMutableRawPointer?) -> Int32 {
    owner(user).streamClosed(stream: stream, code: code)
    return 0
}

private func h2ReadBody(_ s: OpaquePointer?, _ stream: Int32, _ buf: UnsafeMutablePointer<UInt8>?, _ length: Int,
                        _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
                        _ user: UnsafeMutableRawPointer?) -> Int {
    owner(user).readBody(stream: stream, into: UnsafeMutableRawBufferPointer(start: buf, count: length), flags: flags!)
}
