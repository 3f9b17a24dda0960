import Attestation
import GatewayCrypto
import HTTP1
import StateStore

/// App Attest on a route: the body is read and hashed (the request binding signs it), the key comes from the
/// cache or the store, the signature is checked on the loop, and the counter advances atomically in the store —
/// only then does the upstream see the request.
extension DownstreamConnection {
    /// The key first (cache, else the store off the loop, the body still unread), then the body: an unknown key id
    /// is refused at once, so made-up key ids cannot make the gateway hold bodies (memory) for nothing.
    func startAppAttest(_ head: HTTP1RequestHead, route: CompiledRoute, plan: RouteVerification, verifier i: Int,
                        _ presented: AppAttestPresentation) {
        exchange.pendingAttest = (i, presented)
        guard let state = gen.runtime.state else {
            respondLocal(.verifierUnavailable(), close: true)
            return
        }
        if let entry = state.appAttestKeys.get(presented.keyID) {
            keyFound(entry, head: head, route: route)
            return
        }
        exchange.awaitingState = true
        deadline = 0
        let keyID = presented.keyID
        state.call("appattest_key", loop: worker.loop, owner: self, { store in
            Result { () throws(StateStoreError) -> (AttestedKeyRecord, Int?)? in
                guard let key = try store.key(id: keyID) else { return nil }
                return (key, try store.receipt(keyID: keyID)?.riskMetric)
            }
        }) { conn, result in
            guard !conn.closed, conn.exchange.awaitingState else { return }
            conn.exchange.awaitingState = false
            switch result {
            case .success(let (record, riskMetric)?):
                if let entry = state.appAttestKeys.put(record, riskMetric: riskMetric), let head = conn.exchange.head {
                    conn.keyFound(entry, head: head, route: conn.gen.routes[conn.exchange.routeIndex])
                } else {
                    conn.appAttestFinished(.rejected(.badAssertion))   // a stored key that is not a P-256 point
                }
            case .success(nil): conn.appAttestFinished(.rejected(.unknownKeyID))
            case .failure: conn.appAttestFinished(.rejected(.stateUnavailable))
            }
            conn.resumeAfterStateWork()
        }
    }

    /// The key is known: hold the body (the request binding signs its hash) within the process-wide budget.
    private func keyFound(_ entry: AppAttestKeyCache.Entry, head: HTTP1RequestHead, route: CompiledRoute) {
        exchange.attestKey = entry
        if exchange.heldBody == nil {
            let held = HeldBody(budget: gen.runtime.heldBodies)
            if !exchange.requestDone {
                if case .contentLength(let n) = head.framing {
                    if n > route.maxBodyBytes {
                        respondLocal(.payloadTooLarge(), close: true)
                        return
                    }
                    guard held.reserve(total: n) else {
                        respondLocal(.overloaded(), close: true)
                        return
                    }
                }
                exchange.heldBody = held
                sendContinueIfExpected(head)
                setDeadline(worker.loop.now + worker.idleTimeout)
                return   // `process` reads the body into `heldBody`, then calls `heldBodyComplete`
            }
            exchange.heldBody = held
        }
        appAttestBodyReady()
    }

    /// The whole request body is held: go on with what was waiting for it.
    func heldBodyComplete() {
        if exchange.registration != nil {
            registrationBodyReady()
        } else if exchange.pendingAttest != nil {
            appAttestBodyReady()
        }
    }

    private var appAttestContext: (head: HTTP1RequestHead, route: CompiledRoute, plan: RouteVerification,
                                   index: Int, verifier: AppAttestVerifier, presented: AppAttestPresentation)? {
        guard let head = exchange.head, exchange.routeIndex >= 0, let (i, presented) = exchange.pendingAttest else { return nil }
        let route = gen.routes[exchange.routeIndex]
        guard let plan = route.verification, case .appAttest(let verifier) = plan.verifiers[i] else { return nil }
        return (head, route, plan, i, verifier, presented)
    }

    /// The body is complete and the key known: check the assertion.
    private func appAttestBodyReady() {
        guard let entry = exchange.attestKey else {
            respondLocal(.verifierUnavailable(), close: true)
            return
        }
        checkAssertion(with: entry)
    }

    /// Signature, app, environment and extension policy on the loop; then the counter (and the challenge) in the store.
    private func checkAssertion(with entry: AppAttestKeyCache.Entry) {
        let key = entry.record
        guard let ctx = appAttestContext, let state = gen.runtime.state, let held = exchange.heldBody else { return }
        let clientData: [UInt8]
        if let challenge = ctx.presented.challenge {
            clientData = Array(challenge.utf8)
        } else {
            if let original = exchange.forwardAuth {
                // Forward-auth: the request the client signed is the original one, not this call.
                clientData = AppAttestVerifier.requestClientData(method: original.method, target: original.target,
                                                                 timestamp: ctx.presented.timestamp, bodySHA256: held.finishDigest())
            } else {
                clientData = ctx.head.bytes.withUnsafeBytes { raw in
                    AppAttestVerifier.requestClientData(
                        method: UnsafeRawBufferPointer(rebasing: raw[ctx.head.method]),
                        // As the client sent it (for an absolute-form target: its path and query), not the canonical form.
                        target: HeaderFilter.originForm(UnsafeRawBufferPointer(rebasing: raw[ctx.head.target])),
                        timestamp: ctx.presented.timestamp, bodySHA256: held.finishDigest())
                }
            }
        }
        let verified: VerifiedAppAttestAssertion
        switch ctx.verifier.verifyAssertion(ctx.presented.assertion, clientData: clientData, key: entry.key,
                                            keyAppID: key.appID, keyEnvironment: key.environment, previousCounter: 0) {
        case .failure(let status):
            appAttestFinished(.rejected(status))
            return
        case .success(let v): verified = v
        }
        // The metric as the cache has it now (the refresher may have updated it since the key was looked up).
        let riskMetric = state.appAttestKeys.get(key.keyID)?.riskMetric ?? entry.riskMetric
        if let max = ctx.route.maxRiskMetric, let riskMetric, riskMetric > max {
            exchange.refusedRiskMetric = riskMetric
            appAttestFinished(.rejected(.riskTooHigh))
            return
        }
        let token = PassedToken.appAttest(appID: key.appID, keyID: key.keyID, riskMetric: riskMetric)
        let refresher = gen.runtime.fraudMetrics[ctx.verifier.name]
        let challenge = ctx.presented.challenge
        let namespace = ctx.verifier.challengeNamespace
        let now = worker.unixNow()
        exchange.awaitingState = true
        deadline = 0
        state.call("appattest_counter", loop: worker.loop, owner: self, { store in
            Result { () throws(StateStoreError) -> VerificationStatus? in
                if let challenge, try !store.redeem(namespace: namespace, key: challenge, now: now) { return .challengeUnknown }
                if try store.advanceCounter(keyID: key.keyID, to: verified.counter) { return nil }
                // The compare-and-set also fails for a key no longer in the store (cached here before it was removed).
                return try store.key(id: key.keyID) == nil ? .unknownKeyID : .counterNotIncreasing
            }
        }) { conn, result in
            guard !conn.closed, conn.exchange.awaitingState else { return }
            conn.exchange.awaitingState = false
            switch result {
            case .success(nil):
                refresher?.noteUse(key.keyID)
                conn.appAttestFinished(.passed(token))
            case .success(let status?): conn.appAttestFinished(.rejected(status))
            case .failure:
                conn.appAttestFinished(state.allowWhenUnavailable ? .passedUnchecked(token, .stateUnavailable)
                                                                  : .rejected(.stateUnavailable))
            }
            conn.resumeAfterStateWork()
        }
    }

    /// One App Attest verifier has its outcome: fold it in and let the route's remaining verifiers run.
    private func appAttestFinished(_ outcome: VerifierOutcome) {
        guard let ctx = appAttestContext else { return }
        exchange.pendingAttest = nil
        exchange.attestKey = nil
        resumeVerification(outcome, verifier: ctx.index)
    }

    /// A verifier that ran off the loop has its outcome: fold it in and let the route's remaining verifiers run.
    func resumeVerification(_ outcome: VerifierOutcome, verifier i: Int) {
        guard let head = exchange.head, exchange.routeIndex >= 0 else { return }
        let route = gen.routes[exchange.routeIndex]
        guard let plan = route.verification else { return }
        if let decision = plan.record(outcome, verifier: i, progress: &exchange.progress) {
            verificationDecided(head, route: route, plan: plan, decision)
        } else {
            continueVerification(head, route: route, plan: plan)
        }
    }
}
