import Testing
@testable import Attestation
import GatewayCore
@testable import KeySetCache

/// App Check as a route verifier on an event loop: its loop state reads the key set without the cache's lock, and
/// answers as the locking path does.
@Suite struct AppCheckLoopStateTests {
    func outcome(_ f: AppCheckFixture, _ token: String, loop: AppCheckVerifier.LoopState?) -> VerifierOutcome? {
        let request = VerificationRequest(now: f.now, signedLine: .original(method: [], target: []), loopState: loop)
        let step = Array(token.utf8).withUnsafeBytes { f.verifier.verify($0, request, loop: loop) }
        guard case .done(let outcome) = step else { return nil }
        return outcome
    }

    @Test func verifyingOnALoopTakesNoLock() throws {
        let f = AppCheckFixture()
        let loop = try #require(f.verifier.makeLoopState())
        let token = f.token()
        guard case .passed? = outcome(f, token, loop: loop) else { Issue.record("expected a pass"); return }
        let before = f.keys.lockAcquisitions
        for _ in 0..<100 {
            guard case .passed? = outcome(f, token, loop: loop) else { Issue.record("expected a pass"); return }
        }
        #expect(f.keys.lockAcquisitions == before)
        // Without a loop state (the locking path) the answer is the same, and the lock is taken.
        guard case .passed? = outcome(f, token, loop: nil) else { Issue.record("expected a pass"); return }
        #expect(f.keys.lockAcquisitions > before)
    }

    @Test func theLoopStateHasACacheOnlyWhenConfigured() throws {
        let f = AppCheckFixture()
        #expect(try #require(f.verifier.makeLoopState()).cache != nil)
        let uncached = AppCheckVerifier(name: "u", policy: f.verifier.policy, headerName: "X-Firebase-AppCheck", keys: f.keys,
                                        verifiedTokenCacheSize: 0)
        #expect(try #require(uncached.makeLoopState()).cache == nil)
    }
}
