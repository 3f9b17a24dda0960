import Attestation
import GatewayConfig
import GatewayCore
import KeySetCache
import Observability
import StateStore

/// Admin `GET /stats` (PROTOCOL.md Additions "Rollout view"): per route with verifiers, the last hour and day of
/// verification outcomes in Firebase's categories, what enforcing would reject, the top reasons and app ids; the key
/// sets' schedule, the state store's health, the configuration's hash and reload history. Names, reason codes, app
/// ids and counts only — never a token or a key id.
public enum RolloutStats {
    /// Outcomes over a window, in the categories of the rollout view.
    struct Window {
        var verified: UInt64 = 0
        /// No credential (Firebase: "outdated client" or "unknown origin").
        var missing: UInt64 = 0
        /// The SDK's placeholder: the device could not attest.
        var clientAttestationFailed: UInt64 = 0
        var invalid: [String: UInt64] = [:]
        /// A credential used again (token_replayed, counter_not_increasing, challenge_unknown).
        var replayed: UInt64 = 0
        /// A dependency failed (the 503 reasons: key set, state store, Apple's or Google's service).
        var unavailable: UInt64 = 0

        var rejected: UInt64 { missing + clientAttestationFailed + invalid.values.reduce(0, +) + replayed + unavailable }

        mutating func add(outcome: VerificationKey.Outcome, reason: VerificationStatus?, _ n: UInt64) {
            switch outcome {
            case .verified: verified &+= n
            case .absent: missing &+= n
            case .failed:
                guard let reason else { invalid["unknown", default: 0] &+= n; return }
                if reason == .missingToken { missing &+= n }
                else if reason == .clientAttestationFailed { clientAttestationFailed &+= n }
                else if RolloutStats.replayReasons.contains(reason) { replayed &+= n }
                else if reason.httpStatus == 503 { unavailable &+= n }
                else { invalid[reason.code, default: 0] &+= n }
            }
        }

        func json() -> String {
            let invalidJSON = invalid.sorted { $0.key < $1.key }.map { "\(JSONText.quoted($0.key)):\($0.value)" }.joined(separator: ",")
            return "{\"verified\":\(verified),\"missing\":\(missing),\"client_attestation_failed\":\(clientAttestationFailed)," +
                "\"invalid\":{\(invalidJSON)},\"replayed\":\(replayed),\"unavailable\":\(unavailable)}"
        }
    }

    /// The reasons counted as replays (also `attest_gateway_replays_rejected_total`).
    static let replayReasons: Set<VerificationStatus> = [.tokenReplayed, .counterNotIncreasing, .challengeUnknown]
    static let topCount = 10

    /// The JSON document, sampled now.
    public static func render(history: RolloutHistory, runtime: ProxyRuntime, now time: Int64? = nil) -> String {
        let now = time ?? WallClock.unixSeconds()
        let (minute, buckets) = history.recent(minutes: RolloutHistory.dayMinutes)
        let hourStart = minute - Int64(RolloutHistory.hourMinutes) + 1
        let reasons = VerificationStatus.allCases
        let modes = Dictionary(runtime.config.routes.map { ($0.name, $0.mode.rawValue) }, uniquingKeysWith: { a, _ in a })

        // One pass over the buckets, each key added to its route's tallies (work: buckets × keys, not × routes).
        struct Tally {
            var hour = Window(), day = Window()
            var reasons: [String: UInt64] = [:]
            var apps: [String: UInt64] = [:]
            /// Per minute of the last hour: verified and rejected.
            var perMinute = [(UInt64, UInt64)](repeating: (0, 0), count: RolloutHistory.hourMinutes)
        }
        let shown = runtime.routes.routes.filter { !$0.verifiers.isEmpty }
        var tallies: [Int: Tally] = [:]
        for route in shown { tallies[route.metricID] = Tally() }
        for b in buckets {
            let inHour = b.minute >= hourStart
            let slot = Int(b.minute - hourStart)
            for (key, n) in b.verifications {
                let (r, _, outcome, reasonIndex) = VerificationKey.split(key)
                guard tallies[r] != nil else { continue }
                let reason = outcome == .verified ? nil : reasonIndex < reasons.count ? reasons[reasonIndex] : nil
                tallies[r]!.day.add(outcome: outcome, reason: reason, n)
                guard inHour else { continue }
                tallies[r]!.hour.add(outcome: outcome, reason: reason, n)
                if outcome == .verified { tallies[r]!.perMinute[slot].0 &+= n } else {
                    tallies[r]!.perMinute[slot].1 &+= n
                    tallies[r]!.reasons[reason?.code ?? (outcome == .absent ? VerificationStatus.missingToken.code : "unknown"), default: 0] &+= n
                }
            }
            if inHour { for (key, n) in b.apps where tallies[key.route] != nil { tallies[key.route]!.apps[key.appID, default: 0] &+= n } }
        }

        var routeJSON: [String] = []
        for route in shown {
            let t = tallies[route.metricID] ?? Tally()
            let (hour, day) = (t.hour, t.day)
            let judged = hour.verified + hour.rejected
            let tenths = judged == 0 ? 0 : (hour.rejected * 1000 + judged / 2) / judged
            let minutes = t.perMinute.enumerated().map { i, c in "{\"t\":\((hourStart + Int64(i)) * 60),\"verified\":\(c.0),\"rejected\":\(c.1)}" }
            routeJSON.append("{\"name\":\(JSONText.quoted(route.name)),\"mode\":\(JSONText.quoted(modes[route.name] ?? "enforce"))," +
                "\"verifiers\":[\(route.verifiers.map(JSONText.quoted).joined(separator: ","))]," +
                "\"last_hour\":\(hour.json()),\"last_day\":\(day.json()),\"would_reject_percent\":\(tenths / 10).\(tenths % 10)," +
                "\"minutes\":[\(minutes.joined(separator: ","))]," +
                "\"top_reasons\":[\(top(t.reasons).map { "{\"reason\":\(JSONText.quoted($0.0)),\"count\":\($0.1)}" }.joined(separator: ","))]," +
                "\"top_app_ids\":[\(top(t.apps).map { "{\"app_id\":\(JSONText.quoted($0.0)),\"count\":\($0.1)}" }.joined(separator: ","))]}")
        }

        let keySets = runtime.verifiers.keySets.sorted { $0.key < $1.key }.map { name, cache -> String in
            let s = cache.schedule
            let age = s.loadedAt.map { String(max(0, now - $0)) } ?? "null"
            let expires = s.expiresAt.map { String(max(0, $0 - now)) } ?? "null"
            return "{\"verifier\":\(JSONText.quoted(name)),\"age_seconds\":\(age),\"next_refresh_seconds\":\(max(0, cache.nextRefreshAt - now))," +
                "\"expiry_seconds\":\(expires),\"consecutive_failures\":\(s.consecutiveFailures),\"ready\":\(cache.isReady)," +
                "\"last_error\":\(cache.lastError.map(JSONText.quoted) ?? "null")}"
        }

        var state = "null"
        if let service = runtime.state {
            var ready = true, lastError = "null", cause = "null"
            do { try service.store.ping() } catch {
                ready = false
                (lastError, cause) = (JSONText.quoted(error.description), JSONText.quoted(error.label))
            }
            state = "{\"backend\":\(JSONText.quoted(runtime.config.state.backend.rawValue)),\"ready\":\(ready),\"last_error\":\(lastError),\"cause\":\(cause)}"
        }

        let config = ProcessMetrics.shared.configStatus
        let reloads = config.reloads.map { r in
            "{\"at\":\(JSONText.quoted(RFC3339.format(r.at))),\"result\":\"\(r.ok ? "success" : "failure")\",\"hash\":\(JSONText.quoted(r.hash))," +
                "\"error\":\(r.error.map(JSONText.quoted) ?? "null")}"
        }
        return "{\"generated_at\":\(JSONText.quoted(RFC3339.format(now))),\"routes\":[\(routeJSON.joined(separator: ","))]," +
            "\"key_sets\":[\(keySets.joined(separator: ","))],\"state\":\(state)," +
            "\"config\":{\"hash\":\(JSONText.quoted(config.hash)),\"loaded_at\":\(config.loadedAt > 0 ? JSONText.quoted(RFC3339.format(config.loadedAt)) : "null")," +
            "\"reloads\":[\(reloads.joined(separator: ","))]}}"
    }

    /// The largest counts first (ties by name), at most `topCount`.
    static func top(_ counts: [String: UInt64]) -> [(String, UInt64)] {
        Array(counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(topCount).map { ($0.key, $0.value) })
    }
}
