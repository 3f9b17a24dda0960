internal import CHiredis
import GatewayCore
import StateStore

/// The point on the monotonic clock by which a state operation must be done (`state.timeout`): connecting,
/// authenticating and each command get only what is left of it.
struct RedisDeadline {
    let atMillis: UInt64

    init(timeoutMillis: Int, now: UInt64 = MonotonicClock.nowMillis()) {
        atMillis = now &+ UInt64(max(timeoutMillis, 1))
    }

    /// Milliseconds left, or a `.timeout` error when none are.
    func remainingMillis(doing what: String) throws(StateStoreError) -> Int {
        let now = MonotonicClock.nowMillis()
        guard now < atMillis else { throw StateStoreError(.timeout, "redis \(what): state.timeout exceeded") }
        return Int(atMillis - now)
    }
}

/// One blocking hiredis connection (`redisContext`), owned by exactly one `RedisClient` under its lock.
///
/// Any thrown error means the connection is unusable (I/O error, EOF, timeout — after a timeout a late reply could
/// otherwise be read as the answer to the next command) and must be dropped. Error *replies* are not thrown: they
/// come back as `.error` and leave the connection in sync.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    /// The socket timeout last set, so the usual case (a whole budget per command) costs no `setsockopt`.
    private var socketTimeoutMillis = -1

    /// Connects, then authenticates and selects the database as `endpoint` says, all within `deadline`.
    init(endpoint: RedisEndpoint, deadline: RedisDeadline) throws(StateStoreError) {
        let budget = try deadline.remainingMillis(doing: "connect")
        guard let context = redisConnectWithTimeout(endpoint.host, endpoint.port, chiredis_timeval_ms(budget)) else {
            throw StateStoreError(.unavailable, "redis connect \(endpoint): out of memory")
        }
        self.context = context
        if chiredis_err(context) != 0 {
            // `deinit` frees the context; the error kind depends on whether the connect timed out.
            throw connectionError(doing: "connect to \(endpoint)")
        }
        if let password = endpoint.password {
            var auth = RedisCommand("AUTH")
            if let user = endpoint.user { auth.append(user) }
            auth.append(password)
            try expectOK(run(auth, deadline: deadline), "AUTH")
        }
        if endpoint.database != 0 {
            try expectOK(run(RedisCommand("SELECT", String(endpoint.database)), deadline: deadline), "SELECT")
        }
    }

    deinit { redisFree(context) }

    /// Sends `command` and waits for its reply, giving up when `deadline` passes.
    func run(_ command: RedisCommand, deadline: RedisDeadline) throws(StateStoreError) -> RedisReply {
        let budget = try deadline.remainingMillis(doing: command.name)
        if budget != socketTimeoutMillis {
            guard redisSetTimeout(context, chiredis_timeval_ms(budget)) == REDIS_OK else {
                throw connectionError(doing: command.name)
            }
            socketTimeoutMillis = budget
        }
        let raw = command.withArgv { argc, argv, argvlen in redisCommandArgv(context, argc, argv, argvlen) }
        guard let raw else { throw connectionError(doing: command.name) }
        defer { freeReplyObject(raw) }
        return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self))
            ?? .error("unsupported reply type")
    }

    /// The error for a failed call, read from the context right away (errno is only meaningful now).
    private func connectionError(doing what: String) -> StateStoreError {
        let timedOut = chiredis_errno_is_timeout() != 0
        let message = String(cString: chiredis_errstr(context))
        // hiredis reports a socket timeout as an I/O error carrying strerror(EAGAIN or ETIMEDOUT).
        let looksTimedOut = message.contains("timed out") || message.contains("temporarily unavailable")
        if chiredis_err(context) == REDIS_ERR_IO && (timedOut || looksTimedOut) {
            return StateStoreError(.timeout, "redis \(what): timed out (\(message))", cause: "timeout")
        }
        let cause = message.contains("refused") ? "refused" : message.isEmpty || chiredis_err(context) == REDIS_ERR_EOF ? "connection_lost" : "io"
        return StateStoreError(.unavailable, "redis \(what): \(message.isEmpty ? "connection lost" : message)", cause: cause)
    }

    private func expectOK(_ reply: RedisReply, _ what: String) throws(StateStoreError) {
        guard case .status("OK") = reply else { throw reply.unexpected(what) }
    }
}
