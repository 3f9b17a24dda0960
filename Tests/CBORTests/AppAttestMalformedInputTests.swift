import CBOR
import Testing

@Suite struct AppAttestMalformedInputTests {
    let attestation = AppAttestVector.withAttestation.first { $0.name == "apple-doc-guide-2026" }!.attestation!
    let assertion = AppAttestVector.withAssertions.first!.assertions[0].assertion

    /// The real attestation's map with `key` replaced (or removed when `value` is nil), re-encoded.
    func attestation(replacing key: String, with value: CBORValue?) throws -> [UInt8] {
        let root = try CBORDecoder().decode(attestation).get().mapValue!
        var entries = root.filter { $0.0 != .text(key) }
        if let value { entries.append((.text(key), value)) }
        return TestCBOR.encode(.map(entries))
    }

    func authData() throws -> [UInt8] {
        try AppAttestAttestationObject.parse(attestation).get().authenticatorData.bytes
    }

    func code<T>(_ result: Result<T, AppAttestParseError>) -> AppAttestParseError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }

    @Test func everyTruncationOfAnAttestationIsRejected() {
        for length in 0..<attestation.count {
            #expect(code(AppAttestAttestationObject.parse(Array(attestation[..<length]))) != nil, "length \(length)")
        }
    }

    @Test func everyTruncationOfAnAssertionIsRejected() {
        for length in 0..<assertion.count {
            #expect(code(AppAttestAssertionObject.parse(Array(assertion[..<length]))) != nil, "length \(length)")
        }
    }

    @Test func everyTruncationOfAuthenticatorDataIsHandled() throws {
        let bytes = try authData()
        for length in 0..<bytes.count {
            // A prefix that ends exactly after the COSE key is valid authenticator data without extensions.
            _ = AuthenticatorData.parse(Array(bytes[..<length]), kind: .attestation)
        }
        #expect(code(AuthenticatorData.parse(Array(bytes[..<36]), kind: .attestation)) == .truncated)
    }

    @Test func seededRandomByteFlipsNeverCrash() {
        var rng = SeededGenerator(state: 0x5eed_a77e57)
        var accepted = 0
        for round in 0..<3000 {
            var input = round.isMultiple(of: 2) ? attestation : assertion
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                input[Int.random(in: 0..<input.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            }
            let ok = round.isMultiple(of: 2)
                ? (try? AppAttestAttestationObject.parse(input).get()) != nil
                : (try? AppAttestAssertionObject.parse(input).get()) != nil
            if ok { accepted += 1 }
        }
        // Flips inside certificates, receipt, signature or key bytes still parse: parsing is not verification.
        #expect(accepted > 0 && accepted < 3000)
    }

    @Test func wrongFormatIsRejected() throws {
        #expect(code(AppAttestAttestationObject.parse(try attestation(replacing: "fmt", with: .text("packed")))) == .wrongFormat)
        #expect(code(AppAttestAttestationObject.parse(try attestation(replacing: "fmt", with: nil))) == .missingField("fmt"))
        #expect(code(AppAttestAttestationObject.parse([0x83, 1, 2, 3])) == .wrongFormat)
        #expect(code(AppAttestAttestationObject.parse([0x1c])) == .notCBOR(.malformed))
        #expect(code(AppAttestAttestationObject.parse(attestation + [0x00])) == .trailingGarbage)
    }

    @Test func x5cMustBeAnArrayOfAtLeastTwoByteStrings() throws {
        let root = try CBORDecoder().decode(attestation).get()
        let receipt = root[textKey: "attStmt"]![textKey: "receipt"]!
        let leaf = root[textKey: "attStmt"]![textKey: "x5c"]!.arrayValue![0]
        func statement(_ x5c: CBORValue) throws -> [UInt8] {
            try attestation(replacing: "attStmt", with: .map([(.text("x5c"), x5c), (.text("receipt"), receipt)]))
        }
        #expect(code(AppAttestAttestationObject.parse(try statement(leaf))) == .wrongType("x5c"))
        #expect(code(AppAttestAttestationObject.parse(try statement(.array([leaf])))) == .wrongType("x5c"))
        #expect(code(AppAttestAttestationObject.parse(try statement(.array([leaf, .text("x")])))) == .wrongType("x5c"))
        #expect((try? AppAttestAttestationObject.parse(try statement(.array([leaf, leaf]))).get()) != nil)
        #expect(code(AppAttestAttestationObject.parse(try attestation(replacing: "attStmt", with: .map([(.text("receipt"), receipt)]))))
            == .missingField("x5c"))
        #expect(code(AppAttestAttestationObject.parse(try attestation(replacing: "authData", with: .text("x")))) == .wrongType("authData"))
    }

    /// Authenticator data with its COSE key replaced by `key`.
    func authData(withCOSEKey key: CBORValue) throws -> [UInt8] {
        let bytes = try authData()
        let idLength = Int(bytes[53]) << 8 | Int(bytes[54])
        return Array(bytes[..<(55 + idLength)]) + TestCBOR.encode(key)
    }

    func coseKey(kty: Int64 = 2, alg: Int64 = -7, crv: Int64 = 1, xLength: Int = 32) -> CBORValue {
        func int(_ v: Int64) -> CBORValue { v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(-1 - v)) }
        return .map([(int(1), int(kty)), (int(3), int(alg)), (int(-1), int(crv)),
                     (int(-2), .bytes([UInt8](repeating: 7, count: xLength))), (int(-3), .bytes([UInt8](repeating: 9, count: 32)))])
    }

    @Test func coseKeyMustBeP256ES256() throws {
        let good = try AuthenticatorData.parse(try authData(withCOSEKey: coseKey()), kind: .attestation).get()
        #expect(good.attestedCredentialData?.publicKey == [4] + [UInt8](repeating: 7, count: 32) + [UInt8](repeating: 9, count: 32))
        for bad in [coseKey(kty: 3), coseKey(alg: -8), coseKey(crv: 2), coseKey(xLength: 31), .array([]), .bytes([1])] {
            #expect(code(AuthenticatorData.parse(try authData(withCOSEKey: bad), kind: .attestation)) == .badCOSEKey)
        }
        let bytes = try authData()
        #expect(code(AuthenticatorData.parse(Array(bytes[..<(55 + 32)]), kind: .attestation)) == .truncated)
    }

    @Test func trailingBytesMustBeOneExtensionsMap() throws {
        let withoutExtensions = try authData(withCOSEKey: coseKey())
        #expect(code(AuthenticatorData.parse(withoutExtensions + [0x01], kind: .attestation)) == .badExtensions)
        #expect(code(AuthenticatorData.parse(withoutExtensions + [0x41, 0x00], kind: .attestation)) == .badExtensions)
        #expect(code(AuthenticatorData.parse(withoutExtensions + [0xa0, 0x00], kind: .attestation)) == .trailingGarbage)
        #expect(code(AuthenticatorData.parse(withoutExtensions + [0xa1, 0x01, 0x02], kind: .attestation)) == .badExtensions)
        #expect(code(AuthenticatorData.parse(withoutExtensions + [0xa1, 0x61, 0x61], kind: .attestation)) == .badExtensions)
        let ext = TestCBOR.encode(.map([(.text("apple_bundle_version_01"), .bytes([1]))]))
        #expect(code(AuthenticatorData.parse(withoutExtensions + ext, kind: .attestation)) == .wrongType("apple_bundle_version_01"))
        #expect(try AuthenticatorData.parse(withoutExtensions + [0xa0], kind: .attestation).get().extensions.isEmpty)
    }

    @Test func assertionAuthenticatorDataRules() throws {
        let data = try AppAttestAssertionObject.parse(self.assertion).get().authenticatorData.bytes
        func assertion(_ data: [UInt8]) -> [UInt8] {
            TestCBOR.encode(.map([(.text("signature"), .bytes([0x30, 0x00])), (.text("authenticatorData"), .bytes(data))]))
        }
        let ext = TestCBOR.encode(.map([(.text("apple_bundle_version_01"), .text("2"))]))
        #expect(try AppAttestAssertionObject.parse(assertion(data + ext)).get().authenticatorData.appleBundleVersion == "2")
        #expect(code(AppAttestAssertionObject.parse(assertion(data + [0xff]))) == .badExtensions)
        #expect(code(AppAttestAssertionObject.parse(assertion(Array(data.dropLast())))) == .truncated)
        #expect(data[32] & 0x40 != 0, "real assertions set AT without credential data")
        var withoutAT = data
        withoutAT[32] &= ~0x40
        #expect((try? AppAttestAssertionObject.parse(assertion(withoutAT)).get()) != nil)
        var withED = data
        withED[32] |= 0x80
        #expect(code(AppAttestAssertionObject.parse(assertion(withED))) == .badExtensions)
        #expect(code(AppAttestAssertionObject.parse(TestCBOR.encode(.map([(.text("authenticatorData"), .bytes(data))]))))
            == .missingField("signature"))
    }

    @Test func attestationWithoutAttestedCredentialDataIsRejected() throws {
        var data = try authData()
        data[32] &= ~0x40
        let bytes = try attestation(replacing: "authData", with: .bytes(Array(data[..<37])))
        #expect(code(AppAttestAttestationObject.parse(bytes)) == .missingAttestedCredentialData)
    }
}
