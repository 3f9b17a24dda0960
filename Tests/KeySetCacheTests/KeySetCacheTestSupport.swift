import GatewayCore
import KeySetCache

/// A clock the test moves by hand (unix seconds).
final class ManualClock: Sendable {
    private let seconds: AnnotatedMutex<Int64>
    init(_ start: Int64 = 1_700_000_000) { seconds = AnnotatedMutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ delta: Int64) { seconds.withLock { $0 += delta } }
    func set(_ value: Int64) { seconds.withLock { $0 = value } }
    var closure: @Sendable () -> Int64 { { self.now } }
}

struct ScriptError: Error, CustomStringConvertible {
    let description: String
}

/// Fetch results handed out in order; when the script runs out, the last result repeats.
final class ScriptedFetch: Sendable {
    private struct State {
        var script: [Result<KeySetFetch, ScriptError>]
        var calls = 0
    }
    private let state: AnnotatedMutex<State>

    init(_ script: [Result<KeySetFetch, ScriptError>] = []) { state = AnnotatedMutex(State(script: script)) }

    /// Replaces what is left of the script.
    func then(_ results: Result<KeySetFetch, ScriptError>...) { state.withLock { $0.script = results } }
    var calls: Int { state.withLock { $0.calls } }

    var closure: @Sendable () throws -> KeySetFetch {
        { try self.next() }
    }

    private func next() throws -> KeySetFetch {
        let result: Result<KeySetFetch, ScriptError> = state.withLock { state in
            state.calls += 1
            guard let first = state.script.first else { return .failure(ScriptError(description: "no script")) }
            if state.script.count > 1 { state.script.removeFirst() }
            return first
        }
        return try result.get()
    }
}

/// A key set for tests: the comma-separated key ids of the body ("bad" fails to parse).
typealias TestKeySet = [String]
typealias TestCache = KeySetCache<TestKeySet>

func parseTestKeySet(_ body: [UInt8]) throws -> TestKeySet {
    let text = String(decoding: body, as: UTF8.self)
    if text == "bad" { throw ScriptError(description: "parse error") }
    return text.split(separator: ",").map(String.init)
}

/// A successful fetch of `kids` with an optional advertised max-age.
func keys(_ kids: String, maxAge: Int? = nil) -> Result<KeySetFetch, ScriptError> {
    .success(KeySetFetch(body: Array(kids.utf8), maxAgeSeconds: maxAge))
}

/// A failed fetch.
func failure(_ why: String = "connect: refused") -> Result<KeySetFetch, ScriptError> {
    .failure(ScriptError(description: why))
}

func makeCache(_ fetch: ScriptedFetch, clock: ManualClock, policy: TestCache.Policy = .init(),
               onEvent: (@Sendable (KeySetEvent) -> Void)? = nil) -> TestCache {
    TestCache(policy: policy, clock: clock.closure, fetch: fetch.closure, parse: parseTestKeySet, onEvent: onEvent)
}

extension KeySetState {
    /// "ready", "stale" or "unavailable", for compact expectations.
    var label: String {
        switch self {
        case .ready: "ready"
        case .stale: "stale"
        case .unavailable: "unavailable"
        }
    }

    var keySet: KeySet? {
        switch self {
        case .ready(let set), .stale(let set): set
        case .unavailable: nil
        }
    }
}
