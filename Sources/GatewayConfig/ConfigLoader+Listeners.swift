import GatewayCore

/// A listener and the YAML it came from, kept for cross-checks (duplicate addresses, the admin address).
struct DecodedListener {
    var config: ListenerConfig
    var node: YAMLNode
}

/// The `listeners` section.
extension ConfigLoader {
    static func decodeListeners(_ top: MappingReader) -> [DecodedListener] {
        guard let items = top.list("listeners", required: true) else { return [] }
        if items.isEmpty {
            top.report("at least one listener is required", key: "listeners")
            return []
        }
        var decoded: [DecodedListener] = []
        var names: Set<String> = []
        for (index, item) in items.enumerated() {
            let path = indexPath("listeners", index)
            guard let map = MappingReader(item, path: path, context: top.context) else { continue }
            map.rejectUnknownKeys(allowed: ["name", "address", "http2", "tls", "trusted_proxies"])
            let name = map.nonEmptyString("name") ?? "listener-\(index)"
            if !names.insert(name).inserted {
                map.report("duplicate listener name \"\(name)\"", key: "name")
            }
            let address = socketAddress(map, "address", required: true)
            if let address, let clash = decoded.first(where: { ConfigValue.conflicts($0.config.address, address) }) {
                map.report("address \(address) is already used by listener \"\(clash.config.name)\"", key: "address")
            }
            let http2 = map.bool("http2") ?? false
            var tls: TLSConfig?
            if let tlsMap = map.mapping("tls") {
                tlsMap.rejectUnknownKeys(allowed: ["certificate", "private_key"])
                let certificate = tlsMap.filePath("certificate", required: true)
                let privateKey = tlsMap.filePath("private_key", required: true)
                if let certificate, let privateKey {
                    tls = TLSConfig(certificate: certificate, privateKey: privateKey)
                }
            }
            let trustedProxies = decodeTrustedProxies(map)
            if let address {
                var listener = ListenerConfig(name: name, address: address, http2: http2, tls: tls)
                listener.trustedProxies = trustedProxies
                decoded.append(DecodedListener(config: listener, node: item))
            }
        }
        return decoded
    }

    /// `trusted_proxies: [10.0.0.0/8, 127.0.0.1/32, "::1/128"]` — a bare address is one host. Every bad item is
    /// reported at its own line; the valid ones are kept (the load fails anyway).
    static func decodeTrustedProxies(_ map: MappingReader) -> [CIDRBlock] {
        guard let items = map.list("trusted_proxies") else { return [] }
        var blocks: [CIDRBlock] = []
        for (index, item) in items.enumerated() {
            let path = indexPath(map.childPath("trusted_proxies"), index)
            guard let text = item.scalarText, !item.isNull else {
                map.context.report("expected a CIDR block such as 10.0.0.0/8, got \(item.kindDescription)", at: item, path: path)
                continue
            }
            guard let block = CIDRBlock(text) else {
                map.context.report("invalid CIDR \"\(text)\" \(cidrHint(text))", at: item, path: path)
                continue
            }
            blocks.append(block)
        }
        return blocks
    }

    /// Why `text` is not a block: an address with bits set past the prefix (a typo more likely than the block it
    /// would round to), or not an address/prefix at all.
    static func cidrHint(_ text: String) -> String {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2, CIDRBlock(String(parts[0])) != nil, let bits = Int(parts[1]),
           bits >= 0, bits <= (parts[0].contains(":") ? 128 : 32) {
            return "(the address has bits set past the /\(bits) prefix; give the network address)"
        }
        return "(use an address or address/prefix: 10.0.0.0/8, 127.0.0.1/32, ::1/128)"
    }
}
