import GatewayCore
import GatewayPosix
import HTTP1
import Observability

/// What carries an exchange: an HTTP/1.1 client connection (`DownstreamConnection`) or an HTTP/2 stream
/// (`H2Stream`). The exchange writes its response into the carrier's `ResponseSink` and asks the carrier, through
/// this and nothing else, for the rest: writing out, more input, deadlines, going away.
protocol ExchangeCarrier: AnyObject {
    /// Writes what the sink holds (HTTP/1.1: to the socket; HTTP/2: nghttp2 pulls the frames), then tells the
    /// exchange (`outputMoved`) unless the write closed it.
    func flushOut()
    /// Response bytes not yet on the wire (the exchange pauses its upstream above the high-water mark).
    var pendingOutput: Int { get }
    /// Of those, bytes the sink buffered that a flush would move now (HTTP/2: none, nghttp2 pulls them itself).
    var unflushedOutput: Int { get }
    /// Input the carrier holds that the exchange has not read yet (a pipelined request, body bytes).
    var hasBufferedInput: Bool { get }
    /// The exchange can take input again: hand it what is buffered, then read on.
    func resumeInput()
    /// The exchange's deadline changed (monotonic milliseconds, 0 = none): its `timedOut` is due then.
    func deadlineChanged(_ deadline: UInt64)
    /// The final response is out and the connection is to close: HTTP/1.1 lingers, a stream is done.
    func closingOutputDrained()
    /// The exchange closed (`close`): close the connection (HTTP/1.1), or reset the stream if its response is
    /// unfinished (HTTP/2).
    func exchangeClosed()
    /// The upstream answered a WebSocket handshake with 101: write the switch and tunnel both sockets (HTTP/1.1);
    /// false where no tunnel can be (an HTTP/2 stream: such a handshake was refused before it was forwarded).
    func switchProtocols(_ response: HTTP1ResponseHead, upstream: UpstreamConnection, route: CompiledRoute) -> Bool
}

/// One client request at a time, route → authenticate → forward → respond, for whichever carrier brings it: the
/// HTTP/1.1 connection (one `ProxyExchange` for the connection's life, reset between requests, so pipelined and
/// keep-alive requests allocate nothing for it) or an HTTP/2 stream (one per stream). The request arrives as an
/// `HTTP1RequestHead` and body bytes (`forwardBody`, `requestBodyEnded`), the response leaves as typed parts through
/// `sink`, the upstream is reached as its `UpstreamClient`. Loop-confined.
///
/// The decisions are the state machine's (`http`): what the body waits on, keep-alive, what a deadline means. The
/// files beside this one: +Routing (the route or endpoint a request names), +Authentication (the Authenticator and
/// its off-loop steps), +Forwarding (limited use, the upstream request), +Response (the upstream's answer, local
/// answers, the access log), +Registration, +ForwardAuth, +Tunnel (a WebSocket handshake's 101).
final class ProxyExchange: UpstreamClient {
    /// The worker outlives its connections and their exchanges, so no reference counting here.
    unowned(unsafe) let worker: ProxyWorker
    /// Set once (`attach`) by the carrier that owns this exchange, right after creating it. Touched only while the
    /// exchange is open: the carrier closes it (`close`) before it goes, and off-loop work that outlives both
    /// checks `closed` first.
    unowned(unsafe) private var carrierRef: (any ExchangeCarrier)? = nil
    let clientAddress: [UInt8]
    /// The request arrived over TLS (X-Forwarded-Proto https).
    let https: Bool
    /// The peer is one of the listener's `trusted_proxies`: its forwarding headers are kept and appended to.
    let trustedPeer: Bool
    /// Carried by an HTTP/2 stream (the access log's protocol).
    let http2: Bool
    /// Where responses go: HTTP/1.1 text into the connection's output, or the HTTP/2 stream's frames.
    let sink: any ResponseSink
    /// The decisions: phase, keep-alive, what the body waits on, what a deadline means.
    var http = HTTP1ServerStateMachine()
    /// The request in progress.
    var exchange = ExchangeState()
    /// The current request's generated id, formatted (`RequestID.generated`).
    let generatedRequestID = UnsafeMutableRawPointer.allocate(byteCount: RequestIDGenerator.length, alignment: 1)
    private(set) var closed = false
    /// When `timedOut` is due (monotonic milliseconds, 0 = none), as last set by the exchange. H2Mux reads it for
    /// its streams; an HTTP/1.1 connection keeps its own (`deadline`, which also covers lingering) instead.
    private(set) var deadline: UInt64 = 0

    init(worker: ProxyWorker, clientAddress: [UInt8], https: Bool, trustedPeer: Bool, http2: Bool, sink: any ResponseSink) {
        self.worker = worker
        self.clientAddress = clientAddress
        self.https = https
        self.trustedPeer = trustedPeer
        self.http2 = http2
        self.sink = sink
    }

    deinit { generatedRequestID.deallocate() }

    func attach(to carrier: any ExchangeCarrier) { carrierRef = carrier }

    @inline(__always) var carrier: any ExchangeCarrier { carrierRef.unsafelyUnwrapped }

    /// The configuration of the request in progress (the current one between requests).
    var gen: LoopGeneration { exchange.generation ?? worker.current }

    /// The label for "no route" and "no verifier decided".
    static let noRouteMetric = MetricNames.shared.id("-")
    static let registrationMetric = MetricNames.shared.id("registration")
    static let forwardAuthMetric = MetricNames.shared.id("forward_auth")

    // MARK: deadlines

    @inline(__always) func setDeadline(_ d: UInt64) {
        deadline = d
        carrier.deadlineChanged(d)
    }

    @inline(__always) func clearDeadline() {
        deadline = 0
        carrier.deadlineChanged(0)
    }

    /// Arms the deadline the state machine asked for.
    func arm(_ d: HTTP1ServerStateMachine.Deadline) {
        switch d {
        case .none: clearDeadline()
        case .header: setDeadline(worker.loop.now + worker.headerTimeout)
        case .idle: setDeadline(worker.loop.now + exchange.idleMillis(worker))
        }
    }

    /// The deadline passed: what it means is the state machine's call.
    func timedOut(pendingOutput: Int) {
        switch http.timedOut(pendingOutput: pendingOutput > 0) {
        case .close:
            close()   // idle, a client that stopped reading its response, or one cut mid-body after our answer
        case .requestTimeout:
            respondLocal(.requestTimeout(), close: true)
        case .bodyTimeout:
            abortUpstream()
            respondLocal(.bodyTimeout(), close: true)
        case .disarm:
            clearDeadline()   // waiting on the upstream, which has its own timeout
        }
    }

    // MARK: output

    @inline(__always) func flushOut() { carrier.flushOut() }

    /// After the carrier wrote: everything gone means the connection may close (closing) or the upstream resume;
    /// otherwise the client has `idle_timeout` to take more.
    @inline(__always) func outputMoved(pending: Int) {
        if pending == 0 {
            if http.phase == .closing {
                carrier.closingOutputDrained()
                return
            }
            if let up = exchange.upstream { up.resumeReading() }
        } else if http.phase == .exchanging {
            setDeadline(worker.loop.now + exchange.idleMillis(worker))
        }
    }

    // MARK: going away

    /// Ends the exchange where it is (logged as 499 if it had not answered) and its carrier with it.
    func close() {
        guard !closed else { return }
        closed = true
        if http.phase == .exchanging && !exchange.logged {
            logExchange(status: exchange.status == 0 ? 499 : exchange.status)
        }
        abortUpstream()
        carrier.exchangeClosed()
    }

    func abortUpstream() {
        if let up = exchange.upstream {
            exchange.upstream = nil
            up.abort()
        }
    }
}
