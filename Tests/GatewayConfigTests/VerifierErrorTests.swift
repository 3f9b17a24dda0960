import Testing
@testable import GatewayConfig

/// Errors in the `verifiers` section. Each YAML starts at line 10 (after the minimal file), verifier `v` at line 11.
@Suite struct VerifierErrorTests {
    func verifier(_ body: String) -> [String] {
        errorLines(minimalPlus("verifiers:\n  v:\n" + body))
    }

    static let appAttest = "    type: app_attest\n    team_id: ABCDE12345\n    bundle_ids: [com.example.app]\n"
    static let deviceCheck = "    type: device_check\n    team_id: ABCDE12345\n    key_id: K1\n    private_key: k.p8\n"

    @Test func unknownVerifierTypeListsTheChoices() {
        #expect(verifier("    type: safety_net") == [
            "gateway.yml:12:11: verifiers.v.type: invalid type \"safety_net\" (use app_check, app_attest, device_check or play_integrity)",
        ])
    }

    @Test func verifierWithoutTypeIsReportedAtTheVerifier() {
        #expect(verifier("    project_number: 1") == ["gateway.yml:12:5: verifiers.v: missing required key \"type\""])
    }

    @Test func projectNumberMustBeDigits() {
        #expect(verifier("    type: app_check\n    project_number: demo-project") == [
            "gateway.yml:13:21: verifiers.v.project_number: must be a string of digits",
        ])
    }

    @Test func missingProjectNumberIsReported() {
        #expect(verifier("    type: app_check") == ["gateway.yml:12:5: verifiers.v: missing required key \"project_number\""])
    }

    @Test func jwksURLAndFileAreMutuallyExclusive() {
        #expect(verifier("    type: app_check\n    project_number: \"1\"\n    jwks_url: https://k.example/jwks\n    jwks_file: jwks.json") == [
            "gateway.yml:15:16: verifiers.v.jwks_file: jwks_url and jwks_file are mutually exclusive",
        ])
    }

    @Test func plainHTTPJWKSURLIsOnlyForLoopback() {
        #expect(verifier("    type: app_check\n    project_number: 1\n    jwks_url: http://keys.example.com/jwks") == [
            "gateway.yml:14:15: verifiers.v.jwks_url: must use https (plain http only for loopback hosts)",
        ])
        #expect(verifier("    type: app_check\n    project_number: 1\n    jwks_url: http://127.0.0.1:9000/jwks").isEmpty)
        #expect(verifier("    type: app_check\n    project_number: 1\n    jwks_url: 'http://[::1]:9000/jwks'").isEmpty)
    }

    @Test func jwksMaxAgeAboveSixHoursIsRejected() {
        #expect(verifier("    type: app_check\n    project_number: 1\n    jwks_max_age: 7h") == [
            "gateway.yml:14:19: verifiers.v.jwks_max_age: must be at most 6h",
        ])
    }

    @Test func invalidHeaderNameIsRejected() {
        #expect(verifier("    type: app_check\n    project_number: 1\n    header: X Firebase") == [
            "gateway.yml:14:13: verifiers.v.header: invalid header name \"X Firebase\"",
        ])
    }

    @Test func keyOfAnotherVerifierTypeIsUnknown() {
        #expect(verifier("    type: app_check\n    project_number: 1\n    team_id: ABCDE12345") == [
            "gateway.yml:14:5: verifiers.v: unknown key \"team_id\"",
        ])
    }

    @Test func emptyAppIDsListIsRejected() {
        #expect(verifier("    type: app_check\n    project_number: 1\n    app_ids: []") == [
            "gateway.yml:14:14: verifiers.v.app_ids: must not be empty",
        ])
    }

    @Test func teamIDMustBeTenUpperCaseAlphanumerics() {
        #expect(verifier("    type: app_attest\n    team_id: abcde12345\n    bundle_ids: [a]") == [
            "gateway.yml:13:14: verifiers.v.team_id: must be 10 upper-case letters or digits",
        ])
    }

    @Test func emptyBundleIDsAreRejected() {
        #expect(verifier("    type: app_attest\n    team_id: ABCDE12345\n    bundle_ids: []") == [
            "gateway.yml:14:17: verifiers.v.bundle_ids: must not be empty",
        ])
    }

    @Test func registrationPathMustBeAbsolute() {
        #expect(verifier(Self.appAttest + "    registration_path: attest") == [
            "gateway.yml:15:24: verifiers.v.registration_path: must start with \"/\" and name a path (e.g. /.attest/ios)",
        ])
    }

    @Test func twoAppAttestVerifiersOnOneRegistrationPathAreRejected() {
        #expect(verifier(Self.appAttest + "  w:\n" + Self.appAttest) == [
            "gateway.yml:16:5: verifiers.w: registration_path \"/.attest/ios\" is already used by verifier \"v\"",
        ])
    }

    @Test func fraudMetricRequiresKeyID() {
        #expect(verifier(Self.appAttest + "    fraud_metric:\n      private_key: k.p8") == [
            "gateway.yml:16:7: verifiers.v.fraud_metric: missing required key \"key_id\"",
        ])
    }

    @Test func validationCategoriesMustBeIntegers() {
        #expect(verifier(Self.appAttest + "    extensions: {allowed_validation_categories: [1, two]}") == [
            "gateway.yml:15:53: verifiers.v.extensions.allowed_validation_categories[1]: expected a non-negative integer",
        ])
    }

    @Test func deviceCheckRequiresAPrivateKey() {
        #expect(verifier("    type: device_check\n    team_id: ABCDE12345\n    key_id: K1") == [
            "gateway.yml:12:5: verifiers.v: missing required key \"private_key\"",
        ])
    }

    @Test func deviceCheckHasNoAnyEnvironment() {
        #expect(verifier(Self.deviceCheck + "    environment: any") == [
            "gateway.yml:16:18: verifiers.v.environment: invalid environment \"any\" (use production or development)",
        ])
    }

    @Test func subjectBindingRequiresAHeader() {
        #expect(verifier(Self.deviceCheck + "    subject_binding: {}") == [
            "gateway.yml:16:22: verifiers.v.subject_binding: missing required key \"header\"",
        ])
    }
}
