import Testing
import GatewayCrypto
import JOSE

private func parse(_ text: String) throws(JWKSError) -> JWKS { try JWKS.parse(Array(text.utf8)) }

@Suite struct JWKSTests {
    let n = Base64URL.encode(issuerKey.modulus)

    @Test func generatedJWKHasTheExpectedMembers() throws {
        let jwk = try #require(try StrictJSON.parse(Array(issuerKey.jwk(kid: "k1").utf8)).objectValue)
        #expect(jwk.keys == ["kty", "kid", "use", "alg", "n", "e"])
        #expect(jwk["kty"] == "RSA" && jwk["use"] == "sig" && jwk["alg"] == "RS256" && jwk["e"] == "AQAB")
    }

    @Test func keySetVerifiesTokensByKid() throws {
        let set = try parse(#"{"keys":[\#(issuerKey.jwk(kid: "k1"))]}"#)
        #expect(set.keyIDs == ["k1"])
        let jws = try UnverifiedJWS.parse(TestTokens.good(kid: "k1")).get()
        let key = try #require(set.keys[jws.keyID!])
        #expect(jws.verifiesRS256(with: key))
    }

    @Test func mixedKeyTypesAreSkipped() throws {
        let set = try parse("""
        {"keys":[
          {"kty":"EC","kid":"ec","crv":"P-256","x":"AA","y":"AA"},
          {"kty":"oct","kid":"hmac","k":"c2VjcmV0"},
          {"kty":"RSA","kid":"enc","use":"enc","n":"\(n)","e":"AQAB"},
          {"kty":"RSA","kid":"rs512","alg":"RS512","n":"\(n)","e":"AQAB"},
          {"kty":"RSA","n":"\(n)","e":"AQAB"},
          {"kty":"RSA","kid":"b","n":"\(n)","e":"AQAB"},
          {"kty":"RSA","kid":"a","use":"sig","alg":"RS256","n":"\(n)","e":"AQAB","x5c":[]}
        ],"other":1}
        """)
        #expect(set.keyIDs == ["a", "b"])
    }

    @Test func duplicateKidIsAnError() {
        let k = issuerKey.jwk(kid: "same")
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[\#(k),\#(k)]}"#) }
    }

    @Test func duplicateKidOfSkippedKeyIsNotAnError() throws {
        let set = try parse(#"{"keys":[\#(issuerKey.jwk(kid: "k")),{"kty":"EC","kid":"k"}]}"#)
        #expect(set.keyIDs == ["k"])
    }

    @Test(arguments: [#"{}"#, #"{"key":[]}"#, #"{"keys":{}}"#, #"[]"#, "", #"{"keys":[]}"#])
    func missingOrEmptyKeysIsAnError(text: String) {
        #expect(throws: JWKSError.self) { try parse(text) }
    }

    @Test func setWithOnlySkippedKeysIsAnError() {
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[{"kty":"EC","kid":"ec"}]}"#) }
    }

    @Test(arguments: [
        #"{"kty":"RSA","kid":"x","n":"AQAB=","e":"AQAB"}"#,        // padded
        #"{"kty":"RSA","kid":"x","n":"AQ+B","e":"AQAB"}"#,         // standard alphabet
        #"{"kty":"RSA","kid":"x","n":"AQAB","e":"AQAB"}"#,         // far too small
        #"{"kty":"RSA","kid":"x","e":"AQAB"}"#,                    // missing n
        #"{"kty":"RSA","kid":"x","n":1,"e":"AQAB"}"#,              // n not a string
        #"{"kty":"RSA","kid":"x","n":"NNN","e":"AQ"}"#,            // e = 1
        #"{"kid":"x","n":"AQAB","e":"AQAB"}"#,                     // missing kty
        #"{"kty":"RSA","kid":7,"n":"AQAB","e":"AQAB"}"#,           // kid not a string
        #""not an object""#,
    ])
    func badKeyIsAnError(entry: String) {
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[\#(entry)]}"#) }
    }

    @Test func badModulusIsAnError() {
        var bytes = issuerKey.modulus
        bytes[bytes.count - 1] ^= 1   // even: not an RSA modulus
        let entry = #"{"kty":"RSA","kid":"x","n":"\#(Base64URL.encode(bytes))","e":"AQAB"}"#
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[\#(entry)]}"#) }
    }

    @Test func invalidJSONIsAnError() {
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[],"keys":[]}"#) }
        #expect(throws: JWKSError.self) { try parse(#"{"keys":[\#(issuerKey.jwk(kid: "k"))],}"#) }
    }
}
