import Testing
import Attestation
import GatewayCrypto
import JOSE

/// Every App Check rejection the verifier can produce, and the pass. (missing_token is decided at the route, by
/// the absence of the header: GatewayProxyTests and the end-to-end suite cover it.)
@Suite struct AppCheckVerifierTests {
    let f = AppCheckFixture()

    func rejected(_ outcome: AppCheckOutcome) -> VerificationStatus? {
        if case .rejected(let s) = outcome { return s }
        return nil
    }

    @Test func validTokenIsVerified() {
        guard case .verified(let token) = f.verify(f.token()) else { Issue.record("not verified"); return }
        #expect(token.appID == AppCheckFixture.appID)
        #expect(token.expiresAt == f.now + 3600)
        #expect(token.tokenID == "abc")
    }

    @Test func audienceByProjectIDAloneIsAccepted() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["aud": ["projects/demo"]])))) == nil)
    }

    @Test func garbageIsMalformed() {
        #expect(rejected(f.verify("not a token")) == .malformedToken)
        #expect(rejected(f.verify("a.b")) == .malformedToken)
        #expect(rejected(f.verify(f.token() + "=")) == .malformedToken)
        #expect(rejected(f.verify(String(repeating: "a", count: 9000))) == .malformedToken)
        #expect(rejected(f.verify("")) == .malformedToken)
    }

    @Test func algNoneIsRejected() {
        let header = Base64URL.encode(Array("{\"alg\":\"none\",\"typ\":\"JWT\",\"kid\":\"k1\"}".utf8))
        let payload = Base64URL.encode(Array(JSONEncoding.encode(f.claims()).utf8))
        #expect(rejected(f.verify(header + "." + payload + ".AA")) == .unsupportedAlgorithm)
    }

    @Test func hs256WithThePublicKeyAsSecretIsRejected() {
        // Alg confusion: the attacker signs with HMAC using public material; RS256 pinning refuses before any key use.
        let header: JSONValue = ["alg": "HS256", "typ": "JWT", "kid": "k1"]
        let token = f.token(header: header)   // signature is RSA, but alg says HS256
        #expect(rejected(f.verify(token)) == .unsupportedAlgorithm)
    }

    @Test func missingKidIsMalformed() {
        #expect(rejected(f.verify(f.token(header: ["alg": "RS256", "typ": "JWT"]))) == .malformedToken)
    }

    @Test func unknownKidIsUnknownKey() {
        #expect(rejected(f.verify(f.token(header: JWSSigner.defaultHeader(kid: "other")))) == .unknownKey)
    }

    @Test func signatureByAnotherKeyIsBadSignature() {
        #expect(rejected(f.verify(f.token(key: AppCheckFixture.otherKey))) == .badSignature)
    }

    @Test func tamperedClaimsAreBadSignature() {
        let parts = f.token().split(separator: ".").map(String.init)
        let forged = Base64URL.encode(Array(JSONEncoding.encode(f.claims(["sub": "1:123456789012:ios:evil"])).utf8))
        #expect(rejected(f.verify(parts[0] + "." + forged + "." + parts[2])) == .badSignature)
    }

    @Test func wrongIssuerIsRejected() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["iss": "https://firebaseappcheck.googleapis.com/999"])))) == .wrongIssuer)
        #expect(rejected(f.verify(f.token(claims: f.claims(["iss": nil])))) == .wrongIssuer)
    }

    @Test func wrongAudienceIsForbidden() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["aud": ["projects/999"]])))) == .wrongAudience)
        // Firebase's aud is an array; a bare string is not accepted.
        #expect(rejected(f.verify(f.token(claims: f.claims(["aud": "projects/123456789012"])))) == .wrongAudience)
        #expect(VerificationStatus.wrongAudience.httpStatus == 403)
    }

    @Test func expiredTokenIsRejectedBeyondTheSkew() {
        let t = f.token(claims: f.claims(["exp": .number(JSONNumber(f.now - 61))]))
        #expect(rejected(f.verify(t)) == .expired)
        let withinSkew = f.token(claims: f.claims(["exp": .number(JSONNumber(f.now - 30))]))
        #expect(rejected(f.verify(withinSkew)) == nil)
    }

    @Test func futureIatOrNbfIsNotYetValid() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["iat": .number(JSONNumber(f.now + 120))])))) == .notYetValid)
        #expect(rejected(f.verify(f.token(claims: f.claims(["nbf": .number(JSONNumber(f.now + 120))])))) == .notYetValid)
    }

    @Test func missingTimesAreMalformed() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["exp": nil])))) == .malformedToken)
        #expect(rejected(f.verify(f.token(claims: f.claims(["exp": "soon"])))) == .malformedToken)
    }

    @Test func appOutsideTheAllowListIsForbidden() {
        let strict = AppCheckFixture(appIDs: ["1:123456789012:ios:other"])
        #expect(rejected(strict.verify(strict.token())) == .appNotAllowed)
        #expect(VerificationStatus.appNotAllowed.httpStatus == 403)
        let allowed = AppCheckFixture(appIDs: [AppCheckFixture.appID])
        #expect(rejected(allowed.verify(allowed.token())) == nil)
    }

    @Test func subjectMustBeAVisibleASCIIString() {
        #expect(rejected(f.verify(f.token(claims: f.claims(["sub": "a\r\nX-Attest-Verdict: verified"])))) == .malformedToken)
        #expect(rejected(f.verify(f.token(claims: f.claims(["sub": ""])))) == .malformedToken)
    }

    @Test func typeMustBeJWT() {
        #expect(rejected(f.verify(f.token(header: ["alg": "RS256", "kid": "k1"]))) == .malformedToken)
        #expect(rejected(f.verify(f.token(header: ["alg": "RS256", "kid": "k1", "typ": "JOSE"]))) == .malformedToken)
    }

    @Test func noKeySetIsUnavailable() {
        let cold = AppCheckFixture(load: false)
        #expect(rejected(cold.verify(cold.token())) == .jwksUnavailable)
        #expect(VerificationStatus.jwksUnavailable.httpStatus == 503)
    }

    @Test func duplicateClaimKeysAreMalformed() {
        let header = Base64URL.encode(Array("{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}".utf8))
        let payload = Base64URL.encode(Array("{\"sub\":\"a\",\"sub\":\"b\"}".utf8))
        #expect(rejected(f.verify(header + "." + payload + ".AAAA")) == .malformedToken)
    }

    @Test func statusesMapToTheDocumentedHTTPStatuses() {
        for s in VerificationStatus.allCases {
            switch s {
            case .appNotAllowed, .wrongAudience, .unknownSubject, .riskTooHigh, .appNotRecognized, .deviceIntegrityTooLow, .notLicensed,
                 .wrongPackage, .environmentRisk, .deviceActivityTooHigh: #expect(s.httpStatus == 403)
            case .jwksUnavailable, .stateUnavailable, .deviceCheckUnavailable, .playIntegrityUnavailable: #expect(s.httpStatus == 503)
            default: #expect(s.httpStatus == 401)
            }
        }
    }
}
