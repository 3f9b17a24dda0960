import Attestation
import GatewayCore
import GatewayCrypto
import StateStore

/// The App Attest registration endpoints of every `app_attest` verifier: `POST {registration_path}/challenge` and
/// `POST {registration_path}/attest` (PROTOCOL.md). Matched on the path alone, before the routes.
struct RegistrationEndpoints: Sendable {
    enum Action: Sendable { case challenge, attest }

    private let entries: [(path: [UInt8], action: Action, verifier: AppAttestVerifier)]

    /// Request bodies of the registration endpoints are small JSON (an attestation is ~5 KiB in base64).
    static let maxBodyBytes = 64 * 1024

    init(_ verifiers: [AppAttestVerifier]) {
        entries = verifiers.flatMap { v in
            [(Array((v.registrationPath + "/challenge").utf8), Action.challenge, v),
             (Array((v.registrationPath + "/attest").utf8), Action.attest, v)]
        }
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The endpoint at `path` (without the query), if any.
    func match(path: UnsafeRawBufferPointer) -> (action: Action, verifier: AppAttestVerifier)? {
        for e in entries where Bytes.equal(path, e.path) { return (e.action, e.verifier) }
        return nil
    }
}

/// App Attest keys already loaded from the state store, shared by every loop, with their public keys already
/// built (building one from its bytes costs more than the signature check). A key's public key, app id and
/// environment never change after registration, so a cached copy is always right; its counter is not cached
/// (every assertion advances it in the store). Bounded: when full, it starts over.
final class AppAttestKeyCache: Sendable {
    struct Entry: Sendable {
        let record: AttestedKeyRecord
        let key: ECPublicKey
    }

    private let keys = AnnotatedMutex<[String: Entry]>([:])
    /// The latest fraud (risk) metric per key, from its stored receipt or the refresher.
    private let riskMetrics = AnnotatedMutex<[String: Int]>([:])

    func riskMetric(_ keyID: String) -> Int? { riskMetrics.withLock { $0[keyID] } }

    func setRiskMetric(_ keyID: String, _ metric: Int?) {
        riskMetrics.withLock { m in
            if m.count >= capacity && m[keyID] == nil { m.removeAll(keepingCapacity: true) }
            m[keyID] = metric
        }
    }
    let capacity: Int

    init(capacity: Int = 100_000) { self.capacity = capacity }

    func get(_ keyID: String) -> Entry? { keys.withLock { $0[keyID] } }

    /// Caches `record` and returns its entry; nil when its public key is not a valid P-256 point.
    @discardableResult
    func put(_ record: AttestedKeyRecord) -> Entry? {
        guard let key = ECPublicKey(uncompressedP256: record.publicKey) else { return nil }
        let entry = Entry(record: record, key: key)
        keys.withLock { keys in
            if keys.count >= capacity { keys.removeAll(keepingCapacity: true) }
            keys[record.keyID] = entry
        }
        return entry
    }
}
