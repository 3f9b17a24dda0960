import Testing
import StateStore
@testable import GatewayProxy

/// Shared rate limits' pieces that need no Redis: what a bucket is keyed by, and the once-per-change record of
/// falling back to local limiting.
@Suite struct SharedRateLimitsTests {
    @Test func bucketsAreKeyedByTheHexSHA256OfTheKey() {
        let digest = SharedRateLimits.digest(Array("203.0.113.5".utf8))
        #expect(digest == "440a628a0c975ea32d4db42ca94acebc975ab378b3ee2a692ccf2ecae6038bbd")
        #expect(!digest.contains("203.0.113"))
        // Whatever a trusted proxy reported, the key has one length and no separator.
        let odd = SharedRateLimits.digest(Array("a:b\r\n\u{0}".utf8) + [0xff])
        #expect(odd.utf8.count == 64 && odd.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
    }

    @Test func fallingBackAndRecoveringAreEachToldOncePerChange() {
        let shared = SharedRateLimits(state: StateService(store: MemoryStateStore(), allowWhenUnavailable: false,
                                                          sweepIntervalSeconds: nil))
        let down = StateStoreError(.unavailable, "redis: refused", cause: "refused")
        #expect(!shared.limitingLocally)
        #expect(!shared.answered(), "shared already: nothing to tell")
        #expect(shared.fellBack(down))
        #expect(shared.limitingLocally)
        #expect(!shared.fellBack(down), "still local: told once")
        #expect(!shared.fellBack(StateStoreError(.timeout, "redis: timeout")))
        #expect(shared.answered())
        #expect(!shared.limitingLocally)
        #expect(!shared.answered())
        #expect(shared.fellBack(down), "a new outage is a new change")
    }
}
