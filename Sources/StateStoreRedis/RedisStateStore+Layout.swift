import StateStore
import GatewayCore

/// The key layout's version (`<prefix>layout`), checked once per process before the first operation: keys written
/// in the other layout would be misread — a registered App Attest key not found, a consumed token not seen — so they
/// are refused instead (cause `layout`; `/readyz` says it), until the prefix is changed or the keys are migrated.
extension RedisStateStore {
    /// How long the first start on a Cluster may walk the existing keys looking for layout 1 (done once: the marker
    /// is written after it).
    static let layoutScanBudgetMillis = 30_000

    /// Whether the layout was found right, and whether a refusal was told (once, until it is right).
    struct LayoutState: Sendable {
        var checked = false
        var refused = false
    }

    func checkLayout() throws(StateStoreError) {
        try layoutState.withLock { (state) throws(StateStoreError) -> Void in
            guard !state.checked else { return }
            do throws(StateStoreError) {
                try verifyLayout()
            } catch {
                if error.cause == "layout", !state.refused {
                    state.refused = true
                    onEvent(.failed(error))
                }
                throw error
            }
            state.checked = true
            if state.refused {
                state.refused = false
                onEvent(.connected)
            }
        }
    }

    /// Reads the marker; none yet: on a Cluster, looks for keys of layout 1 under the prefix (a Redis whose data was
    /// moved into the Cluster, a gateway pointed at one node with `state.url`), then writes the marker (`SET NX`: of
    /// several gateways starting together, the first decides and the others compare).
    private func verifyLayout() throws(StateStoreError) {
        let expected = String(keys.layout)
        let marker = keys.layoutMarker
        var found = try client.run(RedisCommand("GET", marker))
        if case .null = found {
            if keys.layout == 2, let cluster = client as? RedisClusterClient {
                let keys = self.keys
                let pattern = Self.globEscaped(keys.prefix) + "*"
                if try cluster.firstKey(matching: pattern, budgetMillis: Self.layoutScanBudgetMillis, where: { name in
                    name != marker && RedisKeySpace.kinds.contains { name.dropFirst(keys.prefix.count).hasPrefix($0) } && !keys.isLayout2(name)
                }) != nil {
                    throw refused(found: "1")
                }
            }
            var set = RedisCommand("SET", marker, expected)
            set.append("NX")
            let reply = try client.run(set, write: true)
            switch reply {
            case .status("OK"): return
            case .null: found = try client.run(RedisCommand("GET", marker))
            default: throw reply.unexpected("SET \(marker)")
            }
        }
        switch found {
        case .string(let bytes) where String(decoding: bytes, as: UTF8.self) == expected: return
        case .string(let bytes): throw refused(found: String(decoding: bytes, as: UTF8.self))
        default: throw found.unexpected("GET \(marker)")
        }
    }

    private func refused(found: String) -> StateStoreError {
        let printable = found.count <= 8 && found.allSatisfy { $0.isASCII && !$0.isWhitespace } ? found : "?"
        return StateStoreError(.unavailable, "redis: the keys under \"\(keys.prefix)\" are in layout \(printable), this gateway "
                               + "reads layout \(keys.layout) (state.url and state.sentinel: 1, state.cluster: 2); refusing to "
                               + "misread them: use another state.key_prefix, or migrate the keys (configuration.md)", cause: "layout")
    }

    /// `text` as a SCAN pattern matching itself only (`*`, `?`, `[`, `]` and `\` escaped).
    static func globEscaped(_ text: String) -> String {
        var out = ""
        for c in text {
            if "*?[]\\".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }
}
