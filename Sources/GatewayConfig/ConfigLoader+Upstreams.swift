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
                                        "protocol"])
        let proto = map.oneOf("protocol", [UpstreamProtocol.http1, .h2c, .h2])
        let caFile = map.filePath("ca_file")
        let target = map.string("url", required: true).flatMap { upstreamURL($0, map) }
        let connect = map.duration("connect_timeout")
        let response = map.duration("response_timeout")
        let idle = map.int("max_idle_connections", min: 0)
        guard var upstream = target else { return nil }
        upstream.name = name
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

    /// `http://host:port[/base-path]` (port 80 by default) or `https://…` (443). The base path is kept
    /// without its trailing slash so the proxy can append the request path as is.
    static func upstreamURL(_ text: String, _ map: MappingReader) -> UpstreamConfig? {
        let usage = "(use http://host:port[/base-path])"
        if let separator = text.range(of: "://") {
            let scheme = text[..<separator.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else {
                map.report("unsupported url scheme \"\(scheme)\" \(usage)", key: "url")
                return nil
            }
        }
        guard let url = ConfigURL(text) else {
            map.report("invalid url \(usage)", key: "url")
            return nil
        }
        // Credentials in an upstream URL would be sent nowhere (we do not add Authorization) and must not be
        // echoed; a query string has no meaning for a base path.
        guard !url.hasUserInfo, url.query == nil else {
            map.report("url must not contain credentials or a query \(usage)", key: "url")
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
