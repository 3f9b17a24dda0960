/// The decisions of one HTTP/1.1 server connection, apart from its socket (STYLE.md: I/O objects delegate their
/// decisions to a state machine that returns actions). The connection tells it what happened — bytes arrived, a
/// head or the body's end was parsed, the response started or ended, a deadline fired, the client hung up — and
/// does what it answers: which deadline to arm, whether to read, whether to answer, close or linger.
///
/// One exchange at a time: pipelined requests wait in the connection's buffer until the response before them ends.
public struct HTTP1ServerStateMachine: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        /// Between requests (or before the first): reading a head.
        case awaitingHead
        /// A request is being served: its body read (or held), its response written.
        case exchanging
        /// The last response is being written; then the connection lingers.
        case closing
        /// Our side is shut; the client's last bytes are read and dropped until it closes or goes quiet.
        case lingering
    }

    /// Which deadline the connection arms (their lengths are the configuration's).
    public enum Deadline: Sendable, Equatable {
        case none
        /// `header_timeout`: a head must arrive whole in time.
        case header
        /// `idle_timeout`: between requests, and while a body or the response makes no progress.
        case idle
    }

    public private(set) var phase = Phase.awaitingHead
    /// Some bytes of the next head have arrived (so a timeout deserves a 408, not a silent close).
    public private(set) var sawRequestBytes = false
    /// The whole request body has been read.
    public private(set) var requestDone = false
    /// The response's head is out: from now on a failure can only cut the connection.
    public private(set) var responseStarted = false
    /// The connection closes after this response.
    public private(set) var closeAfter = false
    /// Verification or a state call is running off the loop: the body waits, unread.
    public private(set) var awaitingWork = false
    /// The upstream's buffer is full: the body waits (backpressure).
    public private(set) var bodyPaused = false
    /// SIGTERM: no request after the one in progress.
    public private(set) var draining = false

    public init() {}

    // MARK: reading

    /// Whether the connection wants more bytes from the client now.
    public var wantsRead: Bool {
        switch phase {
        case .awaitingHead, .lingering: true
        case .exchanging: !requestDone && !bodyPaused && !awaitingWork
        case .closing: false
        }
    }

    /// Whether buffered body bytes may be taken now (an exchange in progress, not waiting, not paused).
    public var takesBody: Bool { phase == .exchanging && !requestDone && !bodyPaused && !awaitingWork }

    /// The first bytes of a head: the header deadline starts (nil when one is running already).
    public mutating func headBytesArrived() -> Deadline? {
        guard phase == .awaitingHead, !sawRequestBytes else { return nil }
        sawRequestBytes = true
        return .header
    }

    /// A head was parsed. `keepAlive`: what its version and Connection field allow; `hasBody`: it declares one.
    public mutating func headReceived(keepAlive: Bool, hasBody: Bool) {
        phase = .exchanging
        requestDone = !hasBody
        if !keepAlive || draining { closeAfter = true }
    }

    /// Body bytes moved on: the client has `idle_timeout` for the next ones.
    public func bodyProgressed() -> Deadline { .idle }

    public mutating func bodyEnded() { requestDone = true }

    public mutating func pauseBody(_ paused: Bool) { bodyPaused = paused }

    /// Work off the loop began (true) or came back (false); false when nothing was waiting (a stale answer).
    @discardableResult
    public mutating func awaitWork(_ waiting: Bool) -> Bool {
        defer { awaitingWork = waiting }
        return waiting || awaitingWork
    }

    // MARK: answering

    public mutating func responseBegan() { responseStarted = true }

    /// This response must be the last (HTTP/1.0 without keep-alive, a body left unread, a framing that ends with
    /// the connection).
    public mutating func closeAfterResponse() { closeAfter = true }

    /// What ends an exchange: its response is complete (or was answered locally).
    public enum Next: Sendable, Equatable {
        /// Write what is left, then linger and close.
        case close
        /// Serve the next request; `deadline`: `.header` when its bytes are already buffered, else `.idle`.
        case nextRequest(Deadline)
    }

    /// The response is complete. `buffered`: bytes of a next request are already in the connection's buffer.
    public mutating func exchangeEnded(buffered: Bool) -> Next {
        if closeAfter || draining || !requestDone {
            phase = .closing
            return .close
        }
        self = Self(draining: draining)
        sawRequestBytes = buffered
        return .nextRequest(buffered ? .header : .idle)
    }

    private init(draining: Bool) { self.draining = draining }

    /// A parse error: in a head it is answered and the connection closes; in a body, the same unless the
    /// response has started (then the connection is cut).
    public enum ParseErrorAction: Sendable, Equatable {
        case answerAndClose
        case cut
    }

    public mutating func parseError() -> ParseErrorAction {
        if phase == .exchanging && responseStarted { return .cut }
        closeAfter = true
        return .answerAndClose
    }

    /// All output is written: linger when closing; otherwise nothing (the upstream may be read again).
    public mutating func outputDrained() -> Bool {
        guard phase == .closing else { return false }
        phase = .lingering
        return true
    }

    // MARK: time and the client going away

    /// What a fired deadline means.
    public enum TimeoutAction: Sendable, Equatable {
        /// Nothing was in flight: close.
        case close
        /// A head was incomplete: 408, close.
        case requestTimeout
        /// A body stopped: 408 (`body_timeout`) and close, the upstream abandoned.
        case bodyTimeout
        /// Waiting on the upstream, which has its own deadline: disarm.
        case disarm
    }

    /// `pendingOutput`: response bytes the client has not taken yet.
    public func timedOut(pendingOutput: Bool) -> TimeoutAction {
        switch phase {
        case .awaitingHead:
            return sawRequestBytes ? .requestTimeout : .close
        case .exchanging:
            if !requestDone { return responseStarted ? .close : .bodyTimeout }
            return pendingOutput ? .close : .disarm   // a client that stopped reading its response is cut
        case .closing, .lingering:
            return .close
        }
    }

    /// When a connection whose peer is going away closes.
    public enum Closing: Sendable, Equatable {
        case now
        /// After the response in progress.
        case afterResponse
    }

    /// The client closed its sending side: close at once (a request cut short is logged 499), or — the request
    /// is whole — answer it first.
    public mutating func peerClosed() -> Closing {
        guard phase == .exchanging, requestDone else { return .now }
        closeAfter = true
        return .afterResponse
    }

    /// SIGTERM: an idle connection closes now; a busy one after its response.
    public mutating func drain() -> Closing {
        draining = true
        if phase == .awaitingHead && !sawRequestBytes { return .now }
        closeAfter = true
        return .afterResponse
    }
}
