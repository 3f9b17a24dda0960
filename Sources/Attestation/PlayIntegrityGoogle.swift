import GatewayCore
public import GatewayCrypto
public import JOSE

/// A Google service account key file (`"type": "service_account"`), as the Cloud console downloads it.
public struct GoogleServiceAccount: Sendable {
    public let clientEmail: String
    public let privateKeyID: String?
    public let privateKey: RSAPrivateKey
    /// The file's `token_uri`, if it has one.
    public let tokenURI: String?

    /// Why a key file cannot be used.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ bytes: [UInt8]) throws(Problem) -> GoogleServiceAccount {
        guard case .object(let o)? = try? StrictJSON.parse(bytes) else { throw Problem(description: "not a JSON object") }
        guard o["type"]?.stringValue == "service_account" else { throw Problem(description: "\"type\" is not \"service_account\"") }
        guard let email = o["client_email"]?.stringValue, !email.isEmpty else { throw Problem(description: "no \"client_email\"") }
        guard let pem = o["private_key"]?.stringValue else { throw Problem(description: "no \"private_key\"") }
        let key: RSAPrivateKey
        do { key = try RSAPrivateKey(pem: pem) } catch { throw Problem(description: "\"private_key\" is not an RSA private key: \(error)") }
        return GoogleServiceAccount(clientEmail: email, privateKeyID: o["private_key_id"]?.stringValue, privateKey: key,
                                    tokenURI: o["token_uri"]?.stringValue)
    }

    public init(clientEmail: String, privateKeyID: String?, privateKey: RSAPrivateKey, tokenURI: String?) {
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.privateKey = privateKey
        self.tokenURI = tokenURI
    }
}

/// Google's `decodeIntegrityToken` for standard (and Google-managed classic) tokens: an OAuth2 access token from
/// the service account (JWT bearer grant, RFC 7523), cached until a minute before it expires; each call retried
/// once after 429, 5xx or a transport failure; decoded verdicts cached by the token's SHA-256 for as long as the
/// policy could accept them (Google's default quota is 10,000 calls per app and day).
///
/// Blocking: only ever called from a worker thread (`VerifierStep.blocking`).
public final class PlayIntegrityGoogle: Sendable {
    /// One HTTPS POST; nil on a transport failure or timeout.
    public typealias Post = @Sendable (_ url: String, _ headers: [(String, String)], _ body: [UInt8]) -> (status: Int, body: [UInt8])?

    public static let scope = "https://www.googleapis.com/auth/playintegrity"
    public let account: GoogleServiceAccount
    public let tokenURL: String
    public let decodeURL: String
    private let post: Post
    private let retryDelayMillis: UInt32
    private let accessToken = AnnotatedMutex<(token: String, refreshAt: Int64)?>(nil)
    /// Held while an access token is fetched, so concurrent requests wait for one fetch instead of each making one.
    private let fetching = AnnotatedMutex<Void>(())
    /// When the last fetch failed: for `fetchBackoffSeconds` after it, callers fail at once instead of each waiting
    /// out another fetch of their own.
    private let lastFetchFailure = AnnotatedMutex<Int64?>(nil)
    static let fetchBackoffSeconds: Int64 = 5
    /// Calls waiting on Google now, at most `maxInFlight`.
    private let inFlight = AnnotatedMutex<Int>(0)
    public let maxInFlight: Int
    let verdicts: PlayIntegrityVerdictCache

    public init(account: GoogleServiceAccount, packageName: String, apiBaseURL: String, tokenURL: String?,
                cacheCapacity: Int = 10_000, retryDelayMillis: UInt32 = 100, maxInFlight: Int = 32, post: @escaping Post) {
        self.maxInFlight = maxInFlight
        self.account = account
        self.tokenURL = tokenURL ?? account.tokenURI ?? "https://oauth2.googleapis.com/token"
        decodeURL = apiBaseURL + "/v1/" + packageName + ":decodeIntegrityToken"
        self.post = post
        self.retryDelayMillis = retryDelayMillis
        verdicts = PlayIntegrityVerdictCache(capacity: cacheCapacity)
    }

    /// Takes one of the `maxInFlight` places for a call; false when all are taken (the caller answers 503).
    func reserveCall() -> Bool {
        inFlight.withLock { n in
            guard n < maxInFlight else { return false }
            n += 1
            return true
        }
    }

    func releaseCall() { inFlight.withLock { $0 -= 1 } }

    /// The decoded verdict of `token`; `play_integrity_unavailable` when Google cannot be asked (after one retry),
    /// `malformed_token` when Google says the token is not one it can decode.
    public func decode(_ token: [UInt8], now: Int64, log: (String) -> Void) -> Result<PlayIntegrityVerdict, VerificationStatus> {
        decodePayload(token, now: now, log: log).flatMap { PlayIntegrityVerdict.parse($0).map(Result.success) ?? .failure(.malformedToken) }
    }

    /// `decode` up to `tokenPayloadExternal` (the CLI prints it whole).
    /// At most `maxInFlight` calls of this verifier wait on Google at a time: past that, a slow Google gets the rest
    /// answered 503 at once instead of taking every worker thread (DeviceCheck's and registrations' too).
    public func decodePayload(_ token: [UInt8], now: Int64, log: (String) -> Void) -> Result<JSONObject, VerificationStatus> {
        guard reserveCall() else { return .failure(.playIntegrityUnavailable) }
        defer { releaseCall() }
        let body = Array(JSONEncoding.encode(["integrityToken": .string(String(decoding: token, as: UTF8.self))]).utf8)
        var refreshed = false
        var attempt = 0
        while attempt < 2 {
            if attempt > 0 { Self.sleep(millis: retryDelayMillis) }
            attempt += 1
            guard let bearer = currentAccessToken(now: now, log: log) else { return .failure(.playIntegrityUnavailable) }
            guard let response = post(decodeURL, [("Authorization", "Bearer " + bearer), ("Content-Type", "application/json")], body) else {
                continue
            }
            switch response.status {
            case 200:
                guard case .object(let o)? = try? StrictJSON.parse(response.body), let payload = o["tokenPayloadExternal"]?.objectValue else {
                    log("decodeIntegrityToken answered 200 without a tokenPayloadExternal object")
                    return .failure(.playIntegrityUnavailable)
                }
                return .success(payload)
            case 400:
                return .failure(.malformedToken)
            case 401 where !refreshed:
                // The access token was revoked or expired early: one fresh one, and this attempt does not count.
                // Only this token is dropped: another thread may have fetched a new one meanwhile.
                accessToken.withLock { if $0?.token == bearer { $0 = nil } }
                refreshed = true
                attempt -= 1
            case 429, 500...599:
                continue
            default:
                log("decodeIntegrityToken answered \(response.status): \(Self.excerpt(response.body)) "
                    + "(check that the service account may call the Play Integrity API for this package)")
                return .failure(.playIntegrityUnavailable)
            }
        }
        return .failure(.playIntegrityUnavailable)
    }

    /// The cached access token, or a new one (one fetch at a time); nil when Google's token endpoint refused or
    /// could not be reached (logged).
    func currentAccessToken(now: Int64, log: (String) -> Void) -> String? {
        if let t = accessToken.withLock({ $0 }), now < t.refreshAt { return t.token }
        if recentlyFailed(now) { return nil }
        return fetching.withLock { _ -> String? in
            // Whoever waited for the lock gets what the fetch before it got: its token, or its failure.
            if let t = accessToken.withLock({ $0 }), now < t.refreshAt { return t.token }
            if recentlyFailed(now) { return nil }
            guard let fetched = fetchAccessToken(now: now, log: log) else {
                lastFetchFailure.withLock { $0 = now }
                return nil
            }
            lastFetchFailure.withLock { $0 = nil }
            accessToken.withLock { $0 = fetched }
            return fetched.token
        }
    }

    private func recentlyFailed(_ now: Int64) -> Bool {
        lastFetchFailure.withLock { failed in failed.map { now >= $0 && now - $0 < Self.fetchBackoffSeconds } ?? false }
    }

    private func fetchAccessToken(now: Int64, log: (String) -> Void) -> (token: String, refreshAt: Int64)? {
        var header: [(String, JSONValue)] = [("alg", "RS256"), ("typ", "JWT")]
        if let kid = account.privateKeyID { header.append(("kid", .string(kid))) }
        let claims: JSONValue = ["iss": .string(account.clientEmail), "scope": .string(Self.scope), "aud": .string(tokenURL),
                                 "iat": .number(JSONNumber(now)), "exp": .number(JSONNumber(now + 3600))]
        let assertion: String
        do { assertion = try JWSSigner.signRS256(header: .object(JSONObject(header)), claims: claims, key: account.privateKey) } catch {
            log("cannot sign the service account assertion: \(error)")
            return nil
        }
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        for attempt in 0..<2 {
            if attempt > 0 { Self.sleep(millis: retryDelayMillis) }
            guard let response = post(tokenURL, [("Content-Type", "application/x-www-form-urlencoded")], Array(form.utf8)) else { continue }
            if response.status == 429 || response.status >= 500 { continue }
            guard response.status == 200, case .object(let o)? = try? StrictJSON.parse(response.body),
                  let token = o["access_token"]?.stringValue, !token.isEmpty,
                  token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                log("the OAuth token endpoint refused the service account (\(response.status)): \(Self.excerpt(response.body))")
                return nil
            }
            let lifetime = min(max(o["expires_in"]?.int64Value ?? 3600, 0), 3600)
            // Renewed a minute early, so a token never expires between the check and Google's.
            return (token, now + max(lifetime - 60, 0))
        }
        log("the OAuth token endpoint \(tokenURL) could not be reached")
        return nil
    }

    static func excerpt(_ body: [UInt8]) -> String {
        String(decoding: body.prefix(200), as: UTF8.self).filter { $0 != "\n" && $0 != "\r" }
    }

    private static func sleep(millis: UInt32) { DeviceCheckVerifier.sleep(millis: millis) }
}

/// Verdicts Google decoded, by the token's SHA-256, until the policy's freshness window for them closes, and tokens
/// Google refused (400), for a minute; bounded: when full, expired entries go, and if more than half the capacity is
/// still live, the older half (so a full cache is swept at most once per `capacity / 2` insertions). Shared by every
/// loop (a lock around a dictionary).
public final class PlayIntegrityVerdictCache: Sendable {
    private struct Entry {
        /// nil: Google refused the token.
        let verdict: PlayIntegrityVerdict?
        let expiresAtMillis: Int64
        let order: UInt64
    }

    private struct Table {
        var entries: [[UInt8]: Entry] = [:]
        var next: UInt64 = 0
    }

    public enum Lookup: Sendable {
        case verdict(PlayIntegrityVerdict)
        case refused
        case miss
    }

    private let table = AnnotatedMutex(Table())
    let capacity: Int
    static let refusalMillis: Int64 = 60_000

    init(capacity: Int) { self.capacity = capacity }

    func lookup(_ digest: [UInt8], nowMillis: Int64) -> Lookup {
        table.withLock { t in
            guard let e = t.entries[digest] else { return .miss }
            guard nowMillis < e.expiresAtMillis else {
                t.entries[digest] = nil
                return .miss
            }
            return e.verdict.map(Lookup.verdict) ?? .refused
        }
    }

    func insert(_ digest: [UInt8], _ verdict: PlayIntegrityVerdict, expiresAtMillis: Int64, nowMillis: Int64) {
        put(digest, verdict, expiresAtMillis: expiresAtMillis, nowMillis: nowMillis)
    }

    func refuse(_ digest: [UInt8], nowMillis: Int64) {
        put(digest, nil, expiresAtMillis: PlayIntegrityVerifier.adding(nowMillis, Self.refusalMillis), nowMillis: nowMillis)
    }

    private func put(_ digest: [UInt8], _ verdict: PlayIntegrityVerdict?, expiresAtMillis: Int64, nowMillis: Int64) {
        guard capacity > 0, expiresAtMillis > nowMillis else { return }
        table.withLock { t in
            if t.entries.count >= capacity {
                t.entries = t.entries.filter { $0.value.expiresAtMillis > nowMillis }
                if t.entries.count > capacity / 2 {
                    let newest = t.entries.sorted { $0.value.order > $1.value.order }.prefix(capacity / 2)
                    t.entries = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
                }
            }
            t.entries[digest] = Entry(verdict: verdict, expiresAtMillis: expiresAtMillis, order: t.next)
            t.next += 1
        }
    }

    var count: Int { table.withLock { $0.entries.count } }
}
