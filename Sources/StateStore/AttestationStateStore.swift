/// Why a state operation failed. `unavailable`/`timeout` are the backend's fault (the request may be retried or,
/// per `state.on_unavailable`, let through); `invalid` is the caller's.
public struct StateStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable { case unavailable, timeout, invalid }
    public let kind: Kind
    public let description: String
    /// Why, as a short label for logs, `/readyz` and the error metric (`wrongpass`, `noauth`, `refused`, `timeout`,
    /// `readonly` …), when the backend can tell; nil: `kind` says all there is.
    public let cause: String?
    public init(_ kind: Kind, _ description: String, cause: String? = nil) {
        self.kind = kind
        self.description = description
        self.cause = cause
    }

    /// The metric label: the cause when known, else the kind.
    public var label: String { cause ?? kind.rawValue }

    /// Whether `state.on_unavailable: allow` may let a request through on this failure: the backend unreachable,
    /// slow or misbehaving — not a store the gateway refuses to read (cause `layout`: keys of another layout under
    /// the prefix), which would turn replay protection off for as long as the configuration stays wrong.
    public var failsOpen: Bool { kind != .invalid && cause != "layout" }
}

/// An App Attest key as registered: stored forever (or until revoked), its counter only ever increases.
public struct AttestedKeyRecord: Sendable, Equatable {
    /// The key id as the device API returns it (standard base64 of SHA-256 of the public key).
    public var keyID: String
    /// "TEAMID.bundle.id".
    public var appID: String
    /// The uncompressed P-256 public key (X9.63, 65 bytes).
    public var publicKey: [UInt8]
    /// The last accepted sign counter.
    public var counter: UInt32
    /// "production" or "development".
    public var environment: String
    /// Unix seconds.
    public var createdAt: Int64
    /// Authenticator-data extension `apple_validation_category_01` seen at attestation (iOS 27+), as sent; nil
    /// when the attestation carried none (older devices). An empty value is kept apart from nil.
    public var validationCategory: [UInt8]?
    /// Authenticator-data extension `apple_bundle_version_01` seen at attestation (iOS 27+); nil when absent.
    public var bundleVersion: String?
    /// The DER of the leaf certificate's key access-control extension (OID 1.2.840.113635.100.8.6, macOS 27 keys),
    /// opaque; nil when the leaf did not carry it.
    public var keyAccessControl: [UInt8]?

    /// The attestation extensions come last and default to nil, so records built before they existed still compile.
    public init(keyID: String, appID: String, publicKey: [UInt8], counter: UInt32, environment: String, createdAt: Int64,
                validationCategory: [UInt8]? = nil, bundleVersion: String? = nil, keyAccessControl: [UInt8]? = nil) {
        self.keyID = keyID
        self.appID = appID
        self.publicKey = publicKey
        self.counter = counter
        self.environment = environment
        self.createdAt = createdAt
        self.validationCategory = validationCategory
        self.bundleVersion = bundleVersion
        self.keyAccessControl = keyAccessControl
    }
}

/// The latest App Attest receipt of a key, with what the gateway learnt from it.
public struct ReceiptRecord: Sendable, Equatable {
    public var receipt: [UInt8]
    /// The fraud metric (receipt field 17), when Apple has given one.
    public var riskMetric: Int?
    /// Receipt creation time (field 12), unix seconds.
    public var createdAt: Int64
    /// Not before (field 19), unix seconds: no refresh before it.
    public var notBefore: Int64?
    /// When the gateway last used the key (refresh only keys used in the last 30 days), unix seconds.
    public var lastUsedAt: Int64

    public init(receipt: [UInt8], riskMetric: Int?, createdAt: Int64, notBefore: Int64?, lastUsedAt: Int64) {
        self.receipt = receipt
        self.riskMetric = riskMetric
        self.createdAt = createdAt
        self.notBefore = notBefore
        self.lastUsedAt = lastUsedAt
    }
}

/// Everything the verifiers keep between requests (ARCHITECTURE.md "State"): consumed one-time values (App Check
/// `jti`s), issued one-time values (App Attest challenges the gateway handed out), registered App Attest keys with
/// their counters, and receipts.
///
/// Every method may block (disk, network): callers never call them on an event loop thread. Every backend makes
/// `consumeOnce`, `redeem` and `advanceCounter` atomic — also across processes sharing the backend (one SQLite
/// file, one Redis) — so a value is consumed or redeemed once and a counter never moves backwards, whatever runs
/// concurrently.
///
/// Consumed and issued values are separate spaces: the same namespace and key in both never interfere.
public protocol AttestationStateStore: Sendable {
    /// Records `key` in `namespace` until `expiresAt` (unix seconds). True when this call consumed it; false when
    /// it was already consumed and has not expired. `now` is the caller's clock (unix seconds).
    func consumeOnce(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool
    /// Consumes several values, results in order (see the extension's default). A requirement, not only an extension
    /// method: the gateway holds its store as `any AttestationStateStore`, and a backend's batch (SQLite: one
    /// transaction; Redis: one script) must be what that call reaches.
    func consumeOnce(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>]

    /// Records a value the gateway handed out (an App Attest challenge) in `namespace` until `expiresAt` (unix
    /// seconds). False when the same value is already issued and unexpired (the caller draws a new one).
    func issue(namespace: String, key: String, expiresAt: Int64, now: Int64) throws(StateStoreError) -> Bool
    /// Takes back an issued value: true exactly once per issue, and only while it is unexpired (`now` < expiresAt);
    /// false for a value never issued, already redeemed, or expired. Atomic across processes sharing the backend.
    func redeem(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool
    /// Whether `key` is issued in `namespace` and unexpired, without redeeming it (a read: a registration checks it
    /// before it spends a call to Google on the token).
    func isIssued(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool

    /// Whether `key` is recorded in `namespace` (by `consumeOnce`) and unexpired. A read: records nothing.
    func isConsumed(namespace: String, key: String, now: Int64) throws(StateStoreError) -> Bool

    /// Registers a key. A key id that already exists is left as it was (returns false).
    func registerKey(_ record: AttestedKeyRecord) throws(StateStoreError) -> Bool
    func key(id: String) throws(StateStoreError) -> AttestedKeyRecord?
    /// Keys registered for an app, in registration order.
    func keys(appID: String) throws(StateStoreError) -> [AttestedKeyRecord]

    /// Compare-and-set: stores `newValue` only if it is greater than the stored counter. True when it did; false
    /// when the stored value was already ≥ `newValue` or the key is unknown.
    func advanceCounter(keyID: String, to newValue: UInt32) throws(StateStoreError) -> Bool
    /// Several compare-and-sets, results in order, each with `advanceCounter`'s meaning, applied in order (two for
    /// one key in a batch: the second compares with what the first stored; on a Redis Cluster a call redirected
    /// mid-batch runs after the others, so it can be refused where one at a time would have taken it — never the
    /// other way). A requirement for the same reason as `consumeOnce(batch:)`: SQLite makes the batch one
    /// transaction, Redis one script or one pipeline per master. A batch that fails fails the counters it would
    /// have raised; one it had answered false stays false (a refusal needs no commit).
    func advanceCounters(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>]

    func putReceipt(keyID: String, _ receipt: ReceiptRecord) throws(StateStoreError)
    func receipt(keyID: String) throws(StateStoreError) -> ReceiptRecord?

    /// Deletes expired one-time values, consumed and issued; returns how many. (Redis expires them itself and
    /// returns 0.)
    func sweepExpired(now: Int64) throws(StateStoreError) -> Int

    /// A cheap round trip proving the backend answers (readiness).
    func ping() throws(StateStoreError)

    /// Whether `takeToken` shares rate-limit budgets between processes (Redis). False (the default): the backend
    /// keeps no rate limits, and the gateway keeps its in-process token buckets (one SQLite file serves one
    /// process; the memory store is per process anyway).
    var sharesRateLimits: Bool { get }

    /// Takes one token from the bucket of `key` under the limit named `limit`, shared by every process on this
    /// backend: refilled at `ratePerSecond` up to `burst`, on the backend's clock (replicas' clocks do not matter).
    /// Nil when a token was taken; else the seconds until one is back (for `Retry-After`, at least 1). `key` is
    /// stored as given: callers pass a digest of anything they do not want to appear in the backend. Throws
    /// `.invalid` on a backend that does not share rate limits (`sharesRateLimits` false).
    func takeToken(limit: String, key: String, ratePerSecond: Double, burst: Int) throws(StateStoreError) -> Int?
}

extension AttestationStateStore {
    public var sharesRateLimits: Bool { false }

    public func takeToken(limit: String, key: String, ratePerSecond: Double, burst: Int) throws(StateStoreError) -> Int? {
        throw StateStoreError(.invalid, "this state backend does not share rate limits")
    }
}

/// One value to consume in a batch (see `consumeOnce(batch:)`).
public struct ConsumeRequest: Sendable, Equatable {
    public var namespace: String
    public var key: String
    public var expiresAt: Int64
    public init(namespace: String, key: String, expiresAt: Int64) {
        self.namespace = namespace
        self.key = key
        self.expiresAt = expiresAt
    }
}

extension AttestationStateStore {
    /// Consumes several values, results in order. Backends with transactions override this to make the batch one
    /// commit (group commit: under load, one fsync-bound commit serves every request waiting for it). Each
    /// result has `consumeOnce`'s meaning; a value repeated within the batch is consumed once, by its first occurrence
    /// (on a Redis Cluster, by a later one when the first was redirected and sent again after the others).
    public func consumeOnce(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>] {
        consumeEach(batch: batch, now: now)
    }

    /// The batch one `consumeOnce` at a time (the default, and a backend's fallback).
    public func consumeEach(batch: [ConsumeRequest], now: Int64) -> [Result<Bool, StateStoreError>] {
        batch.map { r in
            do { return .success(try consumeOnce(namespace: r.namespace, key: r.key, expiresAt: r.expiresAt, now: now)) } catch {
                return .failure(error as? StateStoreError ?? StateStoreError(.unavailable, "\(error)"))
            }
        }
    }
}

/// One compare-and-set in a batch (see `advanceCounters(batch:)`).
public struct CounterAdvance: Sendable, Equatable {
    public var keyID: String
    public var counter: UInt32
    public init(keyID: String, counter: UInt32) {
        self.keyID = keyID
        self.counter = counter
    }
}

extension AttestationStateStore {
    /// The batch one `advanceCounter` at a time (the default, and a backend's fallback).
    public func advanceCounters(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>] {
        advanceEach(batch: batch)
    }

    public func advanceEach(batch: [CounterAdvance]) -> [Result<Bool, StateStoreError>] {
        batch.map { a in
            do throws(StateStoreError) { return .success(try advanceCounter(keyID: a.keyID, to: a.counter)) } catch {
                return .failure(error)
            }
        }
    }
}
