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
