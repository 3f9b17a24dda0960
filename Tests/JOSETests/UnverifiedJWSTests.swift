import Testing
import JOSE

private func reason(_ token: String) -> JWSParseError.Reason? {
    switch UnverifiedJWS.parse(token) {
    case .success: return nil
    case .failure(let error): return error.reason
    }
}

@Suite struct UnverifiedJWSTests {
    let header = TestTokens.b64(#"{"alg":"RS256","typ":"JWT","kid":"k1"}"#)
    let payload = TestTokens.b64(#"{"sub":"app"}"#)
    let sig = Base64URL.encode([1, 2, 3])

    @Test func wellFormedTokenSplitsAndDecodes() throws {
        let token = TestTokens.good()
        let jws = try UnverifiedJWS.parse(token).get()
        #expect(jws.algorithm == "RS256" && jws.keyID == "k1" && jws.type == "JWT")
        #expect(jws.claims["sub"] == "1:123456789:ios:abcdef")
        #expect(jws.claims["exp"]?.int64Value == 1_700_003_600)
        let parts = token.split(separator: ".")
        #expect(jws.signingInput == Array((parts[0] + "." + parts[1]).utf8))
        #expect(jws.signature.count == 256)
    }

    @Test func twoPartsAreRejected() { #expect(reason("\(header).\(payload)") == .wrongPartCount) }

    @Test func fourPartsAreRejected() { #expect(reason("\(header).\(payload).\(sig).\(sig)") == .wrongPartCount) }

    @Test func onePartAndEmptyInputAreRejected() {
        #expect(reason(header) == .wrongPartCount)
        #expect(reason("") == .wrongPartCount)
    }

    @Test func emptySignaturePartIsRejected() { #expect(reason("\(header).\(payload).") == .emptyPart) }

    @Test func emptyHeaderOrPayloadIsRejected() {
        #expect(reason(".\(payload).\(sig)") == .emptyPart)
        #expect(reason("\(header)..\(sig)") == .emptyPart)
        #expect(reason("..") == .emptyPart)
    }

    @Test func badBase64InEachPartIsRejected() {
        #expect(reason("\(header)=.\(payload).\(sig)") == .badBase64)
        #expect(reason("\(header).\(payload)+.\(sig)") == .badBase64)
        #expect(reason("\(header).\(payload).\(sig)=") == .badBase64)
        #expect(reason("\(header).\(payload).A") == .badBase64)
        #expect(reason("\(header). \(payload).\(sig)") == .badBase64)
    }

    @Test func headerThatIsNotAnObjectIsRejected() {
        #expect(reason("\(TestTokens.b64(#"["RS256"]"#)).\(payload).\(sig)") == .notAnObject)
        #expect(reason("\(TestTokens.b64(#""RS256""#)).\(payload).\(sig)") == .notAnObject)
    }

    @Test func payloadThatIsNotAnObjectIsRejected() {
        #expect(reason("\(header).\(TestTokens.b64("42")).\(sig)") == .notAnObject)
    }

    @Test func invalidJSONInHeaderOrPayloadIsRejected() {
        #expect(reason("\(TestTokens.b64(#"{"alg":"RS256","alg":"none"}"#)).\(payload).\(sig)") == .badJSON)
        #expect(reason("\(header).\(TestTokens.b64(#"{"sub":"a",}"#)).\(sig)") == .badJSON)
        #expect(reason("\(TestTokens.b64("{\"alg\":\"RS256\"} ")).\(payload).\(sig)") == nil)
    }

    @Test func nonStringHeaderFieldsReadAsAbsent() throws {
        let jws = try UnverifiedJWS.parse("\(TestTokens.b64(#"{"alg":1,"kid":null,"typ":["JWT"]}"#)).\(payload).\(sig)").get()
        #expect(jws.algorithm == nil && jws.keyID == nil && jws.type == nil)
    }
}
