import GatewayConfig
import KeySetCache
import Observability
import GatewayProxy
import GatewayTLS
import StateStore
import StateStoreRedis
import StateStoreSQLite

/// The state backend a configuration names (`state:`), opened only when something needs it.
enum StateBackends {
    /// Limited use, App Attest (challenges, keys, counters), DeviceCheck's subject binding and Play Integrity's
    /// challenges need the store; so do route rate limits when the store is Redis (they are shared there).
    static func openIfNeeded(_ config: GatewayConfiguration, verifiers: VerifierGraph) throws(ProxyRuntime.StartupError) -> StateService? {
        let subjectBinding = config.verifiers.contains { v in
            switch v.kind {
            case .deviceCheck(let c): c.subjectBinding != nil
            // Challenges: the nonce binding and the registration endpoints.
            case .playIntegrity(let c): c.binding == .nonce || c.registrationPath != nil
            default: false
            }
        }
        let sharedRateLimits = config.state.backend == .redis && config.routes.contains { $0.rateLimit != nil }
        guard config.routes.contains(where: { $0.limitedUse }) || !verifiers.appAttest.isEmpty || subjectBinding || sharedRateLimits else {
            return nil
        }
        return try open(config.state)
    }

    /// SQLite must open (a bad path stops start-up); Redis may be down at start and is reconnected by the store.
    static func open(_ config: StateConfig) throws(ProxyRuntime.StartupError) -> StateService {
        let allow = config.onUnavailable == .allow
        switch config.backend {
        case .memory:
            return StateService(store: MemoryStateStore(), allowWhenUnavailable: allow, sweepIntervalSeconds: 60)
        case .sqlite:
            do {
                let store = try SQLiteStateStore(path: config.path, timeoutMillis: config.timeoutMillis)
                return StateService(store: store, allowWhenUnavailable: allow, sweepIntervalSeconds: 60)
            } catch {
                throw ProxyRuntime.StartupError(description: "state.path: cannot open \(config.path): \(error)")
            }
        case .redis:
            let password = try config.passwordFile.map { path throws(ProxyRuntime.StartupError) in try redisPassword(path) }
            let tls = try config.usesTLS ? redisTLS(config) : nil
            if tls != nil, !config.tlsVerify {
                Logger.warn("state store TLS certificate checks are off (state.tls_verify: false): anyone on the path can pose as Redis",
                            ["backend": "redis"])
            }
            if let sentinel = config.sentinel {
                let sentinelPassword = try sentinel.passwordFile.map { path throws(ProxyRuntime.StartupError) in
                    try redisPassword(path, key: "state.sentinel.password_file")
                }
                let settings = RedisSentinelSettings(master: sentinel.master,
                                                     nodes: sentinel.nodes.map { RedisNode(host: $0.host, port: Int32($0.port)) },
                                                     username: sentinel.username, password: sentinelPassword)
                do {
                    let store = try RedisStateStore(sentinel: settings, keyPrefix: config.keyPrefix, timeoutMillis: config.timeoutMillis,
                                                    username: config.username, password: password, database: config.database,
                                                    waitReplicas: config.waitReplicas, tls: tls, onEvent: logRedisEvent)
                    return StateService(store: store, allowWhenUnavailable: allow, sweepIntervalSeconds: nil)
                } catch {
                    throw ProxyRuntime.StartupError(description: "state.sentinel: \(error)")
                }
            }
            if let cluster = config.cluster {
                let settings = RedisClusterSettings(nodes: cluster.nodes.map { RedisNode(host: $0.host, port: Int32($0.port)) })
                do {
                    let store = try RedisStateStore(cluster: settings, keyPrefix: config.keyPrefix, timeoutMillis: config.timeoutMillis,
                                                    username: config.username, password: password,
                                                    waitReplicas: config.waitReplicas, tls: tls, onEvent: logRedisEvent)
                    return StateService(store: store, allowWhenUnavailable: allow, sweepIntervalSeconds: nil)
                } catch {
                    throw ProxyRuntime.StartupError(description: "state.cluster: \(error)")
                }
            }
            do {
                let store = try RedisStateStore(url: config.url ?? "redis://127.0.0.1:6379/0", keyPrefix: config.keyPrefix,
                                                timeoutMillis: config.timeoutMillis, username: config.username, password: password,
                                                waitReplicas: config.waitReplicas, tls: tls, onEvent: logRedisEvent)
                return StateService(store: store, allowWhenUnavailable: allow, sweepIntervalSeconds: nil)
            } catch {
                throw ProxyRuntime.StartupError(description: "state.url: \(error)")
            }
        }
    }

    /// `rediss://`: the client context from `ca_file`, `client_certificate`/`client_key` and `tls_verify` (a file
    /// that cannot be read or does not fit is reported at its key), and the name checked (`tls_server_name`).
    static func redisTLS(_ config: StateConfig) throws(ProxyRuntime.StartupError) -> RedisTLS {
        do {
            let context = try TLSContext.client(caFile: config.caFile, certificateFile: config.clientCertificate,
                                                keyFile: config.clientKey, verifyPeer: config.tlsVerify, alpn: [])
            return RedisTLS(context: context, serverName: config.tlsServerName)
        } catch {
            let key = error.file == nil ? "url"
                : error.file == config.caFile ? "ca_file" : error.file == config.clientKey ? "client_key" : "client_certificate"
            throw ProxyRuntime.StartupError(key: "state.\(key)", message: error.description)
        }
    }

    /// `state.password_file`: its bytes, one trailing newline (`\n` or `\r\n`) stripped; empty is an error.
    static func redisPassword(_ path: String, key: String = "state.password_file") throws(ProxyRuntime.StartupError) -> String {
        guard let bytes = try? KeySetSources.file(path: path, maxBytes: 4096)().body else {
            throw ProxyRuntime.StartupError(key: key, message: "cannot read \(path)")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\r\n") { text.removeLast(2) } else if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { throw ProxyRuntime.StartupError(key: key, message: "\(path) is empty") }
        return text
    }

    /// Each change of the Redis connection's state, once, with its cause (`WRONGPASS`, `refused`, `timeout` …): a
    /// wrong password is an error in the log, not a silent 503.
    static let logRedisEvent: @Sendable (RedisStateStore.Event) -> Void = { event in
        switch event {
        case .failed(let error):
            Logger.error("state store unavailable", ["backend": "redis", "cause": error.label, "error": error.description])
        case .connected:
            Logger.info("state store connected", ["backend": "redis"])
        case .master(let address):
            Logger.info("state store master", ["backend": "redis", "address": address])
        case .switchAnnounced(let address):
            Logger.info("state store master switch announced", ["backend": "redis", "address": address])
        case .slotMap(let masters):
            Logger.info("state store cluster slots", ["backend": "redis", "masters": masters])
        }
    }
}
