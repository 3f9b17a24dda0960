public import GatewayCore
public import StateStore
/// One kind of app-integrity credential on a request (App Check token, App Attest assertion, DeviceCheck token…):
/// the headers that carry it, how it is read from them, and how it is verified — at once on the event loop, or
/// through steps the proxy runs generically (`VerifierStep`: the state store, a blocking call, the whole body).
///
/// After Envoy jwt_authn's extractor → verifier split: `extract` only reads and bounds the headers (absent,
/// malformed, presented), `verify` decides. An `Authenticator` combines a route's verifiers (any-of, all-of,
/// monitor) and owns the consumption of limited-use credentials; the proxy never looks inside a credential.
///
/// Adding a verifier: a type conforming to this protocol (with its `PassedCredential`s), its configuration
/// decoding, one line in the composition root that builds it by `type`, and its tests (docs/architecture.md).
public protocol CredentialVerifier: AnyObject, Sendable {
    associatedtype Credential
    /// What the verifier keeps per event loop (a verified-token cache, a key-set reader): loop-confined, no locks.
    associatedtype LoopState: AnyObject = NoLoopState
    /// The configured name (`verifiers.<name>`): verdict headers, logs, metric labels.
    var name: String { get }
    /// The auth-scheme named in `WWW-Authenticate` when this credential is missing or refused.
    var scheme: StaticString { get }
    /// The header (lower-case) whose presence means "this credential was sent".
    var presenceHeader: [UInt8] { get }
    /// Every header (lower-case) that carries part of the credential: stripped before forwarding when asked.
    var credentialHeaders: [[UInt8]] { get }
    /// This verifier's state for one event loop (nil: it keeps none); made once per loop and configuration.
    func makeLoopState() -> LoopState?
    /// Reads the credential from the headers, without judging it beyond its form and size.
    func extract(_ headers: HeaderView) -> Extraction<Credential>
    /// Judges a presented credential; `loop` is this event loop's state from `makeLoopState`.
    func verify(_ credential: Credential, _ request: VerificationRequest, loop: LoopState?) -> VerifierStep
}

extension CredentialVerifier {
    public var credentialHeaders: [[UInt8]] { [presenceHeader] }
}

extension CredentialVerifier where LoopState == NoLoopState {
    public func makeLoopState() -> NoLoopState? { nil }
}

/// The `LoopState` of verifiers that keep none.
public final class NoLoopState {}

/// What `extract` found.
public enum Extraction<Credential> {
    /// Not sent: with any-of, another verifier may decide; alone, the request has no credential (`missing_token`).
    case absent
    /// Sent but unusable (repeated, empty, oversized, undecodable): `malformed_token`.
    case malformed
    case presented(Credential)
}

/// The request as a verifier may need it beyond its headers.
public struct VerificationRequest {
    /// Unix seconds (one reading per request).
    public let now: Int64
    /// The same reading in milliseconds (Play Integrity's `timestampMillis` is judged to the millisecond).
    public let nowMillis: Int64
    /// The method and request-target the client signed (App Attest's request binding).
    public let signedLine: SignedRequestLine
    /// This event loop's state for the verifier (`makeLoopState`), when it keeps one.
    public let loopState: AnyObject?

    /// `nowMillis` defaults to the start of second `now`.
    public init(now: Int64, nowMillis: Int64? = nil, signedLine: SignedRequestLine, loopState: AnyObject?) {
        self.now = now
        self.nowMillis = nowMillis ?? now * 1000
        self.signedLine = signedLine
        self.loopState = loopState
    }
}

/// The method and request-target as the client sent them, without copying them out of the request head.
public enum SignedRequestLine: Sendable {
    /// The request's own line: ranges into its head's bytes (`target` in origin-form, as sent).
    case head(bytes: [UInt8], method: Range<Int>, target: Range<Int>)
    /// A line named elsewhere (forward-auth: the original request another proxy asks about).
    case original(method: [UInt8], target: [UInt8])

    public var method: ArraySlice<UInt8> {
        switch self {
        case .head(let bytes, let method, _): bytes[method]
        case .original(let method, _): method[...]
        }
    }

    public var target: ArraySlice<UInt8> {
        switch self {
        case .head(let bytes, _, let target): bytes[target]
        case .original(_, let target): target[...]
        }
    }
}

/// Where a verification stands after one step.
public enum VerifierStep: Sendable {
    case done(VerifierOutcome)
    /// Work against the state store, off the event loop in arrival order with the other state work; the step it
    /// returns continues on the loop. `failed` decides when the store cannot answer.
    case store(StoreStep)
    /// Work that may block (calls to Apple's or Google's servers), on a worker thread; the step it returns
    /// continues on the loop.
    case blocking(@Sendable (BlockingContext) -> VerifierStep)
    /// The whole request body first (held within the route's and the process's limits), then the continuation
    /// with its SHA-256, on the loop.
    case body(@Sendable (_ bodySHA256: [UInt8]) -> VerifierStep)
}

/// One piece of work against the state store.
public struct StoreStep: Sendable {
    /// Names the work in the state-store metrics (`attest_gateway_state_operation_seconds{operation}`).
    public let operation: String
    public let run: @Sendable (any AttestationStateStore) throws(StateStoreError) -> VerifierStep
    public let failed: @Sendable (StateStoreError) -> VerifierStep
    /// Set when the work is one counter compare-and-set and what follows from its answer: the gateway then batches
    /// it with the others of its drain (`advanceCounters(batch:)`, one commit) instead of running `run`, which does
    /// the same one at a time.
    public let counter: (advance: CounterAdvance, then: @Sendable (Bool) -> VerifierStep)?

    public init(operation: String, run: @escaping @Sendable (any AttestationStateStore) throws(StateStoreError) -> VerifierStep,
                failed: @escaping @Sendable (StateStoreError) -> VerifierStep) {
        self.operation = operation
        self.run = run
        self.failed = failed
        counter = nil
    }

    /// `advance`, then `then` with whether it stored the counter.
    public init(operation: String, advance: CounterAdvance, then: @escaping @Sendable (Bool) -> VerifierStep,
                failed: @escaping @Sendable (StateStoreError) -> VerifierStep) {
        self.operation = operation
        run = { store throws(StateStoreError) in then(try store.advanceCounter(keyID: advance.keyID, to: advance.counter)) }
        self.failed = failed
        counter = (advance, then)
    }
}

/// What a blocking step may use.
public struct BlockingContext: Sendable {
    /// The state store, when one is configured (a blocking step may call it directly: it is already off the loop).
    public let store: (any AttestationStateStore)?
    /// Operator errors (the gateway's own key refused, …), logged with the verifier's name.
    public let log: @Sendable (String) -> Void

    public init(store: (any AttestationStateStore)?, log: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.log = log
    }
}

/// One verifier's result.
public enum VerifierOutcome: Sendable {
    case passed(PassedCredential)
    /// Passed, but a state check could not run and `state.on_unavailable: allow` let it through.
    case passedUnchecked(PassedCredential, VerificationStatus)
    case rejected(VerificationStatus)
    /// Rejected by a policy whose input the upstream is still told in monitor mode (App Attest's risk metric).
    case refused(VerificationStatus, fields: [VerdictField])
}

/// What a passing verifier vouches for: what the upstream is told, and what limited use consumes. Only
/// verifiers make these.
public struct PassedCredential: Sendable {
    /// `X-Attest-App-Id` (nil: the credential names no app).
    public let appID: String?
    /// Further `X-Attest-*` fields for the upstream, in order.
    public let fields: [VerdictField]
    /// What a `limited_use` route consumes once.
    public let consumption: Consumption

    init(appID: String?, fields: [VerdictField] = [], consumption: Consumption) {
        self.appID = appID
        self.fields = fields
        self.consumption = consumption
    }
}

/// An `X-Attest-*` field a verifier adds for the upstream. Values are the verifier's own (digits, key ids in
/// base64): never a client's bytes unchecked.
public struct VerdictField: Sendable, Equatable {
    public let name: StaticString
    public let value: String

    init(_ name: StaticString, _ value: String) {
        self.name = name
        self.value = value
    }

    public static func == (a: VerdictField, b: VerdictField) -> Bool {
        a.name.description == b.name.description && a.value == b.value
    }
}

/// What limited use does with a passed credential.
public enum Consumption: Sendable {
    /// Nothing to consume: the credential cannot be replayed anyway (App Attest's counter refuses a replay).
    case none
    /// Consumed once in the state store.
    case once(ConsumeRequest)
    /// Limited use cannot apply, so the request fails with this reason (an App Check token without `jti`).
    case impossible(VerificationStatus)
}
