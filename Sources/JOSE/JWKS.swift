public import GatewayCrypto
/// A JSON Web Key Set (RFC 7517) reduced to what RS256 verification needs: RSA public keys by `kid`.
///
/// Built once per fetch and then read-only; lookups by `kid` select the key, the token never supplies one.
public struct JWKS: Sendable {
    /// Keys by `kid`.
    public let keys: [String: RSAPublicKey]

    /// Most entries accepted in a `keys` array: real sets hold a handful, and each RSA key costs a build.
    public static let maxEntries = 100

    /// The key IDs, sorted (for logs and metrics).
    public var keyIDs: [String] { keys.keys.sorted() }

    public init(keys: [String: RSAPublicKey]) { self.keys = keys }

    /// Parses `{"keys":[…]}`.
    ///
    /// Taken: entries with `kty` "RSA", a `kid`, `n` and `e` (strict base64url), `use` "sig" or absent, `alg`
    /// "RS256" or absent. Skipped, not an error: other `kty`, `use` or `alg` (a set may carry encryption or EC
    /// keys we do not use) and RSA entries without `kid` (no token could select them). Errors: a document that is
    /// not strict JSON or lacks `keys`, an entry that is not an object or has a member of the wrong type, a taken
    /// key that does not build (bad base64url, refused by `RSAPublicKey`'s size and exponent policy), a duplicate
    /// `kid` among taken keys (which key a token meant would be ambiguous), and an empty result.
    public static func parse(_ bytes: [UInt8]) throws(JWKSError) -> JWKS {
        let document: JSONValue
        do throws(JSONError) { document = try StrictJSON.parse(bytes) } catch {
            throw JWKSError("key set is not valid JSON: \(error)")
        }
        guard let root = document.objectValue else { throw JWKSError("key set is not a JSON object") }
        guard let entries = root["keys"]?.arrayValue else { throw JWKSError("key set has no \"keys\" array") }
        guard entries.count <= maxEntries else { throw JWKSError("key set has more than \(maxEntries) keys") }
        var keys: [String: RSAPublicKey] = [:]
        for (position, entry) in entries.enumerated() {
            guard let jwk = entry.objectValue else { throw JWKSError("keys[\(position)] is not an object") }
            guard let (kid, key) = try rsaKey(jwk, position: position) else { continue }
            guard keys.updateValue(key, forKey: kid) == nil else { throw JWKSError("duplicate kid \"\(kid)\"") }
        }
        guard !keys.isEmpty else { throw JWKSError("key set has no usable RS256 key") }
        return JWKS(keys: keys)
    }

    /// The entry as (kid, key), nil when it is to be skipped.
    private static func rsaKey(_ jwk: JSONObject, position: Int) throws(JWKSError) -> (String, RSAPublicKey)? {
        let kty = try string(jwk, "kty", position: position)
        guard let kty else { throw JWKSError("keys[\(position)] has no kty") }
        guard same(kty, "RSA") else { return nil }
        if let use = try string(jwk, "use", position: position), !same(use, "sig") { return nil }
        if let alg = try string(jwk, "alg", position: position), !same(alg, "RS256") { return nil }
        guard let kid = try string(jwk, "kid", position: position) else { return nil }
        guard !kid.isEmpty else { throw JWKSError("keys[\(position)] has an empty kid") }
        guard let n64 = try string(jwk, "n", position: position), let e64 = try string(jwk, "e", position: position) else {
            throw JWKSError("key \"\(kid)\" lacks n or e")
        }
        guard let n = Base64URL.decode(n64), let e = Base64URL.decode(e64) else {
            throw JWKSError("key \"\(kid)\" has n or e that is not strict base64url")
        }
        do throws(CryptoError) {
            return (kid, try RSAPublicKey(modulus: n, exponent: e))
        } catch {
            throw JWKSError("key \"\(kid)\" does not build: \(error)")
        }
    }

    /// The member's string value; nil when absent; an error when present with another type.
    private static func string(_ jwk: JSONObject, _ name: String, position: Int) throws(JWKSError) -> String? {
        guard let value = jwk[name] else { return nil }
        guard let s = value.stringValue else { throw JWKSError("keys[\(position)].\(name) is not a string") }
        return s
    }

    /// Byte equality: Unicode canonical equivalence must not make a different string match a pinned value.
    private static func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
}

/// Why a key set document was refused.
public struct JWKSError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}
