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
public final class H2ServerSession: H2SessionCallbacks {
    public weak var delegate: H2SessionDelegate?
    public let settings: H2Settings
    /// The request head being received (HEADERS then CONTINUATIONs: a header block is never interleaved).
    private var building: (stream: Int32, head: H2RequestHead)? = nil
    /// A request's trailers being received.
    private var trailers: (stream: Int32, fields: H2Fields, size: Int)? = nil
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
        super.init()
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw H2Error("nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        H2SessionCallbacks.install(callbacks)
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
        if let error = pull(into: out, limit: limit) {
            if failure == nil { failure = .protocolError(error) }
            return false
        }
        return true
    }

    /// The session wants more input (false once GOAWAY was exchanged and the last stream closed, or it failed);
    /// neither that nor frames to write: the connection is finished.
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
                    var provider = H2SessionCallbacks.bodyProvider
                    return nghttp2_submit_response(session, stream, nva, nva.count, &provider) == 0
                }
                return nghttp2_submit_response(session, stream, nva, nva.count, nil) == 0
            }
        }
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

    override func beginHeaders(stream: Int32, category: nghttp2_headers_category) {
        if category == NGHTTP2_HCAT_HEADERS {
            trailers = (stream, H2Fields(), 0)   // a second header block on a request stream: its trailers
            return
        }
        guard category == NGHTTP2_HCAT_REQUEST else { return }
        building = (stream, H2RequestHead())
    }

    /// A failure code: the header block is far past the limit (a CONTINUATION flood): end the connection.
    override func header(stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int32 {
        guard building?.stream == stream else {
            guard trailers?.stream == stream, name.first != UInt8(ascii: ":") else { return 0 }
            trailers!.size += name.count + value.count + 32
            if trailers!.size > settings.maxHeaderListSize * 2 { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
            // Past the limit the trailers are dropped (the request itself goes on).
            if trailers!.size <= settings.maxHeaderListSize { trailers!.fields.add(name, value) }
            return 0
        }
        building!.head.listSize += name.count + value.count + 32
        if building!.head.listSize > settings.maxHeaderListSize * 2 { return NGHTTP2_ERR_CALLBACK_FAILURE.rawValue }
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
        return 0
    }

    override func frameReceived(type: UInt8, flags: UInt8, stream: Int32) {
        let endStream = flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(type) {
        case NGHTTP2_HEADERS.rawValue:
            if let b = building, b.stream == stream {
                building = nil
                delegate?.h2Request(stream: stream, head: b.head, endStream: endStream)
            } else if endStream {
                if let t = trailers, t.stream == stream, !t.fields.isEmpty, t.size <= settings.maxHeaderListSize {
                    delegate?.h2RequestTrailers(stream: stream, t.fields)
                }
                trailers = nil
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

    override func dataChunk(stream: Int32, _ bytes: UnsafeRawBufferPointer) {
        delegate?.h2RequestData(stream: stream, bytes)
    }

    override func streamClosed(stream: Int32, code: UInt32) {
        if building?.stream == stream { building = nil }
        delegate?.h2StreamClosed(stream: stream, errorCode: code)
    }

    override func readBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let delegate else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        return h2BodyResult(session, stream: stream, delegate.h2ResponseBody(stream: stream, into: buffer), flags: flags)
    }
}

/// A body source's answer as nghttp2's read callback returns it; trailers are submitted here (nghttp2 allows it
/// from inside the callback, once the DATA frame says it does not end the stream).
func h2BodyResult(_ session: OpaquePointer?, stream: Int32, _ read: H2BodyRead, flags: UnsafeMutablePointer<UInt32>) -> Int {
    switch read {
    case .bytes(let n, let end):
        if end { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    case .trailers(let n, let trailers):
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        if !trailers.isEmpty {
            let rc = trailers.withNV { nva in nghttp2_submit_trailer(session, stream, nva, nva.count) }
            if rc == 0 { flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue }
        }
        return n
    case .deferred:
        return Int(NGHTTP2_ERR_DEFERRED.rawValue)
    case .failed:
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
}

@inline(__always) private func same(_ a: UnsafeRawBufferPointer, _ b: StaticString) -> Bool {
    a.count == b.utf8CodeUnitCount && memcmp(a.baseAddress!, b.utf8Start, a.count) == 0
}
