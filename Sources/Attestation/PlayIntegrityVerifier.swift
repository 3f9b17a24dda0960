public import GatewayCore
public import GatewayCrypto
public import JOSE
import StateStore

/// What a classic token's nonce (or a standard token's request hash) is bound to.
public enum PlayIntegrityBinding: Sendable, Equatable {
    /// base64url(SHA-256(App Attest's request clientData, with `X-Play-Integrity-Timestamp`)); the timestamp
    /// within the policy's `max_skew`.
    case request
    /// A classic token's nonce is a challenge from the registration endpoint, redeemed once; a standard token's
    /// request hash is still the request's.
    case nonce
}

/// A classic token's keys as Play Console gives them (developer-managed): the AES-256 key that unwraps the
/// content key, and the P-256 key that verifies the inner ES256 signature.
public struct PlayIntegrityClassicKeys: Sendable {
    public let decryptionKey: [UInt8]
    public let verificationKey: ECPublicKey

    public init?(decryptionKey: [UInt8], verificationKey: ECPublicKey) {
        guard decryptionKey.count == 32 else { return nil }
        self.decryptionKey = decryptionKey
        self.verificationKey = verificationKey
    }
}

/// One configured `play_integrity` verifier (PROTOCOL.md Additions "Play Integrity"): the token in
/// `X-Play-Integrity`, decoded locally (a compact JWE, with classic keys configured) or by Google, then the policy,
/// then the binding — the request hash over the whole body, or a challenge redeemed once — and limited use of the
/// token's SHA-256. Shared by every loop: everything in it is immutable or locked.
public final class PlayIntegrityVerifier: CredentialVerifier {
    public let name: String
    public let policy: PlayIntegrityPolicy
    public let binding: PlayIntegrityBinding
    public let classic: PlayIntegrityClassicKeys?
    public let google: PlayIntegrityGoogle?
    /// `POST {registrationPath}/challenge` and `/attest` (the plugin contract's Android half), when configured.
    public let registrationPath: String?
    public let replayWindowSeconds: Int64
    public let challengeTTLSeconds: Int64 = 300
    let lowercasedHeader: [UInt8]

    public static let timestampHeader = "x-play-integrity-timestamp"
    static let timestampHeaderBytes = Array(timestampHeader.utf8)
    /// Play Integrity tokens are a few KiB; anything over this is refused before any work.
    public static let maxTokenBytes = 16 * 1024

    public init(name: String, policy: PlayIntegrityPolicy, headerName: String = "X-Play-Integrity", binding: PlayIntegrityBinding,
                classic: PlayIntegrityClassicKeys?, google: PlayIntegrityGoogle?, registrationPath: String? = nil,
                replayWindowSeconds: Int64 = 24 * 3600) {
        self.name = name
        self.policy = policy
        self.binding = binding
        self.classic = classic
        self.google = google
        self.registrationPath = registrationPath
        self.replayWindowSeconds = replayWindowSeconds
        lowercasedHeader = Array(headerName.lowercased().utf8)
    }

    /// Where this verifier's challenges live in the state store.
    public var challengeNamespace: String { "playintegrity-challenge:" + name }
    /// Where tokens consumed on `limited_use` routes are recorded (their SHA-256), per package.
    public var replayNamespace: String { "playintegrity-token:" + policy.packageName }

    // MARK: CredentialVerifier

    public struct Presented: Sendable {
        let token: [UInt8]
        /// `X-Play-Integrity-Timestamp` as sent, when present.
        let timestamp: [UInt8]?
    }

    public var scheme: StaticString { "PlayIntegrity" }
    public var presenceHeader: [UInt8] { lowercasedHeader }
    public var credentialHeaders: [[UInt8]] { [lowercasedHeader, Self.timestampHeaderBytes] }

    /// One token (bounded, base64 characters and dots only) and at most one timestamp.
    public func extract(_ headers: HeaderView) -> Extraction<Presented> {
        let tokenRange: Range<Int>
        switch headers.single(lowercasedHeader) {
        case .missing: return .absent
        case .malformed: return .malformed
        case .value(let r): tokenRange = r
        }
        let token = headers[tokenRange]
        guard !token.isEmpty, token.count <= Self.maxTokenBytes, token.allSatisfy(Self.isTokenByte) else { return .malformed }
        var timestamp: [UInt8]? = nil
        switch headers.single(Self.timestampHeaderBytes) {
        case .missing: break
        case .malformed: return .malformed
        case .value(let r): timestamp = Array(headers[r])
        }
        return .presented(Presented(token: Array(token), timestamp: timestamp))
    }

    public func verify(_ presented: Presented, _ request: VerificationRequest, loop: NoLoopState?) -> VerifierStep {
        let now = request.now, nowMillis = request.nowMillis
        // A stale or unreadable timestamp is refused before any decryption or call to Google.
        if let timestamp = presented.timestamp, let status = timestampStatus(timestamp, now: now) { return .done(.rejected(status)) }
        if case .request = binding, presented.timestamp == nil { return .done(.rejected(.malformedToken)) }
        let line = request.signedLine
        if let classic, Self.isCompactJWE(presented.token) {
            switch Self.decodeClassic(presented.token, keys: classic) {
            case .failure(let status): return .done(.rejected(status))
            case .success(let verdict):
                return decoded(verdict, presented, digest: Self.digest(presented.token), line, now: now, nowMillis: nowMillis)
            }
        }
        guard let google else { return .done(.rejected(.malformedToken)) }
        let digest = Self.digest(presented.token)
        switch google.verdicts.lookup(digest, nowMillis: nowMillis) {
        case .verdict(let verdict): return decoded(verdict, presented, digest: digest, line, now: now, nowMillis: nowMillis)
        case .refused: return .done(.rejected(.malformedToken))
        case .miss: break
        }
        return .blocking { context in
            switch google.decode(presented.token, now: now, log: context.log) {
            case .failure(let status):
                // A token Google cannot decode stays refused for a minute without another call (quota).
                if status == .malformedToken { google.verdicts.refuse(digest, nowMillis: nowMillis) }
                return .done(.rejected(status))
            case .success(let verdict):
                google.verdicts.insert(digest, verdict, expiresAtMillis: Self.adding(verdict.timestampMillis, self.policy.maxSkewMillis),
                                       nowMillis: nowMillis)
                return self.decoded(verdict, presented, digest: digest, line, now: now, nowMillis: nowMillis)
            }
        }
    }

    /// SHA-256 of the token in one spelling: `+ /` read as `- _` and `=` dropped, so a token re-spelled in the other
    /// base64 alphabet (which Google might read as the same) is neither a new replay key nor a new call.
    static func digest(_ token: [UInt8]) -> [UInt8] {
        var canonical: [UInt8] = []
        canonical.reserveCapacity(token.count)
        for c in token {
            switch c {
            case UInt8(ascii: "+"): canonical.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): canonical.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): continue
            default: canonical.append(c)
            }
        }
        return SHA256Hasher.hash(canonical)
    }

    /// `a + b`, saturating (timestamps and windows come from tokens and configuration).
    static func adding(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? Int64.max : Int64.min) : sum
    }

    /// The policy, then the binding. `digest`: the token's `digest` (its cache and replay key), computed once.
    private func decoded(_ verdict: PlayIntegrityVerdict, _ presented: Presented, digest: [UInt8], _ line: SignedRequestLine,
                         now: Int64, nowMillis: Int64) -> VerifierStep {
        let judged: PlayIntegrityPolicy.Judged
        switch policy.judge(verdict, nowMillis: nowMillis) {
        case .failure(let status): return .done(.rejected(status))
        case .success(let j): judged = j
        }
        // Kept for `replay_window`, and at least as long as the policy could accept the token again.
        let acceptable = Self.adding(verdict.timestampMillis, policy.maxSkewMillis) / 1000 + 1
        let consume = ConsumeRequest(namespace: replayNamespace, key: hexString(digest),
                                     expiresAt: max(Self.adding(now, replayWindowSeconds), acceptable))
        let passed = PassedCredential(appID: policy.packageName,
                                      fields: [VerdictField("X-Attest-Device-Integrity", judged.deviceIntegrity),
                                               VerdictField("X-Attest-App-Recognition", judged.appRecognition)],
                                      consumption: .once(consume))
        // Exactly one of nonce (classic) and requestHash (standard).
        switch (verdict.nonce, verdict.requestHash) {
        case (let nonce?, nil) where binding == .nonce:
            let namespace = challengeNamespace
            let challenge = PlayIntegrityPolicy.unpadded(nonce)
            return .store(StoreStep(operation: "playintegrity_nonce", run: { store throws(StateStoreError) in
                try store.redeem(namespace: namespace, key: challenge, now: now) ? .done(.passed(passed)) : .done(.rejected(.challengeUnknown))
            }, failed: { _ in .done(.rejected(.stateUnavailable)) }))
        case (let value?, nil), (nil, let value?):
            guard let timestamp = presented.timestamp else { return .done(.rejected(.malformedToken)) }
            let bound = PlayIntegrityPolicy.unpadded(value)
            return .body { bodySHA256 in
                let expected = Self.requestHash(method: line.method, target: line.target, timestamp: timestamp, bodySHA256: bodySHA256)
                return bound.utf8.elementsEqual(expected.utf8) ? .done(.passed(passed)) : .done(.rejected(.badAssertion))
            }
        default:
            return .done(.rejected(.malformedToken))
        }
    }

    private func timestampStatus(_ timestamp: [UInt8], now: Int64) -> VerificationStatus? {
        let maxSkew = max(policy.maxSkewMillis / 1000, 1)
        guard let fresh = AppAttestVerifier.timestampIsFresh(timestamp, now: now, maxSkewSeconds: maxSkew) else { return .malformedToken }
        return fresh ? nil : .staleTimestamp
    }

    // MARK: pieces

    /// base64url without padding of SHA-256 of App Attest's request clientData (the value the app puts in a standard
    /// request's `requestHash` or a classic request's `nonce`).
    public static func requestHash(method: some Collection<UInt8>, target: some Collection<UInt8>, timestamp: some Collection<UInt8>,
                                   bodySHA256: [UInt8]) -> String {
        let clientData = AppAttestVerifier.requestClientData(method: method, target: target, timestamp: timestamp, bodySHA256: bodySHA256)
        return Base64URL.encode(SHA256Hasher.hash(clientData))
    }

    /// The value a registration token binds: base64url(SHA-256(UTF-8 challenge)).
    public static func challengeHash(_ challenge: String) -> String {
        Base64URL.encode(SHA256Hasher.hash(Array(challenge.utf8)))
    }

    /// Five dot-separated parts: the compact JWE form of a classic token.
    static func isCompactJWE(_ token: [UInt8]) -> Bool {
        token.reduce(0) { $1 == UInt8(ascii: ".") ? $0 + 1 : $0 } == 4
    }

    /// base64 (either alphabet, padding) and `.`: anything else cannot be a token and is not passed on.
    static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): true
        default: false
        }
    }

    /// A classic token decoded with developer-managed keys: the JWE decrypted (A256KW, A256GCM), the inner JWS's
    /// ES256 signature checked, its payload read as a verdict. A wrong key (unwrap or signature) is `bad_signature`,
    /// a tampered ciphertext `malformed_token`.
    public static func decodeClassic(_ token: [UInt8], keys: PlayIntegrityClassicKeys) -> Result<PlayIntegrityVerdict, VerificationStatus> {
        decodeClassicPayload(token, keys: keys).flatMap { PlayIntegrityVerdict.parse($0).map(Result.success) ?? .failure(.malformedToken) }
    }

    /// `decodeClassic` up to the verified payload (the CLI prints it whole).
    public static func decodeClassicPayload(_ token: [UInt8], keys: PlayIntegrityClassicKeys) -> Result<JSONObject, VerificationStatus> {
        let plaintext: [UInt8]
        switch token.withUnsafeBytes({ CompactJWE.decrypt($0, kek: keys.decryptionKey) }) {
        case .success(let p): plaintext = p
        case .failure(.unsupportedAlgorithm): return .failure(.unsupportedAlgorithm)
        case .failure(.keyUnwrapFailed): return .failure(.badSignature)
        case .failure(.malformed), .failure(.decryptionFailed): return .failure(.malformedToken)
        }
        let jws: UnverifiedJWS
        switch plaintext.withUnsafeBytes({ UnverifiedJWS.parse($0) }) {
        case .success(let j): jws = j
        case .failure: return .failure(.malformedToken)
        }
        guard let alg = jws.algorithm, alg.utf8.elementsEqual("ES256".utf8) else { return .failure(.unsupportedAlgorithm) }
        guard !JWSAlgorithm.hasCriticalExtensions(jws) else { return .failure(.malformedToken) }
        guard keys.verificationKey.verifyES256(rawSignature: jws.signature, message: jws.signingInput) else { return .failure(.badSignature) }
        return .success(jws.claims)
    }

    /// The verified payload of `token`, decoded wherever it is decoded (blocking when that is Google).
    public func decodePayloadBlocking(_ token: [UInt8], now: Int64, log: (String) -> Void) -> Result<JSONObject, VerificationStatus> {
        if let classic, Self.isCompactJWE(token) { return Self.decodeClassicPayload(token, keys: classic) }
        guard let google else { return .failure(.malformedToken) }
        return google.decodePayload(token, now: now, log: log)
    }

    /// Decodes `token` wherever it is decoded (blocking when that is Google).
    public func decodeBlocking(_ token: [UInt8], now: Int64, log: (String) -> Void) -> Result<PlayIntegrityVerdict, VerificationStatus> {
        decodePayloadBlocking(token, now: now, log: log).flatMap { PlayIntegrityVerdict.parse($0).map(Result.success) ?? .failure(.malformedToken) }
    }

    /// A registration body's token (the plugin contract): decoded, judged, and bound to the challenge (its
    /// `requestHash` or `nonce` is `challengeHash(challenge)`). Blocking; the caller redeems the challenge after.
    public func verifyRegistration(token: [UInt8], challenge: String, nowMillis: Int64, log: (String) -> Void) -> Result<Void, VerificationStatus> {
        let now = nowMillis / 1000
        guard !token.isEmpty, token.count <= Self.maxTokenBytes, token.allSatisfy(Self.isTokenByte) else { return .failure(.malformedToken) }
        let verdict: PlayIntegrityVerdict
        switch decodeBlocking(token, now: now, log: log) {
        case .failure(let status): return .failure(status)
        case .success(let v): verdict = v
        }
        if case .failure(let status) = policy.judge(verdict, nowMillis: nowMillis) { return .failure(status) }
        guard let bound = verdict.requestHash ?? verdict.nonce, verdict.requestHash == nil || verdict.nonce == nil else {
            return .failure(.malformedToken)
        }
        return PlayIntegrityPolicy.unpadded(bound) == Self.challengeHash(challenge) ? .success(()) : .failure(.badAssertion)
    }
}
