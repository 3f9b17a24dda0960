/// The `routes` section: an ordered list, first match wins.
extension ConfigLoader {
    static let routeKeys = ["name", "match", "upstream", "verify", "require_all", "limited_use", "max_risk_metric", "rate_limit",
                            "mode", "strip_token_headers", "max_body_bytes", "websocket", "cors_preflight",
                            "stream_idle_timeout"]

    static func decodeRoutes(_ top: MappingReader, upstreams: Set<String>, http2Upstreams: Set<String> = [],
                             verifiers: [String: String?],
                             limits: LimitsConfig, paths: PathsConfig) -> [RouteConfig] {
        guard let items = top.list("routes") else { return [] }
        var routes: [DecodedRoute] = []
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            guard let map = MappingReader(item, path: indexPath("routes", index), context: top.context) else { continue }
            map.rejectUnknownKeys(allowed: routeKeys)
            let name = map.nonEmptyString("name") ?? "route-\(index)"
            if !names.insert(name).inserted {
                map.report("duplicate route name \"\(name)\"", key: "name")
            }
            let match = map.mapping("match", required: true).flatMap { decodeMatch($0, paths: paths) }
            var upstream = map.string("upstream", required: true)
            if let name = upstream, !upstreams.contains(name) {
                map.report("unknown upstream \"\(name)\"", key: "upstream")
                upstream = nil
            }
            let verify = map.contains("verify") ? decodeVerify(map, verifiers: verifiers) : []
            let requireAll = map.bool("require_all")
            let limitedUse = map.bool("limited_use")
            let maxRisk = map.int("max_risk_metric", min: 0)
            let mode = map.oneOf("mode", [RouteMode.enforce, .monitor])
            let strip = map.bool("strip_token_headers")
            let webSocket = map.bool("websocket")
            if webSocket == true, let name = upstream, http2Upstreams.contains(name) {
                map.report("websocket needs an http1 upstream (\"\(name)\" is HTTP/2; RFC 8441 is not offered)",
                           key: "websocket")
            }
            let cors = map.oneOf("cors_preflight", [CORSPreflightPolicy.verify, .forward])
            let streamIdle = map.duration("stream_idle_timeout")
            let rateLimit = map.mapping("rate_limit").flatMap { decodeRateLimit($0, keys: true, allowsOff: false).config }
            var maxBody = map.size("max_body_bytes", positive: false)
            if let bytes = maxBody, bytes > limits.maxBodyBytes {
                // Routes may only lower the global limit: the connection layer enforces the global one first.
                map.report("must not exceed limits.max_body_bytes (\(limits.maxBodyBytes) bytes)", key: "max_body_bytes")
                maxBody = nil
            }
            if limitedUse == true, let verify {
                // limited_use is enforced through App Check jti / DeviceCheck and Play Integrity token replay
                // records; with none of them listed it would silently do nothing.
                let kinds = verify.compactMap { verifiers[$0] ?? nil }
                if kinds.count == verify.count, !kinds.contains(where: ["app_check", "device_check", "play_integrity"].contains) {
                    map.report("limited_use needs an app_check, device_check or play_integrity verifier in verify", key: "limited_use")
                }
            }

            guard let match, let upstream else { continue }
            var route = RouteConfig(name: name, match: match, upstream: upstream)
            if let verify { route.verify = verify }
            if let requireAll { route.requireAll = requireAll }
            if let limitedUse { route.limitedUse = limitedUse }
            route.maxRiskMetric = maxRisk
            route.rateLimit = rateLimit
            if let mode { route.mode = mode }
            if let strip { route.stripTokenHeaders = strip }
            route.maxBodyBytes = maxBody
            if let webSocket { route.webSocket = webSocket }
            if let cors { route.corsPreflight = cors }
            if let streamIdle { route.streamIdleTimeoutMillis = streamIdle }
            routes.append(DecodedRoute(config: route, node: item, path: map.path))
        }
        checkShadowing(routes, context: top.context)
        return routes.map(\.config)
    }

    /// The verifier names; each must be declared. Nil when absent or invalid.
    static func decodeVerify(_ map: MappingReader, verifiers: [String: String?]) -> [String]? {
        guard let items = map.list("verify") else { return nil }
        var names: [String] = []
        for (index, item) in items.enumerated() {
            let path = indexPath(map.childPath("verify"), index)
            guard let name = item.scalarText, !item.isNull else {
                map.context.report("expected a verifier name", at: item, path: path)
                continue
            }
            guard verifiers[name] != nil else {
                map.context.report("unknown verifier \"\(name)\"", at: item, path: path)
                continue
            }
            guard !names.contains(name) else {
                map.context.report("verifier \"\(name)\" is listed twice", at: item, path: path)
                continue
            }
            names.append(name)
        }
        return names.count == items.count ? names : nil
    }

    static func decodeMatch(_ map: MappingReader, paths: PathsConfig) -> RouteMatchConfig? {
        map.rejectUnknownKeys(allowed: ["path", "path_prefix", "methods", "host"])
        var path: PathMatch?
        switch (map.string("path"), map.string("path_prefix")) {
        case (nil, nil):
            if !map.contains("path") && !map.contains("path_prefix") {
                map.context.report("missing required key \"path\" or \"path_prefix\"", at: map.node, path: map.path)
            }
        case (.some, .some):
            map.report("path and path_prefix are mutually exclusive", key: "path_prefix")
        case (let exact?, nil):
            if !exact.hasPrefix("/") {
                map.report("must start with \"/\"", key: "path")
            } else if checkCanonical(exact, key: "path", paths: paths, map) {
                path = .exact(exact)
            }
        case (nil, let prefix?):
            if !prefix.hasPrefix("/") {
                map.report("must start with \"/\"", key: "path_prefix")
            } else if checkCanonical(prefix, key: "path_prefix", paths: paths, map) {
                path = .prefix(prefix)
                if !prefix.hasSuffix("/"), let node = map.value("path_prefix") {
                    // Prefixes compare bytes, not segments: "/api/payments" also routes "/api/paymentsX" here — a
                    // public endpoint can end up behind this route's verifiers, or a private one behind a weaker route.
                    map.context.warn("path_prefix \"\(prefix)\" also matches longer segments (\"\(prefix)X\"); end it with \"/\" "
                                     + "(\"\(prefix)/\"), or use an exact path \"\(prefix)\" and a path_prefix \"\(prefix)/\"",
                                     at: node, path: map.childPath("path_prefix"))
                }
            }
        }
        var methods: [String]?
        if let items = map.stringList("methods", nonEmpty: true) {
            let upper = items.map { $0.uppercased() }
            if let bad = upper.firstIndex(where: { !ConfigValue.isToken($0) }) {
                map.report("invalid method \"\(items[bad])\"", key: "methods")
            } else {
                methods = upper
            }
        }
        var host: String?
        if let text = map.nonEmptyString("host") {
            if !text.utf8.allSatisfy({ $0 < 0x80 }) {
                // Host fields are ASCII: an internationalised name arrives in its xn-- form and would never match.
                map.report("invalid host \"\(text)\" (write an internationalised name in its ASCII xn-- form)", key: "host")
            } else {
                host = normalizedHost(text)
                if host == nil { map.report("invalid host \"\(text)\"", key: "host") }
            }
        }
        guard let path else { return nil }
        return RouteMatchConfig(path: path, methods: methods, host: host)
    }
}

/// A route and the YAML it came from, kept for the ordering check.
struct DecodedRoute {
    var config: RouteConfig
    var node: YAMLNode
    /// `routes[<index>]`.
    var path: String
}

extension ConfigLoader {
    /// `match.host` as routes compare it: lower case, without the trailing dot of a fully qualified name
    /// (`API.example.com.` → `api.example.com`, `api.example.com.:8443` → `api.example.com:8443`), a port kept if
    /// given. Nil when it is not a host with an optional port.
    static func normalizedHost(_ text: String) -> String? {
        let lower = text.lowercased()
        guard !lower.contains(where: { $0 == " " || $0 == "/" || $0 == "?" || $0 == "#" || $0 == "@" || $0 == "\\" }) else {
            return nil
        }
        var name = Substring(lower)
        var port: Substring?
        if lower.hasPrefix("[") {
            // [v6] or [v6]:port
            guard let close = lower.firstIndex(of: "]") else { return nil }
            let rest = lower[lower.index(after: close)...]
            name = lower[...close]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if lower.filter({ $0 == ":" }).count == 1, let colon = lower.firstIndex(of: ":") {
            name = lower[..<colon]
            port = lower[lower.index(after: colon)...]
        }
        if let port {
            guard port.count <= 5, let number = ConfigValue.decimal(port), number <= 65_535 else { return nil }
        }
        if !name.hasPrefix("[") && !name.contains(":") && name.hasSuffix(".") { name = name.dropLast() }
        guard !name.isEmpty, !name.hasSuffix("."), !name.hasPrefix(".") else { return nil }
        return port.map { "\(name):\($0)" } ?? String(name)
    }
}
