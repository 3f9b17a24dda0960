import Foundation
/// The `upstreams` section: a mapping from name to settings.
extension ConfigLoader {
    /// Valid upstreams, and every declared name (valid or not) so routes naming a broken upstream are not
    /// also reported as naming an unknown one.
    struct DecodedUpstreams {
        var configs: [UpstreamConfig] = []
        var declared: Set<String> = []
        /// Upstreams spoken to over HTTP/2 (no WebSocket handshake of RFC 6455's form reaches them).
        var http2: Set<String> = []
    }

    static func decodeUpstreams(_ top: MappingReader) -> DecodedUpstreams {
        var result = DecodedUpstreams()
        guard let section = top.mapping("upstreams") else { return result }
        for (name, pair) in section.pairs {
            result.declared.insert(name)
            guard let map = MappingReader(pair.value, path: section.childPath(name), context: top.context) else { continue }
            if let upstream = decodeUpstream(name: name, map) {
                result.configs.append(upstream)
                if upstream.protocolVersion.isHTTP2 { result.http2.insert(name) }
            }
        }
        return result
    }

    static func decodeUpstream(name: String, _ map: MappingReader) -> UpstreamConfig? {
        map.rejectUnknownKeys(allowed: ["url", "connect_timeout", "response_timeout", "max_idle_connections", "ca_file",
                                        "protocol", "endpoints", "balance", "health_check", "outlier", "dns_refresh"])
        let proto = map.oneOf("protocol", [UpstreamProtocol.http1, .h2c, .h2])
        let caFile = map.filePath("ca_file")
        let cluster = decodeCluster(map)
        let target: UpstreamConfig?
        if map.contains("endpoints") {
            if map.contains("url") { map.report("url and endpoints are mutually exclusive", key: "endpoints") }
            target = decodeEndpoints(map)
        } else {
            target = map.string("url", required: true).flatMap { upstreamURL($0, map) }
        }
        let connect = map.duration("connect_timeout")
        let response = map.duration("response_timeout")
        let idle = map.int("max_idle_connections", min: 0)
        guard var upstream = target, let cluster else { return nil }
        upstream.name = name
        upstream.cluster = cluster
        if let connect { upstream.connectTimeoutMillis = connect }
        if let response { upstream.responseTimeoutMillis = response }
        if let idle { upstream.maxIdleConnections = idle }
        if let proto {
            // h2c is HTTP/2 over plain TCP, h2 is HTTP/2 negotiated in TLS: the url's scheme must say the same.
            if proto == .h2c && upstream.tls {
                map.report("protocol h2c needs an http:// url (use h2 for https://)", key: "protocol")
                return nil
            }
            if proto == .h2 && !upstream.tls {
                map.report("protocol h2 needs an https:// url (use h2c for http://)", key: "protocol")
                return nil
            }
            upstream.protocolVersion = proto
        }
        if let caFile {
            guard upstream.tls else {
                map.report("ca_file needs an https:// url", key: "ca_file")
                return nil
            }
            upstream.caFile = caFile
        }
        return upstream
    }

    /// `endpoints`: several URLs of one cluster, the same scheme and base path (they serve the same API).
    static func decodeEndpoints(_ map: MappingReader) -> UpstreamConfig? {
        guard let items = map.list("endpoints", nonEmpty: true) else { return nil }
        var first: UpstreamConfig? = nil
        var endpoints: [UpstreamEndpointConfig] = []
        var ok = true
        for (index, item) in items.enumerated() {
            let path = indexPath(map.childPath("endpoints"), index)
            let report: (String) -> Void = { map.context.report($0, at: item, path: path); ok = false }
            guard let text = item.scalarText, !item.isNull else {
                report("expected a url")
                continue
            }
            guard let u = upstreamURL(text, report: report) else { continue }
            if let f = first {
                guard u.tls == f.tls, u.basePath == f.basePath else {
                    report("every endpoint must have the scheme and base path of the first (\(f.tls ? "https" : "http"), \"\(f.basePath)\")")
                    continue
                }
            } else {
                first = u
            }
            let e = UpstreamEndpointConfig(host: u.host, port: u.port)
            guard !endpoints.contains(e) else {
                report("endpoint \(text) is listed twice")
                continue
            }
            endpoints.append(e)
        }
        guard ok, var upstream = first else { return nil }
        upstream.endpoints = endpoints
        return upstream
    }

    /// `balance`, `outlier`, `health_check`, `dns_refresh` (defaults when absent); nil after reporting an error.
    static func decodeCluster(_ map: MappingReader) -> ClusterConfig? {
        var c = ClusterConfig()
        var ok = true
        if let b = map.oneOf("balance", [BalancePolicy.roundRobin, .leastRequest]) { c.balance = b } else if map.contains("balance") { ok = false }
        if let o = map.mapping("outlier") {
            o.rejectUnknownKeys(allowed: ["consecutive_failures", "ejection"])
            if let n = o.int("consecutive_failures", min: 0) { c.outlierFailures = n }
            if let d = o.duration("ejection") { c.ejectionMillis = d }
        }
        if let h = map.mapping("health_check") {
            h.rejectUnknownKeys(allowed: ["path", "interval", "timeout", "unhealthy_threshold", "healthy_threshold"])
            var hc = HealthCheckConfig(path: "/")
            if let p = h.string("path", required: true) {
                if p.hasPrefix("/"), !p.contains(" "), !p.contains("#") { hc.path = p } else {
                    h.report("must start with \"/\" (e.g. /healthz)", key: "path")
                    ok = false
                }
            } else {
                ok = false
            }
            if let d = h.duration("interval") { hc.intervalMillis = d }
            if let d = h.duration("timeout") { hc.timeoutMillis = d }
            if let n = h.int("unhealthy_threshold", min: 1) { hc.unhealthyThreshold = n }
            if let n = h.int("healthy_threshold", min: 1) { hc.healthyThreshold = n }
            c.healthCheck = hc
        }
        if let d = map.duration("dns_refresh") { c.dnsRefreshMillis = d }
        return ok ? c : nil
    }

    /// `http://host:port[/base-path]` (port 80 by default) or `https://…` (443). The base path is kept
    /// without its trailing slash so the proxy can append the request path as is.
    static func upstreamURL(_ text: String, _ map: MappingReader) -> UpstreamConfig? {
        upstreamURL(text) { map.report($0, key: "url") }
    }

    static func upstreamURL(_ text: String, report: (String) -> Void) -> UpstreamConfig? {
        let usage = "(use http://host[:port][/base-path] or https://…)"
        if let separator = text.range(of: "://") {
            let scheme = text[..<separator.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else {
                report("unsupported url scheme \"\(scheme)\" \(usage)")
                return nil
            }
        }
        guard let url = ConfigURL(text) else {
            report("invalid url \(usage)")
            return nil
        }
        // Credentials in an upstream URL would be sent nowhere (we do not add Authorization) and must not be
        // echoed; a query string has no meaning for a base path.
        guard !url.hasUserInfo, url.query == nil else {
            report("url must not contain credentials or a query \(usage)")
            return nil
        }
        var basePath = url.path
        while basePath.hasSuffix("/") { basePath.removeLast() }
        let tls = url.scheme == "https"
        var upstream = UpstreamConfig(name: "", host: url.host, port: url.port ?? (tls ? 443 : 80), basePath: basePath)
        upstream.tls = tls
        return upstream
    }
}
