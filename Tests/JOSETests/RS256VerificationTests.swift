import Testing
import GatewayCrypto
import JOSE

/// Signs `header` + `claims` (raw JSON texts) with the real issuer key, whatever `alg` the header names.
private func signedWithRealKey(header: String, claims: String = #"{"sub":"app"}"#) -> UnverifiedJWS {
    let input = TestTokens.b64(header) + "." + TestTokens.b64(claims)
    let signature = try! issuerKey.signRS256(Array(input.utf8))
    return try! UnverifiedJWS.parse(input + "." + Base64URL.encode(signature)).get()
}

@Suite struct RS256VerificationTests {
    let key = issuerKey.publicKey

    @Test func goodTokenVerifies() throws {
        let jws = try UnverifiedJWS.parse(TestTokens.good()).get()
        #expect(JWSAlgorithm.isRS256(jws))
        #expect(jws.verifiesRS256(with: key))
    }

    @Test func goodTokenParsedFromRawBytesVerifies() throws {
        let bytes = Array(TestTokens.good().utf8)
        let jws = try bytes.withUnsafeBytes { UnverifiedJWS.parse($0) }.get()
        #expect(jws.verifiesRS256(with: key))
    }

    @Test func tokenFromAnotherKeyFails() throws {
        let other = try RSAPrivateKey.generate()
        let token = try JWSSigner.signRS256(claims: appCheckClaims, kid: "k1", key: other)
        #expect(try !UnverifiedJWS.parse(token).get().verifiesRS256(with: key))
    }

    @Test func algNoneIsRejected() {
        // Even carrying a genuine RSA signature, "none" must not verify; and the classic empty-signature form
        // does not even parse.
        let jws = signedWithRealKey(header: #"{"alg":"none","typ":"JWT"}"#)
        #expect(!JWSAlgorithm.isRS256(jws))
        #expect(!jws.verifiesRS256(with: key))
        let unsigned = TestTokens.b64(#"{"alg":"none"}"#) + "." + TestTokens.b64(#"{"sub":"app"}"#) + "."
        #expect(throws: JWSParseError(.emptyPart)) { try UnverifiedJWS.parse(unsigned).get() }
    }

    @Test func hs256ForgedWithPublicKeyAsHMACSecretIsRejected() throws {
        let header = #"{"alg":"HS256","typ":"JWT","kid":"k1"}"#, claims = #"{"sub":"attacker"}"#
        let input = Array((TestTokens.b64(header) + "." + TestTokens.b64(claims)).utf8)
        // The secrets an attacker would try: the PEM, the raw modulus, the JWK text.
        let secrets = [Array(key.pem().utf8), issuerKey.modulus, Array(issuerKey.jwk(kid: "k1").utf8)]
        for secret in secrets {
            let mac = TestTokens.hmacSHA256(key: secret, message: input)
            let jws = try UnverifiedJWS.parse(TestTokens.assemble(header: header, claims: claims, signature: mac)).get()
            #expect(!JWSAlgorithm.isRS256(jws))
            #expect(!jws.verifiesRS256(with: key))
        }
    }

    @Test(arguments: [
        #"{"alg":"RS512"}"#, #"{"alg":"ES256"}"#, #"{"alg":"PS256"}"#, #"{"alg":"rs256"}"#, #"{"alg":"RS256 "}"#,
        #"{"typ":"JWT"}"#, #"{"alg":null}"#, #"{"alg":["RS256"]}"#, #"{"alg":"R\u0053256x"}"#,
    ])
    func otherOrMissingAlgIsRejectedDespiteValidRSASignature(header: String) {
        let jws = signedWithRealKey(header: header)
        #expect(!JWSAlgorithm.isRS256(jws))
        #expect(!jws.verifiesRS256(with: key))
    }

    @Test func escapedRS256AlgIsStillRS256() {
        // "\u0052S256" is the same JSON string as "RS256": the comparison is on the decoded value.
        #expect(signedWithRealKey(header: #"{"alg":"\u0052S256"}"#).verifiesRS256(with: key))
    }

    @Test func critHeaderIsRejected() {
        let jws = signedWithRealKey(header: #"{"alg":"RS256","b64":false,"crit":["b64"]}"#)
        #expect(JWSAlgorithm.isRS256(jws))
        #expect(!jws.verifiesRS256(with: key))
    }

    @Test func reEncodedSigningInputFails() throws {
        let token = TestTokens.good()
        let parts = token.split(separator: ".").map(String.init)
        // Padding added to the header: not strict base64url, so not even parsed.
        #expect(throws: JWSParseError(.badBase64)) { try UnverifiedJWS.parse(parts[0] + "=." + parts[1] + "." + parts[2]).get() }
        // The same header JSON re-serialised (whitespace): same meaning, different bytes, so the signature fails.
        let header = try UnverifiedJWS.parse(token).get().header
        let spaced = TestTokens.b64(" " + JSONEncoding.encode(.object(header)))
        let respaced = try UnverifiedJWS.parse(spaced + "." + parts[1] + "." + parts[2]).get()
        #expect(respaced.header == header)
        #expect(!respaced.verifiesRS256(with: key))
    }

    @Test func tamperedClaimsFail() throws {
        let parts = TestTokens.good().split(separator: ".").map(String.init)
        let forged = TestTokens.b64(#"{"sub":"attacker","exp":9999999999}"#)
        #expect(try !UnverifiedJWS.parse(parts[0] + "." + forged + "." + parts[2]).get().verifiesRS256(with: key))
    }

    @Test func truncatedSignatureFails() throws {
        let parts = TestTokens.good().split(separator: ".").map(String.init)
        let sig = Base64URL.decode(parts[2])!
        let short = parts[0] + "." + parts[1] + "." + Base64URL.encode(Array(sig.dropLast()))
        #expect(try !UnverifiedJWS.parse(short).get().verifiesRS256(with: key))
    }
}
