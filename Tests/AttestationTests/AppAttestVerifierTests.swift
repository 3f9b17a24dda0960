import Testing
import Attestation
import GatewayCrypto

/// One configured App Attest verifier: the request binding, timestamps, the app / environment / extensions policy,
/// and registration's choice of app id — on the real device vectors where they apply.
@Suite struct AppAttestVerifierTests {
    func verifier(bundleIDs: [String], team: String, environment: AppAttestEnvironmentPolicy = .any,
                  categories: [Int]? = nil, minBundleVersion: String? = nil) -> AppAttestVerifier {
        AppAttestVerifier(name: "aa", teamID: team, bundleIDs: bundleIDs, environment: environment, root: AppAttestVector.root,
                          binding: .request(maxSkewSeconds: 60), challengeTTLSeconds: 300, registrationPath: "/.attest/ios",
                          allowedValidationCategories: categories, minBundleVersion: minBundleVersion)
    }

    /// The verifier for a vector's app id ("TEAM.bundle.id").
    func verifier(for v: AppAttestVector, environment: AppAttestEnvironmentPolicy = .any) -> AppAttestVerifier {
        let dot = v.appID.firstIndex(of: ".")!
        return verifier(bundleIDs: ["com.unrelated", String(v.appID[v.appID.index(after: dot)...])],
                        team: String(v.appID[..<dot]), environment: environment)
    }

    @Test func requestClientDataIsTheDocumentedString() {
        let data = AppAttestVerifier.requestClientData(method: Array("POST".utf8), target: Array("/api/x?a=1".utf8),
                                                       timestamp: Array("1800000000".utf8), bodySHA256: SHA256Hasher.hash([]))
        #expect(String(decoding: data, as: UTF8.self) ==
                "POST\n/api/x?a=1\n1800000000\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func timestampsMustBeDecimalAndWithinTheSkew() {
        let now: Int64 = 1_800_000_000
        #expect(AppAttestVerifier.timestampIsFresh(Array("1800000060".utf8), now: now, maxSkewSeconds: 60) == true)
        #expect(AppAttestVerifier.timestampIsFresh(Array("1799999940".utf8), now: now, maxSkewSeconds: 60) == true)
        #expect(AppAttestVerifier.timestampIsFresh(Array("1800000061".utf8), now: now, maxSkewSeconds: 60) == false)
        #expect(AppAttestVerifier.timestampIsFresh(Array("0".utf8), now: now, maxSkewSeconds: 60) == false)
        for bad in ["", "-5", "+1800000000", "1.8e9", "18000000000000", " 1800000000"] {
            #expect(AppAttestVerifier.timestampIsFresh(Array(bad.utf8), now: now, maxSkewSeconds: 60) == nil, "\(bad)")
        }
    }

    @Test func validationCategoryIsLittleEndian() {
        #expect(AppAttestVerifier.validationCategory([1, 0, 0, 0]) == 1)
        #expect(AppAttestVerifier.validationCategory([0, 1]) == 256)
        #expect(AppAttestVerifier.validationCategory([]) == nil)
        #expect(AppAttestVerifier.validationCategory(Array(repeating: 1, count: 9)) == nil)
    }

    @Test func bundleVersionsCompareByComponent() {
        #expect(AppAttestVerifier.compareVersions("1.10", "1.9") == 1)
        #expect(AppAttestVerifier.compareVersions("42", "42.0") == 0)
        #expect(AppAttestVerifier.compareVersions("41.9.9", "42") == -1)
        #expect(AppAttestVerifier.compareVersions("2.0b", "2.0a") == 1)
    }

    @Test func extensionsPolicyAppliesToWhatIsPresent() {
        let v = verifier(bundleIDs: ["b"], team: "T", categories: [1], minBundleVersion: "42")
        #expect(v.extensionsAllowed(category: nil, bundleVersion: nil))           // before iOS 27
        #expect(v.extensionsAllowed(category: [1, 0, 0, 0], bundleVersion: "42"))
        #expect(!v.extensionsAllowed(category: [2, 0, 0, 0], bundleVersion: "42"))
        #expect(!v.extensionsAllowed(category: [1, 0, 0, 0], bundleVersion: "41.9"))
        #expect(v.extensionsAllowed(category: nil, bundleVersion: "100"))
    }

    @Test(arguments: AppAttestVector.withAssertions)
    func realAssertionsPassThePolicyAndWrongAppsDoNot(_ vector: AppAttestVector) throws {
        let v = verifier(for: vector)
        for a in vector.assertions {
            let ok = v.verifyAssertion(a.assertion, clientData: a.clientData, publicKey: a.publicKey, keyAppID: vector.appID,
                                       keyEnvironment: vector.environment ?? "production", previousCounter: a.previousCounter)
            #expect((try? ok.get())?.counter == a.expectedCounter)
            // A key registered for an app this verifier does not serve.
            let other = v.verifyAssertion(a.assertion, clientData: a.clientData, publicKey: a.publicKey,
                                          keyAppID: "OTHER.app", keyEnvironment: "production", previousCounter: 0)
            #expect(other.failureStatus == .appNotAllowed)
            // Another body: the signature no longer matches.
            let tampered = v.verifyAssertion(a.assertion, clientData: a.clientData + [0x20], publicKey: a.publicKey,
                                             keyAppID: vector.appID, keyEnvironment: vector.environment ?? "production",
                                             previousCounter: 0)
            #expect(tampered.failureStatus == .badAssertion)
        }
    }

    @Test(arguments: AppAttestVector.withAssertions.filter { $0.environment != nil })
    func aKeyFromTheOtherEnvironmentIsNotAllowed(_ vector: AppAttestVector) throws {
        let wrong: AppAttestEnvironmentPolicy = vector.environment == "production" ? .development : .production
        let v = verifier(for: vector, environment: wrong)
        let a = try #require(vector.assertions.first)
        let r = v.verifyAssertion(a.assertion, clientData: a.clientData, publicKey: a.publicKey, keyAppID: vector.appID,
                                  keyEnvironment: vector.environment!, previousCounter: 0)
        #expect(r.failureStatus == .appNotAllowed)
    }

    /// The gateway logs every registration failure by its description (it once recursed into itself).
    @Test func failureDescriptionsNameTheCode() {
        #expect(AppAttestFailure.keyIDMismatch.description == "app attest: key_id_mismatch")
        #expect(AppAttestFailure.malformed("short").description == "app attest: malformed (short)")
        #expect(AppAttestFailure.counterNotIncreasing.description == "app attest: counter_not_increasing")
    }

    @Test func standardBase64IsStrict() {
        #expect(StandardBase64.decode("AQID") == [1, 2, 3])
        #expect(StandardBase64.decode("AQ==") == [1])
        #expect(StandardBase64.decode("+/8=") == [0xFB, 0xFF])
        for bad in ["AQ", "AQ=", "AQ===", "A=Q=", "-_8=", "AQ==\n", " AQID", "AR=="] {
            #expect(StandardBase64.decode(bad) == nil, "\(bad)")
        }
        #expect(StandardBase64.encode([0xFB, 0xFF]) == "+/8=")
        let bytes = SecureRandom.bytes(32)
        #expect(StandardBase64.decode(StandardBase64.encode(bytes)) == bytes)
    }
}

extension Result where Failure == VerificationStatus {
    var failureStatus: VerificationStatus? {
        if case .failure(let s) = self { return s }
        return nil
    }
}
