public import GatewayCore
public import StateStore
/// A route's verification: its verifiers in order, any-of or all-of, enforce or monitor, and limited use.
///
/// The proxy calls `evaluate` with the request's headers; the verifiers run in order — any-of stops at the first
/// pass, all-of at the first failure, and only the verifiers that ran have side effects. A verifier that needs
/// work off the loop suspends the evaluation (`Step.suspended`); the proxy runs that step and hands its result to
/// `resume`. Once decided, limited use consumes the passed credentials (`consumption`, then `consumed`): only then,
/// so a forged credential can never burn a genuine one. A class: the proxy reads it from its route on every
/// request, and a struct copy would retain each of its arrays.
public final class Authenticator: Sendable {
    public let verifiers: [any CredentialVerifier]
    public let requireAll: Bool
    public let monitor: Bool
    public let stripTokenHeaders: Bool
    /// `limited_use: true`: passed credentials are consumed once in the state store.
    public let limitedUse: Bool
    /// Lower-case names of every credential header of these verifiers (stripped before forwarding when asked).
    public let tokenHeaders: [[UInt8]]
    /// Per verifier, the header that says its credential is present.
    public let presenceHeaders: [[UInt8]]

    public init(verifiers: [any CredentialVerifier], requireAll: Bool, monitor: Bool, stripTokenHeaders: Bool, limitedUse: Bool) {
        self.verifiers = verifiers
        self.requireAll = requireAll
        self.monitor = monitor
        self.stripTokenHeaders = stripTokenHeaders
        self.limitedUse = limitedUse
        tokenHeaders = verifiers.flatMap(\.credentialHeaders)
        presenceHeaders = verifiers.map(\.presenceHeader)
    }

    /// Where an evaluation stands.
    public enum Step {
        case decided(VerificationDecision)
        /// Verifier `verifier` waits on `step` (never `.done`): run it, then `resume` with what it returns.
        case suspended(verifier: Int, VerifierStep)
    }

    /// Runs the verifiers from `progress.next`. `request(i)` is what verifier `i` may need beyond the headers.
    public func evaluate(_ headers: HeaderView, progress: inout AuthenticationProgress,
                         request: (Int) -> VerificationRequest) -> Step {
        while progress.next < verifiers.count {
            let i = progress.next
            progress.next += 1
            switch Self.start(verifiers[i], headers, request(i)) {
            case nil:
                if requireAll { return .decided(progress.firstFailure ?? .absent) }
                continue
            case .done(let outcome)?:
                if let decided = record(outcome, verifier: i, progress: &progress) { return .decided(decided) }
            case let step?:
                return .suspended(verifier: i, step)
            }
        }
        return .decided(progress.lastPass ?? progress.firstFailure ?? .absent)
    }

    /// Verifier `i`'s suspended step has produced `step`: fold it in if done, and go on.
    public func resume(_ step: VerifierStep, verifier i: Int, _ headers: HeaderView, progress: inout AuthenticationProgress,
                       request: (Int) -> VerificationRequest) -> Step {
        guard case .done(let outcome) = step else { return .suspended(verifier: i, step) }
        if let decided = record(outcome, verifier: i, progress: &progress) { return .decided(decided) }
        return evaluate(headers, progress: &progress, request: request)
    }

    /// Extracts and, when presented, starts verifying; nil when the credential is absent.
    private static func start<V: CredentialVerifier>(_ v: V, _ headers: HeaderView, _ request: VerificationRequest) -> VerifierStep? {
        switch v.extract(headers) {
        case .absent: nil
        case .malformed: .done(.rejected(.malformedToken))
        // The proxy keeps each verifier's loop state beside it (same index), so the type always matches.
        case .presented(let credential): v.verify(credential, request, loop: request.loopState.map { unsafeDowncast($0, to: V.LoopState.self) })
        }
    }

    /// Folds one verifier's outcome into the evaluation; a decision when it ends the evaluation.
    func record(_ outcome: VerifierOutcome, verifier i: Int, progress: inout AuthenticationProgress) -> VerificationDecision? {
        switch outcome {
        case .passed(let token):
            if !requireAll { return .verified(verifier: i, token: token) }
            progress.lastPass = .verified(verifier: i, token: token)
            progress.passes.append((i, token))
        case .passedUnchecked(let token, let reason):
            if !requireAll { return .verifiedUnchecked(verifier: i, token: token, reason: reason) }
            progress.lastPass = .verifiedUnchecked(verifier: i, token: token, reason: reason)
        case .refused(let status, let fields):
            progress.refusedFields = fields
            return record(.rejected(status), verifier: i, progress: &progress)
        case .rejected(let status):
            if requireAll { return .failed(verifier: i, status: status) }
            if progress.firstFailure == nil { progress.firstFailure = .failed(verifier: i, status: status) }
        }
        return nil
    }

    /// The reason to reject with, or nil when the request goes on (it passed, or the route only monitors).
    public func enforced(_ decision: VerificationDecision) -> VerificationStatus? {
        monitor ? nil : decision.status
    }

    // MARK: limited use

    /// What limited use does after a decision.
    public enum ConsumptionPlan {
        /// Nothing to consume: the decision stands.
        case nothing
        /// The decision changes without a store call (an App Check token without `jti`).
        case refused(VerificationDecision)
        /// Consume `requests` (of verifiers `verifiers`, same order) once each, then call `consumed`.
        case consume([ConsumeRequest], verifiers: [Int])
    }

    /// Every limited-use credential that passed counts: with any-of the one that decided, with require_all each
    /// one — otherwise a reusable second credential would carry a spent first one along.
    public func consumption(for decision: VerificationDecision, progress: AuthenticationProgress) -> ConsumptionPlan {
        guard limitedUse, case .verified(let decider, let token) = decision else { return .nothing }
        let passed = requireAll ? progress.passes : [(decider, token)]
        var requests: [ConsumeRequest] = []
        var owners: [Int] = []
        for (i, token) in passed {
            switch token.consumption {
            case .none: continue
            case .impossible(let status): return .refused(.failed(verifier: i, status: status))
            case .once(let request):
                requests.append(request)
                owners.append(i)
            }
        }
        return requests.isEmpty ? .nothing : .consume(requests, verifiers: owners)
    }

    /// The decision once the store answered each consume: the request goes on only if every credential was unseen.
    /// A store failure fails closed unless `allowWhenUnavailable` (`state.on_unavailable: allow`) and the failure is
    /// one that may fail open (`StateStoreError.failsOpen`).
    public func consumed(_ results: [Result<Bool, StateStoreError>], verifiers owners: [Int], decision: VerificationDecision,
                         allowWhenUnavailable: Bool) -> VerificationDecision {
        var outcome = decision
        for (k, result) in results.enumerated() {
            switch result {
            case .success(true): continue
            case .success(false): outcome = .failed(verifier: owners[k], status: .tokenReplayed)
            case .failure(let error):
                if allowWhenUnavailable, error.failsOpen, case .verified(let i, let token) = outcome {
                    outcome = .verifiedUnchecked(verifier: i, token: token, reason: .stateUnavailable)
                    continue
                }
                if error.failsOpen, case .verifiedUnchecked = outcome { continue }
                outcome = .failed(verifier: owners[k], status: .stateUnavailable)
            }
            if case .failed = outcome { break }
        }
        return outcome
    }

    // MARK: answers

    /// The `WWW-Authenticate` schemes of a rejection: the verifier that failed, or for a missing credential every
    /// verifier whose credential the request does not carry (with `require_all`, a present App Check token next to
    /// a missing App Attest assertion challenges for App Attest only).
    public func schemes(for decision: VerificationDecision, headers: HeaderView?) -> [StaticString] {
        if let i = decision.verifierIndex { return [verifiers[i].scheme] }
        var schemes: [StaticString] = []
        func add(_ s: StaticString) {
            if !schemes.contains(where: { $0.description == s.description }) { schemes.append(s) }
        }
        if let headers {
            for (i, v) in verifiers.enumerated() where !headers.has(presenceHeaders[i]) { add(v.scheme) }
        }
        if schemes.isEmpty { for v in verifiers { add(v.scheme) } }
        return schemes
    }
}

/// How far a route's evaluation has got (it may suspend while a verifier works off the loop).
public struct AuthenticationProgress {
    var next = 0
    var firstFailure: VerificationDecision? = nil
    var lastPass: VerificationDecision? = nil
    /// `require_all`: every verifier that passed, in order (limited use consumes each one's credential).
    var passes: [(verifier: Int, token: PassedCredential)] = []
    /// The fields of the last `refused` outcome: monitor mode still tells the upstream (App Attest's risk metric).
    public internal(set) var refusedFields: [VerdictField] = []

    public init() {}
}

/// What a route's verifiers decided about one request.
public enum VerificationDecision: Sendable {
    case verified(verifier: Int, token: PassedCredential)
    /// Verified, but a state check could not run (`state.on_unavailable: allow`): forwarded with the reason.
    case verifiedUnchecked(verifier: Int, token: PassedCredential, reason: VerificationStatus)
    /// A credential was presented and failed (`verifier` is the one whose failure decides).
    case failed(verifier: Int, status: VerificationStatus)
    /// No verifier found its credential.
    case absent

    /// The verifier that decided (nil for `absent`).
    public var verifierIndex: Int? {
        switch self {
        case .verified(let i, _), .verifiedUnchecked(let i, _, _), .failed(let i, _): i
        case .absent: nil
        }
    }

    /// Why the request did not pass (nil: it passed).
    public var status: VerificationStatus? {
        switch self {
        case .verified, .verifiedUnchecked: nil
        case .failed(_, let s): s
        case .absent: .missingToken
        }
    }
}
