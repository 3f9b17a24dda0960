import Attestation
import Dispatch
import GatewayCore
import HTTP1
import Observability
import StateStore
import GatewayPosix

/// Runs a route's Authenticator for the request in progress: the verifiers' steps that leave the loop (the state
/// store, calls to Apple, the whole body) are run here generically, the request waiting unread meanwhile; every
/// decision about credentials is the Authenticator's.
extension ProxyExchange {
    /// Worker threads for calls that block (Apple's and Google's servers, attestation chains).
    static let blockingQueue = DispatchQueue(label: "attest-gateway.blocking", attributes: .concurrent)

    /// Starts the route's verifiers.
    func authenticate(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator) {
        run(head, route: route, plan: plan, resuming: nil)
    }

    /// Verifier `i`'s step finished with `step`: fold it in and go on.
    private func resume(_ step: VerifierStep, verifier i: Int) {
        guard let head = exchange.head, exchange.routeIndex >= 0 else { return }
        let route = gen.routes[exchange.routeIndex]
        guard let plan = route.verification else { return }
        run(head, route: route, plan: plan, resuming: (step, i))
    }

    /// One pass of the Authenticator: the clock, the signed line and the loop states read once for its verifiers.
    private func run(_ head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator, resuming: (step: VerifierStep, verifier: Int)?) {
        let nowMillis = WallClock.unixMillis()
        let now = nowMillis / 1000
        // Forward-auth: the request the client signed is the original one, not this call.
        let line: SignedRequestLine = exchange.forwardAuth.map { .original(method: $0.method, target: $0.target) } ?? head.signedLine
        let states = gen.loopStates[exchange.routeIndex]
        func request(_ i: Int) -> VerificationRequest { VerificationRequest(now: now, nowMillis: nowMillis, signedLine: line, loopState: states[i]) }
        let next = head.withHeaderView { headers in
            if let (step, i) = resuming {
                return plan.resume(step, verifier: i, headers, progress: &exchange.progress, request: request)
            }
            return plan.evaluate(headers, progress: &exchange.progress, request: request)
        }
        drive(next, head: head, route: route, plan: plan)
    }

    private func drive(_ step: Authenticator.Step, head: HTTP1RequestHead, route: CompiledRoute, plan: Authenticator) {
        switch step {
        case .decided(let decision):
            verificationDecided(head, route: route, plan: plan, decision)
        case .suspended(let i, .done(let outcome)):
            resume(.done(outcome), verifier: i)   // (the Authenticator folds `done` steps itself)
        case .suspended(let i, .store(let work)):
            guard let state = gen.runtime.state else {
                respondLocal(.verifierUnavailable(), close: true)
                return
            }
            if let (advance, then) = work.counter {
                waitOffLoop()
                state.advanceCounter(advance, loop: worker.loop, owner: self) { conn, result in
                    guard conn.backOnLoop() else { return }
                    switch result {
                    case .success(let advanced): conn.resume(then(advanced), verifier: i)
                    case .failure(let error): conn.resume(work.failed(error), verifier: i)
                    }
                    conn.resumeAfterStateWork()
                }
                return
            }
            offLoop(state, work.operation, { store in
                Result { () throws(StateStoreError) in try work.run(store) }
            }) { conn, result in
                switch result {
                case .success(let next): conn.resume(next, verifier: i)
                case .failure(let error): conn.resume(work.failed(error), verifier: i)
                }
            }
        case .suspended(let i, .blocking(let work)):
            let name = plan.verifiers[i].name
            let context = BlockingContext(store: gen.runtime.state?.store, log: { message in Logger.error(message, ["verifier": name]) })
            offLoop(Self.blockingQueue, { work(context) }) { conn, next in conn.resume(next, verifier: i) }
        case .suspended(let i, .body(let continuation)):
            exchange.pendingBody = (i, continuation)
            holdBody(head, route: route)
        }
    }

    /// A verifier needs the whole body: hold it (the route's `max_body_bytes`, the process-wide budget), then
    /// `heldBodyComplete` hands its digest on.
    private func holdBody(_ head: HTTP1RequestHead, route: CompiledRoute) {
        if exchange.heldBody == nil {
            let held = HeldBody(budget: gen.runtime.heldBodies)
            if !http.requestDone {
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
        bodyReady()
    }

    /// The whole request body is held: go on with what was waiting for it.
    func heldBodyComplete() {
        if exchange.registration != nil {
            registrationBodyReady()
        } else if exchange.pendingBody != nil {
            bodyReady()
        }
    }

    private func bodyReady() {
        guard let (i, continuation) = exchange.pendingBody, let held = exchange.heldBody else { return }
        exchange.pendingBody = nil
        resume(continuation(held.finishDigest()), verifier: i)
    }

    // MARK: off the loop

    /// Runs `work` on the state queue (in arrival order with the other state work); `then` runs on the loop
    /// unless the exchange closed meanwhile; afterwards the exchange goes on with what its carrier has buffered.
    func offLoop<Value>(_ state: StateService, _ operation: String,
                        _ work: @escaping @Sendable (AttestationStateStore) -> Result<Value, StateStoreError>,
                        then: @escaping (ProxyExchange, Result<Value, StateStoreError>) -> Void) {
        waitOffLoop()
        state.call(operation, loop: worker.loop, owner: self, work) { conn, result in
            guard conn.backOnLoop() else { return }
            then(conn, result)
            conn.resumeAfterStateWork()
        }
    }

    /// Runs `work` on `queue` (work that may block); `then` as above.
    func offLoop<Value>(_ queue: DispatchQueue, _ work: @escaping @Sendable () -> Value,
                        then: @escaping (ProxyExchange, Value) -> Void) {
        waitOffLoop()
        let loop = worker.loop
        // (Two boxes, not one tuple: destructuring a tuple of a class and a closure here crashes Swift 6.3's optimizer.)
        let conn = LoopBound(value: self)
        let done = LoopBound(value: then)
        queue.async {
            let value = LoopBound(value: work())
            loop.execute {
                guard conn.value.backOnLoop() else { return }
                done.value(conn.value, value.value)
                conn.value.resumeAfterStateWork()
            }
        }
    }

    /// The request waits (its body unread, no deadline: the off-loop work has its own timeouts).
    func waitOffLoop() {
        http.awaitWork(true)
        clearDeadline()
    }

    /// False when the exchange closed or the exchange moved on while the work ran.
    func backOnLoop() -> Bool {
        guard !closed, http.awaitingWork else { return false }
        http.awaitWork(false)
        return true
    }

    /// After work off the loop finished: go on with what is buffered and what the socket has.
    func resumeAfterStateWork() {
        if !closed && (http.phase == .exchanging || http.phase == .awaitingHead) { carrier.resumeInput() }
    }
}
