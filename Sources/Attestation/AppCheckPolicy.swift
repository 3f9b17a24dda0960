/// What an App Check token must satisfy for one verifier, built once from its configuration.
public struct AppCheckPolicy: Sendable {
    public let projectNumber: String
    public let projectID: String?
    /// nil: any app of the project.
    public let appIDs: Set<String>?
    public let clockSkewSeconds: Int64
    /// The exact `iss` Firebase issues for this project.
    public let issuer: String
    public let audienceByNumber: String
    public let audienceByID: String?

    public init(projectNumber: String, projectID: String?, appIDs: [String]?, clockSkewSeconds: Int64) {
        self.projectNumber = projectNumber
        self.projectID = projectID
        self.appIDs = appIDs.map(Set.init)
        self.clockSkewSeconds = clockSkewSeconds
        issuer = "https://firebaseappcheck.googleapis.com/" + projectNumber
        audienceByNumber = "projects/" + projectNumber
        audienceByID = projectID.map { "projects/" + $0 }
    }
}

/// An App Check token that passed every check. Only `AppCheckVerifier` creates one.
public struct VerifiedAppCheckToken: Sendable, Equatable {
    /// The Firebase app id (`sub`).
    public let appID: String
    public let expiresAt: Int64
    /// The `jti`, when the token carries one (limited-use tokens do).
    public let tokenID: String?
}

/// The outcome of checking one token.
public enum AppCheckOutcome: Sendable, Equatable {
    case verified(VerifiedAppCheckToken)
    case rejected(VerificationStatus)
}
