#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
public import GatewayCrypto
import JOSE
public import StateStore
/// The ES256 token that authorizes the gateway's calls to Apple's DeviceCheck and App Attest servers
/// (`kid` = the key id, `iss` = the team id, `iat`), signed with the `.p8` key and reused until it is
/// `maxAgeSeconds` old (PROTOCOL.md: 20 minutes; Apple accepts them for an hour).
public final class AppleAuthToken: Sendable {
    public let teamID: String
    public let keyID: String
    private let key: ECPrivateKey
    private let maxAgeSeconds: Int64
    private let cached = AnnotatedMutex<(token: String, issuedAt: Int64)?>(nil)

    public init(teamID: String, keyID: String, key: ECPrivateKey, maxAgeSeconds: Int64 = 20 * 60) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.maxAgeSeconds = maxAgeSeconds
    }

    /// The cached token, or a new one when it is `maxAgeSeconds` old (or from the future: the clock moved back).
    public func current(now: Int64) throws -> String {
        if let c = cached.withLock({ $0 }), now >= c.issuedAt, now - c.issuedAt < maxAgeSeconds { return c.token }
        let token = try JWSSigner.signES256(claims: ["iss": .string(teamID), "iat": .number(JSONNumber(now))], kid: keyID, key: key)
        cached.withLock { $0 = (token, now) }
        return token
    }
}

/// What one call to Apple answered, as far as the verifier needs it.
public struct AppleResponse: Sendable {
    public let status: Int
    public let body: [UInt8]
    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// A DeviceCheck verdict.
public enum DeviceCheckOutcome: Sendable, Equatable {
    /// `bits`: the two bits as Apple reported them before this request (subject binding only).
    case passed(bit0: Bool?, bit1: Bool?)
    case rejected(VerificationStatus)
}

/// One configured `device_check` verifier (PROTOCOL.md "DeviceCheck"). `check` runs the whole flow — blocking
/// calls to Apple through the injected `post`, and the subject record in the state store — so the caller runs it
/// on a worker thread, never on an event loop.
public final class DeviceCheckVerifier: Sendable {
    public let name: String
    public let teamID: String
    /// The request header carrying the device token (`X-Apple-DeviceCheck`).
    public let headerName: String
    /// `subject_binding.header`, when the bit0 binding flow is on.
    public let subjectHeader: String?
    /// `headerName` and `subjectHeader` in lower case (headers are matched case-insensitively).
    let lowercasedHeader: [UInt8]
    let lowercasedSubjectHeader: [UInt8]?
    public let auth: AppleAuthToken
    /// `replay_window`: on `limited_use` routes, how long a consumed device token's hash is kept.
    public let replayWindowSeconds: Int64
    /// POSTs JSON to `path` (e.g. `/v1/validate_device_token`) with the `Authorization` value; nil on a transport
    /// failure or timeout.
    public typealias Post = @Sendable (_ path: String, _ authorization: String, _ body: [UInt8]) -> AppleResponse?
    private let post: Post
    private let retryDelayMillis: UInt32

    /// Device tokens are ~2–3 KiB of base64; longer ones are refused before any call.
    public static let maxTokenBytes = 8 * 1024

    public init(name: String, teamID: String, headerName: String, subjectHeader: String?, auth: AppleAuthToken,
                replayWindowSeconds: Int64 = 24 * 3600, retryDelayMillis: UInt32 = 100, post: @escaping Post) {
        self.name = name
        self.replayWindowSeconds = replayWindowSeconds
        self.teamID = teamID
        self.headerName = headerName
        self.subjectHeader = subjectHeader
        lowercasedHeader = Array(headerName.lowercased().utf8)
        lowercasedSubjectHeader = subjectHeader.map { Array($0.lowercased().utf8) }
        self.auth = auth
        self.retryDelayMillis = retryDelayMillis
        self.post = post
    }

    /// Where subjects bound through bit0 are recorded (as their SHA-256, never in clear).
    public var subjectNamespace: String { "devicecheck-subject:" + teamID }

    /// Where device tokens accepted on `limited_use` routes are recorded (as their SHA-256).
    public var replayNamespace: String { "devicecheck-token:" + teamID }

    /// The whole flow for one request. `log` receives operator errors (our key or token refused by Apple).
    public func check(deviceToken: String, subject: String?, now: Int64, store: (any AttestationStateStore)?,
                      log: (String) -> Void) -> DeviceCheckOutcome {
        guard subjectHeader != nil else {
            switch call("/v1/validate_device_token", token: deviceToken, extra: [], now: now, log: log) {
            case .ok: return .passed(bit0: nil, bit1: nil)
            case .failed(let status): return .rejected(status)
            }
        }
        guard let subject, !subject.isEmpty else { return .rejected(.missingSubject) }
        guard let store else { return .rejected(.stateUnavailable) }
        let query: AppleResponse
        switch call("/v1/query_two_bits", token: deviceToken, extra: [], now: now, log: log) {
        case .ok(let r): query = r
        case .failed(let status): return .rejected(status)
        }
        let bits = Self.bits(query.body)
        let hash = hexString(SHA256Hasher.hash(Array(subject.utf8)))
        do {
            if bits?.bit0 == true {
                return try store.isConsumed(namespace: subjectNamespace, key: hash, now: now)
                    ? .passed(bit0: true, bit1: bits?.bit1) : .rejected(.unknownSubject)
            }
            // First binding of this device: record the subject (first writer wins), then set bit0, keeping bit1.
            _ = try store.consumeOnce(namespace: subjectNamespace, key: hash, expiresAt: now + 10 * 365 * 86_400, now: now)
        } catch {
            return .rejected(.stateUnavailable)
        }
        let bit1: JSONValue = .bool(bits?.bit1 ?? false)
        switch call("/v1/update_two_bits", token: deviceToken, extra: [("bit0", .bool(true)), ("bit1", bit1)], now: now, log: log) {
        case .ok: return .passed(bit0: false, bit1: bits?.bit1 ?? false)
        case .failed(let status): return .rejected(status)
        }
    }

    /// `{"bit0":…,"bit1":…}` from a query answer; nil for "Failed to find bit state" (a device never set).
    static func bits(_ body: [UInt8]) -> (bit0: Bool, bit1: Bool)? {
        guard case .object(let o)? = try? StrictJSON.parse(body), case .bool(let b0)? = o["bit0"] else { return nil }
        if case .bool(let b1)? = o["bit1"] { return (b0, b1) }
        return (b0, false)
    }

    private enum CallResult {
        case ok(AppleResponse)
        case failed(VerificationStatus)
    }

    /// One call, retried once after 429/5xx or a transport failure. 400 about the device token →
    /// `device_check_failed`; 401, or 400 about *our* authorization token → `device_check_unavailable` and an
    /// operator error in the log (the gateway's key or team id is wrong, not the client).
    private func call(_ path: String, token: String, extra: [(String, JSONValue)], now: Int64,
                      log: (String) -> Void) -> CallResult {
        let authorization: String
        do { authorization = "Bearer " + (try auth.current(now: now)) } catch {
            log("cannot sign the Apple auth token: \(error)")
            return .failed(.deviceCheckUnavailable)
        }
        for attempt in 0..<2 {
            if attempt > 0 { Self.sleep(millis: retryDelayMillis) }
            // A fresh transaction id per call, the retry included (Apple asks for a unique one per request).
            let members: [(String, JSONValue)] = [("device_token", .string(token)), ("transaction_id", .string(Self.transactionID())),
                                                  ("timestamp", .number(JSONNumber(now * 1000)))] + extra
            let body = Array(JSONEncoding.encode(.object(JSONObject(members))).utf8)
            guard let response = post(path, authorization, body) else { continue }
            switch response.status {
            case 200: return .ok(response)
            case 429, 500...599: continue
            case 401:
                log("Apple refused the gateway's authorization token (401): check key_id, team_id and private_key")
                return .failed(.deviceCheckUnavailable)
            case 400:
                let text = String(decoding: response.body.prefix(512), as: UTF8.self).lowercased()
                if text.contains("authorization token") || text.contains("authentication token") {
                    log("Apple refused the gateway's authorization token (400): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
                    return .failed(.deviceCheckUnavailable)
                }
                return .failed(.deviceCheckFailed)
            default:
                return .failed(.deviceCheckFailed)
            }
        }
        return .failed(.deviceCheckUnavailable)
    }

    /// A fresh random UUID (version 4) per call, as Apple asks.
    static func transactionID() -> String {
        var b = SecureRandom.bytes(16)
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        let hex = hexString(b)
        let h = Array(hex)
        return String(h[0..<8]) + "-" + String(h[8..<12]) + "-" + String(h[12..<16]) + "-" + String(h[16..<20]) + "-" + String(h[20..<32])
    }

    /// The pause before a retry to Apple's or Google's servers (worker threads only).
    static func sleep(millis: UInt32) {
        var ts = timespec(tv_sec: Int(millis / 1000), tv_nsec: Int(millis % 1000) * 1_000_000)
        _ = nanosleep(&ts, nil)
    }
}
