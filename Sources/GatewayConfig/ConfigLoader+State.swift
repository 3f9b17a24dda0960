import Foundation

/// The `admin`, `limits` and `state` sections.
extension ConfigLoader {
    static func decodeAdmin(_ top: MappingReader, listeners: [DecodedListener]) -> AdminConfig? {
        guard let admin = top.mapping("admin") else { return nil }
        admin.rejectUnknownKeys(allowed: ["address"])
        guard let address = socketAddress(admin, "address", required: true) else { return nil }
        // Admin endpoints (metrics, readiness) must never be reachable on a public listener.
        if let clash = listeners.first(where: { ConfigValue.conflicts($0.config.address, address) }) {
            admin.report("address \(address) is already used by listener \"\(clash.config.name)\"", key: "address")
            return nil
        }
        return AdminConfig(address: address)
    }

    /// `forward_auth: {path: /.attest/verify, source: auto}` (CONFIG.md Additions).
    static func decodeForwardAuth(_ top: MappingReader) -> ForwardAuthConfig? {
        guard let map = top.mapping("forward_auth") else { return nil }
        map.rejectUnknownKeys(allowed: ["path", "source"])
        let source = map.oneOf("source", [ForwardAuthSource.auto, .nginx, .traefik, .envoy])
        guard let text = map.string("path", required: true) else { return nil }
        guard text.hasPrefix("/"), text.count > 1, !text.contains("?"), !text.contains("#"), !text.contains(" ") else {
            map.report("must start with \"/\" and name a path (e.g. /.attest/verify)", key: "path")
            return nil
        }
        var path = text
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        var config = ForwardAuthConfig(path: path)
        if let source { config.source = source }
        return config
    }

    /// `verdict_token`: the signed verdict for upstreams (PROTOCOL.md Additions).
    static func decodeVerdictToken(_ top: MappingReader) -> VerdictTokenConfig? {
        guard let map = top.mapping("verdict_token") else { return nil }
        map.rejectUnknownKeys(allowed: ["header", "key_file", "ttl", "jwks_path"])
        var config = VerdictTokenConfig()
        if let header = map.headerName("header") {
            let lower = header.lowercased()
            let reserved = ["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
                            "trailer", "proxy-connection", "expect", "cookie", "x-request-id", "x-forwarded-for",
                            "x-forwarded-proto", "x-forwarded-host", "forwarded"]
            if reserved.contains(lower) {
                map.report("header \"\(header)\" is one the gateway frames or forwards itself; use another", key: "header")
            } else {
                config.header = header
            }
        }
        config.keyFile = map.filePath("key_file")
        if let ttl = map.duration("ttl") {
            if ttl < 1_000 || ttl > 86_400_000 {
                map.report("must be between 1s and 24h", key: "ttl")
            } else {
                config.ttlMillis = ttl
            }
        }
        if let text = map.string("jwks_path") {
            if text.hasPrefix("/"), text.count > 1, !text.contains("?"), !text.contains("#"), !text.contains(" ") {
                config.jwksPath = text
            } else {
                map.report("must start with \"/\" and name a path (e.g. /.attest/jwks)", key: "jwks_path")
            }
        }
        return config
    }

    /// A `host:port` value; reports `invalid address`.
    static func socketAddress(_ mapping: MappingReader, _ key: String, required: Bool) -> SocketAddressConfig? {
        guard let text = mapping.string(key, required: required) else { return nil }
        guard let address = ConfigValue.parseSocketAddress(text) else {
            mapping.report("invalid address \"\(text)\" (use host:port, or [::1]:port for IPv6)", key: key)
            return nil
        }
        return address
    }

    static func decodeLimits(_ top: MappingReader) -> LimitsConfig {
        var limits = LimitsConfig()
        guard let map = top.mapping("limits") else { return limits }
        map.rejectUnknownKeys(allowed: ["max_header_bytes", "max_headers", "max_body_bytes", "header_timeout",
                                        "idle_timeout", "max_connections", "drain_timeout", "http2_max_concurrent_streams",
                                        "max_held_body_bytes"])
        if let value = map.size("max_header_bytes") { limits.maxHeaderBytes = value }
        if let value = map.int("max_headers", min: 1) { limits.maxHeaders = value }
        if let value = map.size("max_body_bytes", positive: false) { limits.maxBodyBytes = value }
        if let value = map.duration("header_timeout") { limits.headerTimeoutMillis = value }
        if let value = map.duration("idle_timeout") { limits.idleTimeoutMillis = value }
        if let value = map.int("max_connections", min: 1) { limits.maxConnections = value }
        if let value = map.size("max_held_body_bytes") { limits.maxHeldBodyBytes = value }
        if let value = map.int("http2_max_concurrent_streams", min: 1, max: 10_000) { limits.http2MaxConcurrentStreams = value }
        // 0s is meaningful here: exit at once without waiting for in-flight requests.
        if let value = map.duration("drain_timeout", positive: false) { limits.drainTimeoutMillis = value }
        return limits
    }

    static func decodeState(_ top: MappingReader) -> StateConfig {
        var state = StateConfig()
        state.path = top.context.resolve(state.path)
        guard let map = top.mapping("state") else { return state }
        // Keys of the other backends are accepted (and checked), so switching backend is a one-line change.
        map.rejectUnknownKeys(allowed: ["backend", "path", "url", "key_prefix", "timeout", "on_unavailable", "username",
                                        "password_file", "wait_replicas", "ca_file", "client_certificate", "client_key",
                                        "tls_server_name", "tls_verify", "sentinel", "cluster", "tls", "database"])
        if let value = map.oneOf("backend", [StateBackendKind.memory, .sqlite, .redis]) { state.backend = value }
        if let value = map.filePath("path") { state.path = value }
        if let url = map.string("url") {
            // The URL may carry a password: never echo it.
            if isValidRedisURL(url) {
                state.url = url
            } else {
                map.report("invalid redis url (use redis://[user:password@]host:port[/db], rediss:// for TLS)", key: "url")
            }
        } else if state.backend == .redis, !map.contains("url"), !map.contains("sentinel"), !map.contains("cluster") {
            map.reportMissing("url")
        }
        if let sentinel = map.mapping("sentinel") {
            state.sentinel = decodeSentinel(sentinel)
            if map.contains("url") { map.report("url and sentinel name the server twice: keep one", key: "sentinel") }
        }
        if let cluster = map.mapping("cluster") {
            state.cluster = decodeRedisCluster(cluster)
            for other in ["url", "sentinel"] where map.contains(other) {
                map.report("\(other) and cluster name the servers twice: keep one", key: "cluster")
            }
            if map.contains("database") {
                map.report("database does not apply with cluster (a Redis Cluster has one database)", key: "database")
            }
        }
        for key in ["tls", "database"] where map.contains(key) && !map.contains("sentinel") && !map.contains("cluster") {
            map.report("\(key) applies with sentinel\(key == "tls" ? " or cluster" : "") (with url, \(key == "tls" ? "the rediss:// scheme" : "its /db path") says it)", key: key)
        }
        if let value = map.bool("tls") { state.tls = value }
        if let n = map.int("database", min: 0, max: 65_535) { state.database = n }
        if let value = map.string("key_prefix") {
            state.keyPrefix = value
            if map.contains("cluster"), value.contains("{") || value.contains("}") {
                map.report("with cluster, the prefix may not hold { or }: the key layout's hash tags decide each key's slot", key: "key_prefix")
            } else if map.contains("cluster"), value.isEmpty {
                map.report("with cluster, the prefix may not be empty: the key layout check would take other data in the cluster for the gateway's",
                           key: "key_prefix")
            }
        }
        if let value = map.duration("timeout") { state.timeoutMillis = value }
        if let value = map.oneOf("on_unavailable", [UnavailablePolicy.reject, .allow]) { state.onUnavailable = value }
        state.username = map.nonEmptyString("username")
        state.passwordFile = map.filePath("password_file")
        if let n = map.int("wait_replicas", min: 0, max: 100) { state.waitReplicas = n }
        state.caFile = map.filePath("ca_file")
        state.clientCertificate = map.filePath("client_certificate")
        state.clientKey = map.filePath("client_key")
        state.tlsServerName = map.nonEmptyString("tls_server_name")
        if let verify = map.bool("tls_verify") {
            state.tlsVerify = verify
            if !verify, let node = map.value("tls_verify") {
                map.context.warn("certificate checks are off: anyone on the path can pose as Redis (for tests only)",
                                 at: node, path: map.childPath("tls_verify"))
            }
        }
        if state.url != nil || state.sentinel != nil || state.cluster != nil, !state.usesTLS {
            // TLS settings on a plain connection would be silently unused: the operator meant TLS.
            let hint = state.sentinel != nil ? " (with sentinel: tls: true)" : state.cluster != nil ? " (with cluster: tls: true)" : ""
            for key in ["ca_file", "client_certificate", "client_key", "tls_server_name", "tls_verify"] where map.contains(key) {
                map.report("\(key) applies to TLS: use a rediss:// url\(hint)", key: key)
            }
        }
        if (state.clientCertificate == nil) != (state.clientKey == nil) {
            map.report("client_certificate and client_key go together", key: state.clientCertificate == nil ? "client_key" : "client_certificate")
        }
        if state.passwordFile != nil, let url = state.url, redisURLHasPassword(url) {
            map.report("the password is in url and in password_file: keep one (password_file keeps it out of gateway.yml)",
                       key: "password_file")
        }
        return state
    }

    /// `state.sentinel`: `{master, nodes: ["host:port", …], username?, password_file?}`.
    static func decodeSentinel(_ map: MappingReader) -> SentinelConfig? {
        map.rejectUnknownKeys(allowed: ["master", "nodes", "username", "password_file"])
        let master = map.nonEmptyString("master", required: true)
        let nodes = decodeRedisNodes(map, what: "a sentinel, port 26379 by convention")
        guard let master, let nodes else { return nil }
        var sentinel = SentinelConfig(master: master, nodes: nodes)
        sentinel.username = map.nonEmptyString("username")
        sentinel.passwordFile = map.filePath("password_file")
        if sentinel.username != nil, sentinel.passwordFile == nil {
            // Without a password there is no AUTH, so the user would silently go unused.
            map.report("username needs password_file (the sentinels' password)", key: "username")
            return nil
        }
        return sentinel
    }

    /// `state.cluster`: `{nodes: ["host:port", …]}` — seeds; the slot map names the rest.
    static func decodeRedisCluster(_ map: MappingReader) -> RedisClusterConfig? {
        map.rejectUnknownKeys(allowed: ["nodes"])
        return decodeRedisNodes(map, what: "a cluster node").map(RedisClusterConfig.init(nodes:))
    }

    /// `nodes: ["host:port", …]`, non-empty, each once; nil after reporting any that is not.
    private static func decodeRedisNodes(_ map: MappingReader, what: String) -> [UpstreamEndpointConfig]? {
        var nodes: [UpstreamEndpointConfig] = []
        var valid = true
        for (index, item) in (map.list("nodes", nonEmpty: true, required: true) ?? []).enumerated() {
            guard let text = item.scalarText, !item.isNull, let url = ConfigURL("redis://" + text), let port = url.port,
                  !url.hasUserInfo, url.path.isEmpty, url.query == nil else {
                map.context.report("expected host:port (\(what))", at: item, path: indexPath(map.childPath("nodes"), index))
                valid = false
                continue
            }
            let node = UpstreamEndpointConfig(host: url.host, port: port)
            if nodes.contains(node) {
                map.context.report("\(text) is listed twice", at: item, path: indexPath(map.childPath("nodes"), index))
                valid = false
            }
            nodes.append(node)
        }
        return valid && !nodes.isEmpty ? nodes : nil
    }

    /// Whether `redis://user:password@…` carries a non-empty password.
    static func redisURLHasPassword(_ url: String) -> Bool {
        guard let scheme = url.range(of: "://") else { return false }
        let rest = url[scheme.upperBound...]
        let authority = rest[..<(rest.firstIndex(of: "/") ?? rest.endIndex)]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return false }
        return authority.index(after: colon) < at
    }

    /// `redis[s]://[user:password@]host:port[/db]` with a numeric db.
    static func isValidRedisURL(_ text: String) -> Bool {
        guard let url = ConfigURL(text), url.scheme == "redis" || url.scheme == "rediss", url.query == nil else { return false }
        let db = url.path.drop { $0 == "/" }
        return url.path.isEmpty || url.path == "/" || (url.path.hasPrefix("/") && ConfigValue.decimal(db) != nil)
    }
}
