import Testing
import GatewayCrypto
import JOSE

/// Compact JWE with A256KW + A256GCM: round trip, and each strictness rule refusing its token.
@Suite struct CompactJWETests {
    static let kek = SecureRandom.bytes(32)
    static let message = Array("eyJhbGciOiJFUzI1NiJ9.e30.c2ln".utf8)

    func parts(_ token: String) -> [String] { token.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }

    @Test func roundTrip() throws {
        let token = try #require(CompactJWE.encrypt(Self.message, kek: Self.kek))
        #expect(parts(token).count == 5)
        #expect(CompactJWE.decrypt(token, kek: Self.kek) == .success(Self.message))
    }

    @Test func aWrongKeyFailsTheUnwrapAndATamperedCiphertextTheTag() throws {
        let token = try #require(CompactJWE.encrypt(Self.message, kek: Self.kek))
        #expect(CompactJWE.decrypt(token, kek: SecureRandom.bytes(32)) == .failure(.keyUnwrapFailed))
        var p = parts(token)
        var ct = try #require(Base64URL.decode(p[3]))
        ct[0] ^= 1
        p[3] = Base64URL.encode(ct)
        #expect(CompactJWE.decrypt(p.joined(separator: "."), kek: Self.kek) == .failure(.decryptionFailed))
        // The header is authenticated: another spelling of the same header fails the tag.
        p = parts(token)
        p[0] = Base64URL.encode(Array(#"{"enc":"A256GCM","alg":"A256KW"}"#.utf8))
        #expect(CompactJWE.decrypt(p.joined(separator: "."), kek: Self.kek) == .failure(.decryptionFailed))
    }

    @Test func otherAlgorithmsCompressionAndCritAreRefused() throws {
        let cases: [(JSONValue, CompactJWE.Failure)] = [(["alg": "A128KW", "enc": "A256GCM"], .unsupportedAlgorithm),
                                  (["alg": "dir", "enc": "A256GCM"], .unsupportedAlgorithm),
                                  (["alg": "A256KW", "enc": "A256CBC-HS512"], .unsupportedAlgorithm),
                                  (["alg": "a256kw", "enc": "A256GCM"], .unsupportedAlgorithm),
                                  (["alg": "A256KW", "enc": "A256GCM", "zip": "DEF"], .malformed),
                                  (["alg": "A256KW", "enc": "A256GCM", "crit": ["b64"]], .malformed),
                                  (["enc": "A256GCM"], .malformed)]
        for (header, failure) in cases {
            let token = try #require(CompactJWE.encrypt(Self.message, kek: Self.kek, header: header))
            #expect(CompactJWE.decrypt(token, kek: Self.kek) == .failure(failure), "\(header)")
        }
    }

    @Test func wrongShapesAreMalformed() throws {
        let token = try #require(CompactJWE.encrypt(Self.message, kek: Self.kek))
        let p = parts(token)
        let cases = [
            p.dropLast().joined(separator: "."),                       // four parts
            token + ".x",                                              // six parts
            token + "=",                                               // padding
            [p[0], "", p[2], p[3], p[4]].joined(separator: "."),       // no wrapped key
            [p[0], p[1], Base64URL.encode(Array(repeating: 0, count: 16)), p[3], p[4]].joined(separator: "."),   // 16-byte IV
            [p[0], p[1], p[2], p[3], Base64URL.encode(Array(repeating: 0, count: 12))].joined(separator: "."),   // short tag
            [p[0], p[1], p[2], "", p[4]].joined(separator: "."),       // empty ciphertext
            [Base64URL.encode(Array("[]".utf8)), p[1], p[2], p[3], p[4]].joined(separator: "."),
            " " + token,
        ]
        for c in cases { #expect(CompactJWE.decrypt(c, kek: Self.kek) == .failure(.malformed), "\(c.prefix(40))") }
    }
}
