#if canImport(Glibc)
import Glibc
#endif
import CNGHTTP2
public import GatewayCore

/// Events of an ``H2ClientSession``, delivered inside `receive` and `send`.
public protocol H2ClientDelegate: AnyObject {
    /// A complete header block on a request's stream: a response head (`head.status` ≥ 100; 1xx ones are
    /// interim) or, after the final head, trailers (`head.status` 0). `endStream`: the response ends with it.
    func h2ResponseHeaders(stream: Int32, head: H2ResponseHead, endStream: Bool)
    /// Response body bytes (to be acknowledged with ``H2ClientSession/consume(stream:_:)`` once taken on).
    func h2ResponseData(stream: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The response body ended (END_STREAM on a DATA frame).
    func h2ResponseEnd(stream: Int32)
    /// The stream closed: complete both ways, or reset (`errorCode` ≠ 0; REFUSED_STREAM: the server never
    /// processed it, as for streams above a GOAWAY's last stream id).
    func h2StreamClosed(stream: Int32, errorCode: UInt32)
    /// Up to `into.count` bytes of the stream's request body.
    func h2RequestBody(stream: Int32, into: UnsafeMutableRawBufferPointer) -> H2BodyRead
    /// The server sent GOAWAY: no new streams on this session.
    func h2GoAway()
}

/// The client side of one HTTP/2 connection to an upstream over nghttp2, the mirror of ``H2ServerSession``: bytes
/// in, events out, bytes out; no I/O. Streams are requests the owner submits; response bodies are acknowledged
/// (window updates) only as the owner takes them on, which is the response-side backpressure. Not reentrant.
public final class H2ClientSession: H2SessionCallbacks {
    public weak var delegate: H2ClientDelegate?
    private let maxHeaderListSize: Int
    /// The header block being received.
    private var building: (stream: Int32, head: H2ResponseHead)? = nil
    public private(set) var failure: String? = nil
    /// The server said GOAWAY (or the session failed): no new streams.
    public private(set) var goingAway = false

    /// `streamWindow`/`connectionWindow`: response bytes the server may send before the owner took them on.
    public init(settings: H2Settings, delegate: H2ClientDelegate?) throws(H2Error) {
        self.delegate = delegate
        maxHeaderListSize = settings.maxHeaderListSize
        super.init()
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw H2Error("nghttp2_session_callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        H2SessionCallbacks.install(callbacks)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw H2Error("nghttp2_option_new") }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_max_continuations(option, settings.maxContinuations)
        nghttp2_option_set_max_outbound_ack(option, settings.maxOutboundAcks)
        let rc = nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        guard rc == 0, session != nil else { throw H2Error("nghttp2_session_client_new2: \(rc)") }
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.streamWindow),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(settings.maxHeaderListSize)),
        ]
        // The client preface (the magic is nghttp2's) starts with these SETTINGS.
        guard nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count) == 0,
              nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, settings.connectionWindow) == 0
        else { throw H2Error("nghttp2_submit_settings") }
    }

    // MARK: bytes in, bytes out

    /// Feeds bytes read from the server. False: the session failed; close the connection.
    public func receive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return true }
        let n = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if n < 0 {
            if failure == nil { failure = String(cString: nghttp2_strerror(Int32(n))) }
            goingAway = true
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_PROTOCOL_ERROR.rawValue))
            return false
        }
        return true
    }

    /// Appends queued frames to `out` until nothing is left or `out` holds `limit` bytes. False: fatal.
    public func send(into out: ByteBuffer, limit: Int) -> Bool {
        if let error = pull(into: out, limit: limit) {
            if failure == nil { failure = error }
            goingAway = true
            return false
        }
        // A connection error nghttp2 answered itself (its GOAWAY just went into `out`), or GOAWAY both ways with
        // no stream left: no new streams; the owner closes once `out` is written.
        if !wantsRead { goingAway = true }
        return true
    }

    /// Stream ids are never reused: a connection that has used them up (2^31 - 1 of them, odd) takes no new stream.
    public var hasStreamIDs: Bool { nghttp2_session_get_next_stream_id(session) < UInt32(Int32.max) - 1 }

    /// Streams that may be open at once: the server's SETTINGS_MAX_CONCURRENT_STREAMS (unbounded until it says).
    public var maxConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    // MARK: the application's side

    /// Submits a request: `head` holds the pseudo-headers first (`:method`, `:scheme`, `:authority`, `:path`), then
    /// the fields. With `hasBody` the body is pulled through ``H2ClientDelegate/h2RequestBody``. The stream id, or
    /// nil when nghttp2 refused (no stream ids left, the session is going away).
    public func submitRequest(_ head: H2Fields, hasBody: Bool) -> Int32? {
        guard !goingAway else { return nil }
        let id = head.withNV { nva -> Int32 in
            if hasBody {
                var provider = H2SessionCallbacks.bodyProvider
                return nghttp2_submit_request(session, nil, nva, nva.count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, nva, nva.count, nil, nil)
        }
        return id > 0 ? id : nil
    }

    /// Ends the session politely (GOAWAY, no error): streams in flight finish.
    public func goAway() {
        goingAway = true
        _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, H2ErrorCode.noError.rawValue, nil, 0)
    }

    // MARK: callbacks

    override func beginHeaders(stream: Int32, category: nghttp2_headers_category) {
        building = (stream, H2ResponseHead())
    }

    override func header(stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int32 {
        guard building?.stream == stream else { return 0 }
        building!.head.listSize += name.count + value.count + 32
        if building!.head.listSize > maxHeaderListSize { return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue }   // reset by nghttp2 (callback failure)
        if name.first == UInt8(ascii: ":") {
            if name.count == 7 && memcmp(name.baseAddress!, ":status", 7) == 0 && value.count == 3
                && value.allSatisfy({ $0 >= 48 && $0 <= 57 }) && value[0] != 48 {
                building!.head.status = Int(value[0] - 48) * 100 + Int(value[1] - 48) * 10 + Int(value[2] - 48)
            } else {
                building!.head.malformed = true
            }
            return 0
        }
        let start = building!.head.bytes.count
        building!.head.bytes.append(contentsOf: name)
        building!.head.bytes.append(contentsOf: value)
        let n = start..<(start + name.count)
        building!.head.fields.append((n, n.upperBound..<(n.upperBound + value.count)))
        return 0
    }

    override func frameReceived(type: UInt8, flags: UInt8, stream: Int32) {
        let endStream = flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(type) {
        case NGHTTP2_HEADERS.rawValue:
            guard let b = building, b.stream == stream else { return }
            building = nil
            delegate?.h2ResponseHeaders(stream: stream, head: b.head, endStream: endStream)
        case NGHTTP2_DATA.rawValue:
            if endStream { delegate?.h2ResponseEnd(stream: stream) }
        case NGHTTP2_GOAWAY.rawValue:
            goingAway = true
            delegate?.h2GoAway()
        default:
            break
        }
    }

    override func dataChunk(stream: Int32, _ bytes: UnsafeRawBufferPointer) {
        delegate?.h2ResponseData(stream: stream, bytes)
    }

    override func streamClosed(stream: Int32, code: UInt32) {
        if building?.stream == stream { building = nil }
        delegate?.h2StreamClosed(stream: stream, errorCode: code)
    }

    override func readBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let delegate else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        return h2BodyResult(session, stream: stream, delegate.h2RequestBody(stream: stream, into: buffer), flags: flags)
    }
}
