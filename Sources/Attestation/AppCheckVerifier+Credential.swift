public import GatewayCore
import JOSE
import KeySetCache
import StateStore

/// App Check as a route verifier: one header (`X-Firebase-AppCheck` by default) carrying one JWT, verified on the
/// loop (the signature at most once per token and loop, with the verified-token cache).
extension AppCheckVerifier: CredentialVerifier {
    public var scheme: StaticString { "AppCheck" }
    public var presenceHeader: [UInt8] { lowercasedHeader }

    /// The token's bytes, valid while the headers are.
    public func extract(_ headers: HeaderView) -> Extraction<UnsafeRawBufferPointer> {
        switch headers.single(lowercasedHeader) {
        case .missing: .absent
        case .malformed: .malformed
        case .value(let range): .presented(headers[range])
        }
    }

    /// Per event loop: the key set read without a lock, and the verified-token cache (when configured).
    public final class LoopState {
        let keys: KeySetReader<JWKS>
        let cache: VerifiedTokenCache?

        init(keys: KeySetReader<JWKS>, cache: VerifiedTokenCache?) {
            self.keys = keys
            self.cache = cache
        }
    }

    public func makeLoopState() -> LoopState? {
        LoopState(keys: keys.makeReader(), cache: verifiedTokenCacheSize > 0 ? VerifiedTokenCache(capacity: verifiedTokenCacheSize) : nil)
    }

    public func verify(_ token: UnsafeRawBufferPointer, _ request: VerificationRequest, loop: LoopState?) -> VerifierStep {
        switch verify(token: token, now: request.now, cache: loop?.cache, keySet: loop?.keys) {
        case .rejected(let status):
            return .done(.rejected(status))
        case .verified(let t):
            // Limited use consumes the jti per project until exp (+ skew); a token without one cannot be limited.
            let consumption: Consumption = if let jti = t.tokenID, !jti.isEmpty {
                .once(ConsumeRequest(namespace: policy.projectNumber, key: jti, expiresAt: t.expiresAt + policy.clockSkewSeconds))
            } else {
                .impossible(.missingJTI)
            }
            return .done(.passed(PassedCredential(appID: t.appID, consumption: consumption)))
        }
    }
}
