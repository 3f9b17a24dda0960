import StateStore

/// What the store asks of a Redis deployment, whatever its shape: one server or the master the sentinels name
/// (`RedisClient`), or a Cluster whose nodes each own some slots (`RedisClusterClient`). Error replies come back as
/// `.error`; failures to reach the server are thrown.
protocol RedisExecutor: Sendable {
    /// Runs one command on the server that holds its key (argument 1); `write`: `state.wait_replicas` applies.
    func run(_ command: RedisCommand, write: Bool) throws(StateStoreError) -> RedisReply
    /// Runs `script` (`EVALSHA`, `EVAL` after `NOSCRIPT`) with the keys and arguments `appendArguments` adds after the
    /// script reference (numkeys first, then the keys: the first key decides the server).
    func eval(_ script: RedisScript, write: Bool, _ appendArguments: (inout RedisCommand) -> Void)
        throws(StateStoreError) -> RedisReply
    /// Every server the store may use answers (a Cluster: each master).
    func ping() throws(StateStoreError)
}

extension RedisExecutor {
    func run(_ command: RedisCommand) throws(StateStoreError) -> RedisReply { try run(command, write: false) }

    func eval(_ script: RedisScript, _ appendArguments: (inout RedisCommand) -> Void) throws(StateStoreError) -> RedisReply {
        try eval(script, write: true, appendArguments)
    }
}
