import CBOR

/// The App Attest environment a key was created in, read from the attestation's aaguid.
public enum AppAttestEnvironment: String, Sendable, Equatable {
    /// aaguid `appattest` followed by seven zero bytes: keys from App Store / TestFlight builds.
    case production
    /// aaguid `appattestdevelop`: keys from development builds.
    case development

    /// The 16-byte aaguid Apple writes for this environment.
    public var aaguid: [UInt8] {
        switch self {
        case .production: AttestedCredentialData.productionAAGUID
        case .development: AttestedCredentialData.developmentAAGUID
        }
    }

    /// The environment whose aaguid is exactly `aaguid`; nil for anything else.
    public init?(aaguid: [UInt8]) {
        if aaguid == AttestedCredentialData.productionAAGUID { self = .production }
        else if aaguid == AttestedCredentialData.developmentAAGUID { self = .development }
        else { return nil }
    }
}

/// Which environments a verifier accepts. Production deployments should say `.production`: a development key
/// comes from a build the developer signed themselves, so it proves much less about the client.
public enum AppAttestEnvironmentPolicy: Sendable, Equatable {
    case production
    case development
    /// Either environment (for staging setups that see both).
    case any

    func accepts(_ environment: AppAttestEnvironment) -> Bool {
        switch self {
        case .production: environment == .production
        case .development: environment == .development
        case .any: true
        }
    }
}
