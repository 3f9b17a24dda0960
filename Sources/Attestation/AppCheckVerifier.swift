import GatewayCrypto
public import JOSE
public import KeySetCache
/// Verifies Firebase App Check tokens (RS256 JWTs) for one configured verifier, in PROTOCOL.md's order: the
/// first failing check decides the reason. Thread-safe: shared by every event loop (the key set cache is
/// thread-safe; everything else is immutable).
public final class AppCheckVerifier: Sendable {
    public let name: String
    public let policy: AppCheckPolicy
    /// The request header carrying the token (`X-Firebase-AppCheck` by default).
    public let headerName: String
    /// `headerName` in lower case (headers are matched case-insensitively).
    let lowercasedHeader: [UInt8]
    public let keys: KeySetCache<JWKS>
    /// Tokens over this size are refused before any parsing (Firebase's are ~1 KiB).
    public static let maxTokenBytes = 8 * 1024

    /// Entries of each event loop's verified-token cache (0: no cache).
    public let verifiedTokenCacheSize: Int

    public init(name: String, policy: AppCheckPolicy, headerName: String, keys: KeySetCache<JWKS>,
                verifiedTokenCacheSize: Int = 10_000) {
        self.verifiedTokenCacheSize = verifiedTokenCacheSize
        self.name = name
        self.policy = policy
        self.headerName = headerName
        lowercasedHeader = Array(headerName.lowercased().utf8)
        self.keys = keys
    }

    /// Checks one token. `now` is unix seconds (injected: tests use a manual clock). With a `cache`, a token
    /// verified before skips the signature check but never the time checks or the key-set check. With a
    /// `keySet` reader (the event loop's), the key set is read without taking the cache's lock.
    public func verify(token: UnsafeRawBufferPointer, now: Int64, cache: VerifiedTokenCache? = nil,
                       keySet reader: KeySetReader<JWKS>? = nil) -> AppCheckOutcome {
        guard token.count > 0, token.count <= Self.maxTokenBytes else { return .rejected(.malformedToken) }
        // The SDK's placeholder (no '.', short) is told apart before the key set is even read.
        if token.count <= AppCheckPlaceholder.maxBytes, !token.contains(UInt8(ascii: ".")), AppCheckPlaceholder.matches(token) {
            return .rejected(.clientAttestationFailed)
        }
        let keySet: JWKS
        switch reader?.current() ?? keys.current() {
        case .ready(let set), .stale(let set): keySet = set
        case .unavailable: return .rejected(.jwksUnavailable)
        }
        var digest: TokenDigest? = nil
        if let cache {
            let d = cache.digest(of: token)
            digest = d
            if let hit = cache.lookup(d) {
                // A cached pass still needs its key in the current set (a rotated-out key revokes it) and a
                // valid time window now.
                guard keySet.keys[hit.keyID] != nil else {
                    cache.remove(d)
                    return verifyUncached(token: token, now: now, keySet: keySet, cache: cache, digest: d)
                }
                if let status = timeStatus(exp: hit.expiresAt, iat: hit.issuedAt, nbf: hit.notBefore, now: now) {
                    return .rejected(status)
                }
                return .verified(hit.token)
            }
        }
        return verifyUncached(token: token, now: now, keySet: keySet, cache: cache, digest: digest)
    }

    private func verifyUncached(token: UnsafeRawBufferPointer, now: Int64, keySet: JWKS, cache: VerifiedTokenCache?,
                                digest: TokenDigest?) -> AppCheckOutcome {
        let jws: UnverifiedJWS
        switch UnverifiedJWS.parse(token) {
        case .success(let parsed): jws = parsed
        case .failure: return .rejected(.malformedToken)
        }
        // RS256 pinned: "none", HS256 (with the public key as an HMAC secret) and every other algorithm are
        // refused before a key is even looked up.
        guard jws.algorithm == "RS256" else { return .rejected(.unsupportedAlgorithm) }
        guard let kid = jws.keyID, !kid.isEmpty else { return .rejected(.malformedToken) }
        guard let key = keySet.keys[kid] else {
            keys.noteUnknownKey()   // perhaps Google rotated: one rate-limited refresh, this request fails closed
            return .rejected(.unknownKey)
        }
        guard jws.verifiesRS256(with: key) else { return .rejected(.badSignature) }

        let claims = jws.claims
        guard case .string(let iss)? = claims["iss"], iss == policy.issuer else { return .rejected(.wrongIssuer) }
        guard case .array(let aud)? = claims["aud"], audienceMatches(aud) else { return .rejected(.wrongAudience) }
        guard let exp = integer(claims["exp"]), let iat = integer(claims["iat"]) else { return .rejected(.malformedToken) }
        var nbf: Int64? = nil
        if let raw = claims["nbf"] {
            guard let value = integer(raw) else { return .rejected(.malformedToken) }
            nbf = value
        }
        if let status = timeStatus(exp: exp, iat: iat, nbf: nbf, now: now) { return .rejected(status) }
        // sub reaches the upstream as X-Attest-App-Id: only visible ASCII (Firebase app ids are "1:123:ios:abc"),
        // so no claim can smuggle a line break into a header.
        guard case .string(let sub)? = claims["sub"], !sub.isEmpty, sub.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .rejected(.malformedToken)
        }
        if let allowed = policy.appIDs, !allowed.contains(sub) { return .rejected(.appNotAllowed) }
        // Firebase's Python SDK requires typ "JWT"; so do we.
        guard jws.type == "JWT" else { return .rejected(.malformedToken) }
        var jti: String? = nil
        if case .string(let value)? = claims["jti"] { jti = value }

        let verified = VerifiedAppCheckToken(appID: sub, expiresAt: exp, tokenID: jti)
        if let cache, let digest {
            cache.insert(digest, CachedVerification(token: verified, keyID: kid, expiresAt: exp, issuedAt: iat, notBefore: nbf),
                         now: now)
        }
        return .verified(verified)
    }

    private func audienceMatches(_ aud: [JSONValue]) -> Bool {
        for case .string(let a) in aud {
            if a == policy.audienceByNumber { return true }
            if let byID = policy.audienceByID, a == byID { return true }
        }
        return false
    }

    /// exp must be in the future and iat/nbf not in the future, each with the configured skew.
    private func timeStatus(exp: Int64, iat: Int64, nbf: Int64?, now: Int64) -> VerificationStatus? {
        let skew = policy.clockSkewSeconds
        if exp <= now - skew { return .expired }
        if iat > now + skew { return .notYetValid }
        if let nbf, nbf > now + skew { return .notYetValid }
        return nil
    }

    private func integer(_ value: JSONValue?) -> Int64? {
        guard case .number(let n)? = value else { return nil }
        return n.int64
    }
}
