import Attestation
import GatewayCore
import GatewayCrypto
import StateStore

/// The registration endpoints (PROTOCOL.md) of every `app_attest` verifier and of every `play_integrity` verifier
/// with a `registration_path`: `POST {registration_path}/challenge` and `POST {registration_path}/attest`. Matched
/// on the path alone, before the routes.
struct RegistrationEndpoints: Sendable {
    enum Action: Sendable { case challenge, attest }

    /// The verifier behind an endpoint: App Attest stores a key; Play Integrity checks the token against the
    /// challenge (the plugin contract's Android half) and stores nothing else.
    enum Registrar: Sendable {
        case appAttest(AppAttestVerifier)
        case playIntegrity(PlayIntegrityVerifier)

        var name: String {
            switch self {
            case .appAttest(let v): v.name
            case .playIntegrity(let v): v.name
            }
        }

        var challengeNamespace: String {
            switch self {
            case .appAttest(let v): v.challengeNamespace
            case .playIntegrity(let v): v.challengeNamespace
            }
        }

        var challengeTTLSeconds: Int64 {
            switch self {
            case .appAttest(let v): v.challengeTTLSeconds
            case .playIntegrity(let v): v.challengeTTLSeconds
            }
        }
    }

    typealias Endpoint = (action: Action, registrar: Registrar)

    private let entries: [(path: [UInt8], endpoint: Endpoint)]

    /// Request bodies of the registration endpoints are small JSON (an attestation is ~5 KiB in base64).
    static let maxBodyBytes = 64 * 1024

    init(_ registrars: [(path: String, registrar: Registrar)]) {
        entries = registrars.flatMap { r in
            [(Array((r.path + "/challenge").utf8), (Action.challenge, r.registrar)),
             (Array((r.path + "/attest").utf8), (Action.attest, r.registrar))]
        }
    }

    /// The endpoints of a verifier graph, in name order.
    init(_ verifiers: VerifierGraph) {
        var registrars: [(path: String, registrar: Registrar)] = verifiers.appAttest.values.map { ($0.registrationPath, .appAttest($0)) }
        for case let v as PlayIntegrityVerifier in verifiers.shared.values {
            if let path = v.registrationPath { registrars.append((path, .playIntegrity(v))) }
        }
        self.init(registrars.sorted { $0.registrar.name < $1.registrar.name })
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The endpoint at `path` (without the query), if any.
    func match(path: UnsafeRawBufferPointer) -> Endpoint? {
        for e in entries where Bytes.equal(path, e.path) { return e.endpoint }
        return nil
    }
}
