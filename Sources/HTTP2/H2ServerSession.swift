#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
public import GatewayCore
/// The server side of one HTTP/2 connection over nghttp2: bytes in, events out (to a delegate), bytes out. No I/O,
/// no threads: the owner feeds what it read with ``receive(_:nowMillis:)`` and writes what ``send(into:limit:)``
/// produces. nghttp2 does the framing, HPACK, stream states, flow-control accounting and RFC 9113 message checks;
/// this type adds the gateway's limits (header list size, CONTINUATION, PING/SETTINGS and reset floods).
///
/// Not reentrant: the delegate's callbacks run inside `receive` and `send`, and may call ``submitResponse``,
/// ``resumeData``, ``reset`` and ``consume`` (nghttp2 allows submitting from callbacks) but never `receive` or
/// `send` themselves.
public final class H2ServerSession {
    public weak var delegate: H2SessionDelegate?
    public let settings: H2Settings
    private var session: OpaquePointer?
    /// The request head being received (HEADERS then CONTINUATIONs: a header block is never interleaved).
    private var building: (stream: Int32, head: H2RequestHead)? = nil
    private var pingTokens: TokenBucket
    private var resetTokens: TokenBucket
    private var now: UInt64 = 0
    /// Why the session ended itself (for the log), if it did.
    public private(set) var failure: H2Failure? = nil

    public init(settings: H2Settings, delegate: H2SessionDelegate?) throws(H2Error) {
        self.settings = settings
        self.delegate = delegate
        pingTokens = TokenBucket(burst: settings.controlFrameBurst, perSecond: settings.controlFramesPerSecond)
        resetTokens = TokenBucket(burst: settings.resetBurst, perSecond: settings.resetsPerSecond)
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw H2Error("nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, h2OnBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, h2OnHeader)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, h2OnFrameRecv)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, h2OnDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, h2OnStreamClose)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw H2Error("nghttp2_option_new") }
        defer { nghttp2_option_del(option) }
        // Window updates follow what the gateway forwarded, not what arrived: that is the request-side backpressure.
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_outbound_ack(option, settings.maxOutboundAcks)
        // Our own bucket (below) answers rapid reset with ENHANCE_YOUR_CALM and a reason; nghttp2's is a backstop.
        nghttp2_option_set_stream_reset_rate_limit(option, UInt64(settings.resetBurst * 2), UInt64(settings.resetsPerSecond * 2))
        nghttp2_option_set_max_continuations(option, settings.maxContinuations)
        nghttp2_option_set_no_closed_streams(option, 1)
        let rc = nghttp2_session_server_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        guard rc == 0, session != nil else { throw H2Error("nghttp2_session_server_new2: \(rc)") }
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: settings.maxConcurrentStreams),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.streamWindow),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(settings.maxHeaderListSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
        ]
        guard nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count) == 0,
              nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, settings.connectionWindow) == 0
        else { throw H2Error("nghttp2_submit_settings") }
    }

    deinit { nghttp2_session_del(session) }

    // MARK: bytes in, bytes out

    /// Feeds bytes read from the client (the connection preface first). False: the session failed (a protocol
    /// error or a limit) and the connection should close once ``send(into:limit:)`` has taken what is queued.
    public func receive(_ bytes: UnsafeRawBufferPointer, nowMillis: UInt64) -> Bool {
        now = nowMillis
        guard !bytes.isEmpty else { return true }
        let n = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if n < 0 {
            if failure == nil { failure = .protocolError(String(cString: nghttp2_strerror(Int32(n)))) }
            // Tell the client why when the library has not already (best effort; the caller closes after sending).
            nghttp2_session_terminate_session(session, n == NGHTTP2_ERR_FLOODED.rawValue ? UInt32(NGHTTP2_ENHANCE_YOUR_CALM.rawValue) : UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            return false
        }
        return true
    }

    /// Appends frames nghttp2 has queued to `out` until it has nothing more or `out` holds `limit` bytes. Response
    /// bodies are pulled from the delegate here, so a client that does not read leaves them with their owners.
    /// False: a fatal error (close the connection).
    public func send(into out: ByteBuffer, limit: Int) -> Bool {
        while out.readableBytes < limit {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 {
                if failure == nil { failure = .protocolError(String(cString: nghttp2_strerror(Int32(n)))) }
                return false
            }
            if n == 0 { break }
            out.append(UnsafeRawBufferPointer(start: data, count: n))
        }
        return true
    }

    /// The session wants more input (false once GOAWAY was exchanged and the last stream closed, or it failed).
    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    /// The session has frames to write.
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
    /// Neither: the connection is finished.
    public var isFinished: Bool { !wantsRead && !wantsWrite }

    // MARK: the application's side

    /// Sends a response head; with `hasBody` the body is pulled through ``H2SessionDelegate/h2ResponseBody``.
    /// `fields` are lower-case names and values (no pseudo-headers, no connection-specific fields).
    /// `fields` index `bytes` (names lower-case; no pseudo-headers, no connection-specific fields).
    public func submitResponse(stream: Int32, status: Int, bytes: [UInt8], fields: [(name: Range<Int>, value: Range<Int>)],
                               hasBody: Bool) -> Bool {
        var statusDigits: (UInt8, UInt8, UInt8) = (UInt8(48 + status / 100 % 10), UInt8(48 + status / 10 % 10), UInt8(48 + status % 10))
        let statusName: StaticString = ":status"
        let none = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        return bytes.withUnsafeBytes { raw -> Bool in
            withUnsafeMutableBytes(of: &statusDigits) { digits -> Bool in
                let base = UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: UInt8.self))
                var nva: [nghttp2_nv] = []
                nva.reserveCapacity(fields.count + 1)
                nva.append(nghttp2_nv(name: UnsafeMutablePointer(mutating: statusName.utf8Start),
                                      value: digits.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                      namelen: statusName.utf8CodeUnitCount, valuelen: 3, flags: none))
                for f in fields {
                    nva.append(nghttp2_nv(name: base! + f.name.lowerBound, value: base! + f.value.lowerBound,
                                          namelen: f.name.count, valuelen: f.value.count, flags: none))
                }
                if hasBody {
                    var provider = nghttp2_data_provider(source: nghttp2_data_source(fd: 0), read_callback: h2ReadBody)
                    return nghttp2_submit_response(session, stream, nva, nva.count, &provider) == 0
                }
                return nghttp2_submit_response(session, stream, nva, nva.count, nil) == 0
            }
        }
    }

    /// A body that answered "deferred" has more bytes (or its end): ask for it again.
    public func resumeData(stream: Int32) { _ = nghttp2_session_resume_data(session, stream) }

    /// Resets one stream (RST_STREAM with `code`).
    public func reset(stream: Int32, code: H2ErrorCode) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// `n` bytes of the stream's request body were taken on: open the stream's and the connection's windows by that.
    public func consume(stream: Int32, _ n: Int) {
        guard n > 0 else { return }
        _ = nghttp2_session_consume(session, stream, n)
    }

    /// Graceful shutdown: GOAWAY naming the last stream taken; streams in flight finish, new ones are refused.
    public func goAway() {
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                  H2ErrorCode.noError.rawValue, nil, 0)
    }

    /// Ends the session with GOAWAY(`code`); ``isFinished`` turns true once it is sent.
    public func terminate(_ code: H2ErrorCode, _ why: H2Failure) {
        if failure == nil { failure = why }
        _ = nghttp2_session_terminate_session(session, code.rawValue)
    }

    // MARK: callbacks (called by the C trampolines below)

    fileprivate func beginHeaders(stream: Int32, category: nghttp2_headers_category) {
        guard category == NGHTTP2_HCAT_REQUEST else { return }
        building = (stream, H2RequestHead())
    }

    /// False: the header block is far past the limit (a CONTINUATION flood): end the connection.
    fileprivate func header(stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        guard building?.stream == stream else { return true }   // trailers are dropped
        building!.head.listSize += name.count + value.count + 32
        if building!.head.listSize > settings.maxHeaderListSize * 2 { return false }
        let start = building!.head.bytes.count
        building!.head.bytes.append(contentsOf: name)
        building!.head.bytes.append(contentsOf: value)
        let n = start..<(start + name.count)
        let v = n.upperBound..<(n.upperBound + value.count)
        if name.first == UInt8(ascii: ":") {
            switch name.count {
            case 5 where same(name, ":path"): building!.head.path = v
            case 7 where same(name, ":method"): building!.head.method = v
            case 7 where same(name, ":scheme"): building!.head.scheme = v
            case 10 where same(name, ":authority"): building!.head.authority = v
            default: break
            }
        } else {
            building!.head.fields.append((n, v))
        }
        return true
    }

    fileprivate func frameReceived(type: UInt8, flags: UInt8, stream: Int32) {
        let endStream = flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(type) {
        case NGHTTP2_HEADERS.rawValue:
            if let b = building, b.stream == stream {
                building = nil
                delegate?.h2Request(stream: stream, head: b.head, endStream: endStream)
            } else if endStream {
                delegate?.h2RequestEnd(stream: stream)   // trailers end the request
            }
        case NGHTTP2_DATA.rawValue:
            if endStream { delegate?.h2RequestEnd(stream: stream) }
        case NGHTTP2_RST_STREAM.rawValue:
            if !resetTokens.take(now: now) { terminate(.enhanceYourCalm, .flood("RST_STREAM (rapid reset)")) }
        case NGHTTP2_PING.rawValue, NGHTTP2_SETTINGS.rawValue:
            if flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 && !pingTokens.take(now: now) {
                terminate(.enhanceYourCalm, .flood(type == UInt8(NGHTTP2_PING.rawValue) ? "PING" : "SETTINGS"))
            }
        default:
            break
        }
    }

    fileprivate func dataChunk(stream: Int32, _ bytes: UnsafeRawBufferPointer) {
        delegate?.h2RequestData(stream: stream, bytes)
    }

    fileprivate func streamClosed(stream: Int32, code: UInt32) {
        if building?.stream == stream { building = nil }
        delegate?.h2StreamClosed(stream: stream, errorCode: code)
    }

    fileprivate func readBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let delegate else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        switch delegate.h2ResponseBody(stream: stream, into: buffer) {
        case .bytes(let n, let end):
            if end { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return n
        case .deferred:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .failed:
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
    }
}

@inline(__always) private func same(_ a: UnsafeRawBufferPointer, _ b: StaticString) -> Bool {
    a.count == b.utf8CodeUnitCount && memcmp(a.baseAddress!, b.utf8Start, a.count) == 0
}

// MARK: C trampolines (user_data is the session, unretained: the session outlives its nghttp2 object)

@inline(__always) private func owner(_ p: UnsafeMutableRawPointer?) -> H2ServerSession {
    Unmanaged<H2ServerSession>.fromOpaque(p!).takeUnretainedValue()
}

private func h2OnBeginHeaders(_ s: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
    owner(user).beginHeaders(stream: frame.pointee.hd.stream_id, category: frame.pointee.headers.cat)
    return 0
}

private func h2OnHeader(_ s: OpaquePointer?, _ frame: UnsafePointer<nghttp2_frame>?, _ name: UnsafePointer<UInt8>?, _ nameLength: Int,
                        _ value: UnsafePointer<UInt8>?, _ valueLength: Int, _ flags: UInt8, _ user: UnsafeMutableRawPointer?) -> Int32 {
    guard let frame else { return 0 }
    let ok = owner(user).header(stream: frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                                value: UnsafeRawBufferPointer(start: value, count: valueLength))
    return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
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
