#if canImport(Glibc)
import Glibc
#endif
import StateStore
import GatewayCore

/// The key layout's version (`<prefix>layout`), checked once per process before the first operation: keys written
/// in the other layout would be misread — a registered App Attest key not found, a consumed token not seen — so they
/// are refused instead (cause `layout`; `/readyz` says it), until the prefix is changed or the keys are migrated.
extension RedisStateStore {
    /// How long the first start on a Cluster may walk the existing keys looking for layout 1 (done once: the marker
    /// is written after it; a walk that does not finish in time is a refusal).
    static let layoutScanBudgetMillis = 30_000
    /// A refused store reads the marker again at most this often (setting it right lifts the refusal).
    static let layoutRecheckMillis: UInt64 = 5_000

    /// Where the check stands. It runs on one caller's thread with no lock held: the others wait for it at most
    /// `state.timeout`, then fail (cause `layout`), so none waits longer behind a walk of the keyspace.
    struct LayoutState: Sendable {
        enum Phase: Sendable { case unchecked, checking, checked, refused }
        var phase = Phase.unchecked
        /// The refusal, told once, repeated to callers until the marker is right.
        var refusal: StateStoreError?
        var lastCheckMillis: UInt64 = 0
    }

    func checkLayout() throws(StateStoreError) {
        enum Next { case done, wait, check(rescan: Bool) }
        let deadline = RedisDeadline(timeoutMillis: timeoutMillis)
        var next = Next.wait
        while case .wait = next {
            let now = MonotonicClock.nowMillis()
            next = try layoutState.withLock { (state) throws(StateStoreError) -> Next in
                switch state.phase {
                case .checked:
                    return .done
                case .checking:
                    // Another caller checks (on a Cluster it may walk the keys): wait for it within state.timeout.
                    guard now < deadline.atMillis else {
                        throw StateStoreError(.timeout, "redis: the key layout under \"\(keys.prefix)\" is still being checked "
                                              + "(state.timeout)", cause: "layout")
                    }
                    return .wait
                case .refused:
                    guard now >= state.lastCheckMillis &+ Self.layoutRecheckMillis else {
                        throw state.refusal ?? StateStoreError(.unavailable, "redis: key layout refused", cause: "layout")
                    }
                    state.phase = .checking
                    state.lastCheckMillis = now
                    return .check(rescan: false)
                case .unchecked:
                    state.phase = .checking
                    state.lastCheckMillis = now
                    return .check(rescan: true)
                }
            }
            if case .wait = next { usleep(1_000) }
        }
        guard case .check(let rescan) = next else { return }
        do throws(StateStoreError) {
            try verifyLayout(mayScan: rescan)
        } catch {
            throw layoutState.withLock { state -> StateStoreError in
                guard error.cause == "layout" else {
                    // Redis could not be asked: try again at the next call. A refusal found earlier still stands, and
                    // is what this caller gets (a plain Redis error could fail open under on_unavailable: allow).
                    state.phase = state.refusal == nil ? .unchecked : .refused
                    return state.refusal ?? error
                }
                state.phase = .refused
                // A recheck that finds no marker keeps the refusal it rechecked (the reason stays the first one).
                if rescan || state.refusal == nil {
                    if state.refusal?.description != error.description { onEvent(.failed(error)) }
                    state.refusal = error
                }
                return state.refusal ?? error
            }
        }
        layoutState.withLock { state in
            state.phase = .checked
            if state.refusal != nil {
                state.refusal = nil
                onEvent(.connected)
            }
        }
    }

    /// Reads the marker; none yet: on a Cluster, looks for keys of layout 1 under the prefix (a Redis whose data was
    /// moved into the Cluster, a gateway pointed at one node with `state.url`), then writes the marker (`SET NX`: of
    /// several gateways starting together, the first decides and the others compare).
    /// `mayScan`: false once a refusal stands (only the marker is read again, so a refused store does not walk the
    /// keyspace at every call).
    private func verifyLayout(mayScan: Bool) throws(StateStoreError) {
        let expected = String(keys.layout)
        let marker = keys.layoutMarker
        var found = try client.run(RedisCommand("GET", marker))
        if case .null = found {
            guard mayScan else { throw StateStoreError(.unavailable, "redis: still no layout marker", cause: "layout") }
            if keys.layout == 2, let cluster = client as? RedisClusterClient {
                let keys = self.keys
                let pattern = Self.globEscaped(keys.prefix) + "*"
                let old: String?
                do throws(StateStoreError) {
                    old = try cluster.firstKey(matching: pattern, budgetMillis: Self.layoutScanBudgetMillis, where: { name in
                        name != marker && RedisKeySpace.kinds.contains { name.dropFirst(keys.prefix.count).hasPrefix($0) } && !keys.isLayout2(name)
                    })
                } catch {
                    guard error.kind == .timeout, error.cause == "scan_budget" else { throw error }
                    throw StateStoreError(.unavailable, "redis: the keys under \"\(keys.prefix)\" could not all be checked for layout 1 "
                                          + "within \(Self.layoutScanBudgetMillis / 1000) s; once they are known to be layout 2 (or none), "
                                          + "SET \(marker) 2", cause: "layout")
                }
                if old != nil { throw refused(found: "1") }
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
                               + "misread them: use another state.key_prefix, or migrate the keys and SET \(keys.layoutMarker) "
                               + "\(keys.layout) (configuration.md)", cause: "layout")
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
