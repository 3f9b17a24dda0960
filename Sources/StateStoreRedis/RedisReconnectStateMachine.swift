/// Decides, without doing any I/O, whether a call may use the connection, must (re)connect first, or must fail
/// fast because Redis failed recently and the backoff has not run out.
///
/// Backoff starts at `initialBackoffMillis` after the first failure and doubles with each further failed attempt
/// up to `maxBackoffMillis`; a successful connect resets it. While backing off, callers get `.unavailable` at once,
/// so a dead Redis costs the request path nothing but a lock and a clock read.
struct RedisReconnectStateMachine: Sendable, Equatable {
    enum State: Sendable, Equatable {
        /// No connection yet, and nothing has failed: connect now.
        case idle
        case connected
        /// The last attempt failed; the next one may start at `retryAtMillis`.
        case backingOff(retryAtMillis: UInt64, lastBackoffMillis: UInt64)
    }

    /// What the client must do before (or instead of) sending its command.
    enum CallAction: Sendable, Equatable {
        case useConnection
        case connect
        case failFast(retryInMillis: UInt64)
    }

    static let initialBackoffMillis: UInt64 = 100
    static let maxBackoffMillis: UInt64 = 5_000

    private(set) var state: State = .idle

    /// A call is starting at `nowMillis` (monotonic).
    func beginCall(nowMillis: UInt64) -> CallAction {
        switch state {
        case .connected: .useConnection
        case .idle: .connect
        case .backingOff(let retryAt, _):
            nowMillis >= retryAt ? .connect : .failFast(retryInMillis: retryAt - nowMillis)
        }
    }

    /// The connection is given up without a failure (the sentinels announced another master): connect at the next
    /// call, with no backoff.
    mutating func reset() {
        state = .idle
    }

    mutating func connectSucceeded() {
        state = .connected
    }

    /// A connect attempt failed, or a connected connection broke (I/O error, EOF, timeout): back off, doubling the
    /// delay when the previous attempt had failed too.
    mutating func failed(nowMillis: UInt64) {
        let backoff: UInt64
        switch state {
        case .idle, .connected: backoff = Self.initialBackoffMillis
        case .backingOff(_, let last): backoff = min(last * 2, Self.maxBackoffMillis)
        }
        state = .backingOff(retryAtMillis: nowMillis + backoff, lastBackoffMillis: backoff)
    }
}
