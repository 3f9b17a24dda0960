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
            map.rejectUnknownKeys(allowed: ["name", "address", "http2", "tls"])
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
            if let address {
                decoded.append(DecodedListener(config: ListenerConfig(name: name, address: address, http2: http2, tls: tls),
                                               node: item))
            }
        }
        return decoded
    }
}
