import CBOR
public import GatewayCrypto
/// What an assertion's clientData is (PROTOCOL.md "App Attest assertion binding").
public enum AppAttestClientDataBinding: Sendable, Equatable {
    /// `METHOD \n request-target \n X-App-Attest-Timestamp \n hex SHA-256(body)`; the timestamp within the skew.
    case request(maxSkewSeconds: Int64)
    /// A challenge issued by the registration endpoint, accepted once.
    case challenge
}

/// One configured `app_attest` verifier: its policy and the pure checks the gateway runs for registration and for
/// each protected request. The state (challenges, keys, counters) is the caller's: this type never blocks.
public final class AppAttestVerifier: Sendable {
    public let name: String
    public let teamID: String
    /// `TEAMID.bundle.id` for each configured bundle id.
    public let appIDs: [String]
    private let appIDHashes: [[UInt8]]
    public let environment: AppAttestEnvironmentPolicy
    public let root: X509Certificate
    public let binding: AppAttestClientDataBinding
    public let challengeTTLSeconds: Int64
    /// `POST {registrationPath}/challenge` and `/attest`.
    public let registrationPath: String
    public let allowedValidationCategories: [Int]?
    public let minBundleVersion: String?
    /// With `fraud_metric`: registration also verifies the attestation's receipt against `receipt_root_ca`.
    public let receiptVerifier: AppAttestReceiptVerifier?

    /// Where this verifier's challenges live in the state store (one namespace per verifier).
    public var challengeNamespace: String { "appattest-challenge:" + name }

    /// The request headers (PROTOCOL.md), lower-case.
    public static let keyIDHeader = "x-app-attest-key-id"
    public static let assertionHeader = "x-app-attest-assertion"
    public static let timestampHeader = "x-app-attest-timestamp"
    public static let challengeHeader = "x-app-attest-challenge"
    public static let tokenHeaders = [keyIDHeader, assertionHeader, timestampHeader, challengeHeader]
    /// Assertions are ~100–200 bytes of CBOR; anything over this is refused before decoding.
    public static let maxAssertionBytes = 4 * 1024
    /// Challenges this gateway issues are 43 characters; a client-chosen longer one is refused early.
    public static let maxChallengeBytes = 256

    public init(name: String, teamID: String, bundleIDs: [String], environment: AppAttestEnvironmentPolicy,
                root: X509Certificate, binding: AppAttestClientDataBinding, challengeTTLSeconds: Int64,
                registrationPath: String, allowedValidationCategories: [Int]? = nil, minBundleVersion: String? = nil,
                receiptVerifier: AppAttestReceiptVerifier? = nil) {
        self.receiptVerifier = receiptVerifier
        self.name = name
        self.teamID = teamID
        appIDs = bundleIDs.map { teamID + "." + $0 }
        appIDHashes = appIDs.map { SHA256Hasher.hash(Array($0.utf8)) }
        self.environment = environment
        self.root = root
        self.binding = binding
        self.challengeTTLSeconds = challengeTTLSeconds
        self.registrationPath = registrationPath
        self.allowedValidationCategories = allowedValidationCategories
        self.minBundleVersion = minBundleVersion
    }

    // MARK: registration

    /// A registration the attestation verified: store it, then redeem the challenge.
    public struct Registration: Sendable {
        public let key: VerifiedAppAttestKey
        public let appID: String
        public let keyID: String
        /// The verified ATTEST receipt (with `fraud_metric`), else nil.
        public let receipt: AppAttestReceipt?
    }

    /// Verifies a registration's attestation (clientDataHash = SHA-256 of the UTF-8 challenge). The app id is the
    /// configured one whose hash the authenticator data names. The challenge itself is the caller's to redeem.
    public func verifyRegistration(keyID: String, challenge: String, attestation: [UInt8], now: Int64)
        -> Result<Registration, AppAttestFailure> {
        let appID: String
        switch AppAttestAttestationObject.parse(attestation) {
        case .failure(let error): return .failure(.malformed(error.description))
        case .success(let object):
            guard let i = appIDHashes.firstIndex(of: object.authenticatorData.rpIdHash) else { return .failure(.appIDMismatch) }
            appID = appIDs[i]
        }
        let result = AppAttestAttestationVerifier().verify(
            attestation: attestation, keyID: keyID, clientDataHash: SHA256Hasher.hash(Array(challenge.utf8)),
            appID: appID, environment: environment, root: root, at: now)
        switch result {
        case .failure(let failure): return .failure(failure)
        case .success(let key):
            guard let receiptVerifier else { return .success(Registration(key: key, appID: appID, keyID: keyID, receipt: nil)) }
            switch receiptVerifier.verify(key.receipt, appID: appID, keyID: key.keyID, environment: key.environment) {
            case .failure(let why): return .failure(.badReceipt(why.description))
            case .success(let receipt): return .success(Registration(key: key, appID: appID, keyID: keyID, receipt: receipt))
            }
        }
    }

    // MARK: assertions

    /// The clientData of `binding: request`.
    public static func requestClientData(method: some Collection<UInt8>, target: some Collection<UInt8>,
                                         timestamp: some Collection<UInt8>, bodySHA256: [UInt8]) -> [UInt8] {
        var data: [UInt8] = []
        data.reserveCapacity(method.count + target.count + timestamp.count + 67)
        data.append(contentsOf: method)
        data.append(0x0A)
        data.append(contentsOf: target)
        data.append(0x0A)
        data.append(contentsOf: timestamp)
        data.append(0x0A)
        data.append(contentsOf: hexString(bodySHA256).utf8)
        return data
    }

    /// `X-App-Attest-Timestamp`: decimal unix seconds within the skew of `now`; nil when it is not.
    public static func timestampIsFresh(_ text: some Collection<UInt8>, now: Int64, maxSkewSeconds: Int64) -> Bool? {
        guard !text.isEmpty, text.count <= 12 else { return nil }
        var value: Int64 = 0
        for c in text {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            value = value * 10 + Int64(c - 0x30)
        }
        return abs(now - value) <= maxSkewSeconds
    }

    /// Checks one assertion against a stored key: the key is this verifier's (app id and environment), the
    /// signature and rpIdHash verify, and the iOS 27 extensions satisfy the policy. The counter is only checked
    /// against `previousCounter` here; the caller advances it atomically in the store.
    public func verifyAssertion(_ assertion: [UInt8], clientData: [UInt8], publicKey: [UInt8], keyAppID: String,
                                keyEnvironment: String, previousCounter: UInt32) -> Result<VerifiedAppAttestAssertion, VerificationStatus> {
        guard let key = ECPublicKey(uncompressedP256: publicKey) else { return .failure(.badAssertion) }
        return verifyAssertion(assertion, clientData: clientData, key: key, keyAppID: keyAppID, keyEnvironment: keyEnvironment,
                               previousCounter: previousCounter)
    }

    /// `verifyAssertion` with the stored key already built (the gateway's key cache keeps it).
    public func verifyAssertion(_ assertion: [UInt8], clientData: [UInt8], key: ECPublicKey, keyAppID: String,
                                keyEnvironment: String, previousCounter: UInt32) -> Result<VerifiedAppAttestAssertion, VerificationStatus> {
        guard let app = appIDs.firstIndex(of: keyAppID), let env = AppAttestEnvironment(rawValue: keyEnvironment),
              environment.accepts(env) else {
            return .failure(.appNotAllowed)
        }
        switch AppAttestAssertionVerifier().verify(assertion: assertion, clientData: clientData, key: key,
                                                   rpIDHash: appIDHashes[app], previousCounter: previousCounter) {
        case .failure(let failure): return .failure(failure.status)
        case .success(let verified):
            guard extensionsAllowed(category: verified.validationCategory, bundleVersion: verified.bundleVersion) else {
                return .failure(.appNotAllowed)
            }
            return .success(verified)
        }
    }

    /// The `extensions` policy. Devices before iOS 27 send no extensions; the policy applies to what is present
    /// (the authenticator data is signed by the device, so a client cannot strip them).
    public func extensionsAllowed(category: [UInt8]?, bundleVersion: String?) -> Bool {
        if let allowed = allowedValidationCategories, let category {
            guard let value = Self.validationCategory(category), allowed.contains(value) else { return false }
        }
        if let minimum = minBundleVersion, let bundleVersion {
            guard Self.compareVersions(bundleVersion, minimum) >= 0 else { return false }
        }
        return true
    }

    /// `apple_validation_category_01` as an integer: the bytes are little-endian (`01 00 00 00` is 1).
    public static func validationCategory(_ bytes: [UInt8]) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 8 else { return nil }
        var value: UInt64 = 0
        for (i, b) in bytes.enumerated() { value |= UInt64(b) << (8 * UInt64(i)) }
        return value <= UInt64(Int.max) ? Int(value) : nil
    }

    /// Compares bundle versions ("1.10.2" > "1.9"): dot-separated components, numerically when both are numbers,
    /// else as text; missing components count as 0.
    public static func compareVersions(_ a: String, _ b: String) -> Int {
        let x = a.split(separator: ".", omittingEmptySubsequences: false)
        let y = b.split(separator: ".", omittingEmptySubsequences: false)
        for i in 0..<max(x.count, y.count) {
            let p = i < x.count ? String(x[i]) : "0"
            let q = i < y.count ? String(y[i]) : "0"
            if let m = Int(p), let n = Int(q) {
                if m != n { return m < n ? -1 : 1 }
            } else if p != q {
                return p < q ? -1 : 1
            }
        }
        return 0
    }
}
