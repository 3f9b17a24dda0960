import KeySetCache
import Testing

@Suite struct KeySetCacheTests {
    @Test func notReadyBeforeFirstLoad() {
        let clock = ManualClock()
        let cache = makeCache(ScriptedFetch([keys("a")]), clock: clock)
        #expect(!cache.isReady)
        #expect(cache.current().label == "unavailable")
        #expect(cache.nextRefreshAt == clock.now)  // the first load is due at once
    }

    @Test func firstLoadServesTheSet() {
        let clock = ManualClock()
        let cache = makeCache(ScriptedFetch([keys("a,b")]), clock: clock)
        #expect(cache.refreshIfDue() == .loaded(keys: 2, lifetimeSeconds: 21_600))
        #expect(cache.isReady)
        #expect(cache.current().label == "ready")
        #expect(cache.current().keySet == ["a", "b"])
    }

    @Test func advertisedMaxAgeBelowThePolicyCapWins() {
        let clock = ManualClock()
        let cache = makeCache(ScriptedFetch([keys("a", maxAge: 100)]), clock: clock, policy: .init(maxAgeSeconds: 300))
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 100))
    }

    @Test func policyCapWinsOverALongerMaxAge() {
        let clock = ManualClock()
        let cache = makeCache(ScriptedFetch([keys("a", maxAge: 100_000)]), clock: clock, policy: .init(maxAgeSeconds: 300))
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 300))
    }

    @Test func policyMaxAgeIsCappedAtSixHours() {
        #expect(TestCache.Policy(maxAgeSeconds: 100_000).maxAgeSeconds == 21_600)
    }

    @Test func noStoreGetsTheMinimumLifetime() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([.success(KeySetFetch(body: Array("a".utf8), cacheControl: "no-store"))])
        let cache = makeCache(fetch, clock: clock)
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 60))
    }

    @Test func cacheControlParsing() {
        #expect(KeySetFetch.maxAge(fromCacheControl: nil) == nil)
        #expect(KeySetFetch.maxAge(fromCacheControl: "public, max-age=19794, must-revalidate, no-transform") == 19_794)
        #expect(KeySetFetch.maxAge(fromCacheControl: "Max-Age=60") == 60)
        #expect(KeySetFetch.maxAge(fromCacheControl: "max-age=\"30\"") == 30)
        #expect(KeySetFetch.maxAge(fromCacheControl: "s-maxage=10, public") == nil)
        #expect(KeySetFetch.maxAge(fromCacheControl: "max-age=-5") == nil)
        #expect(KeySetFetch.maxAge(fromCacheControl: "max-age=abc") == nil)
        #expect(KeySetFetch.maxAge(fromCacheControl: "max-age=600, no-cache") == 0)
        #expect(KeySetFetch.maxAge(fromCacheControl: "no-store") == 0)
        #expect(KeySetFetch.maxAge(fromCacheControl: "max-age=99999999999999999999999") == Int.max)
    }

    @Test func refreshHappensAfterEightyPercentOfTheLifetime() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100), keys("b", maxAge: 100)])
        let cache = makeCache(fetch, clock: clock)
        let start = clock.now
        cache.refreshIfDue()
        #expect(cache.nextRefreshAt == start + 80)
        clock.advance(79)
        #expect(cache.refreshIfDue() == .notDue)
        #expect(fetch.calls == 1)
        clock.advance(1)
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 100))
        #expect(cache.current().keySet == ["b"])
        #expect(cache.nextRefreshAt == start + 160)
    }

    @Test func failureKeepsTheOldSetThenStaleThenUnavailable() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100), failure()])
        let cache = makeCache(fetch, clock: clock)
        let start = clock.now
        cache.refreshIfDue()
        clock.set(start + 80)
        #expect(cache.refreshIfDue() == .failed("connect: refused"))
        #expect(cache.current().label == "ready")
        #expect(cache.current().keySet == ["a"])
        clock.set(start + 100)
        #expect(cache.current().label == "stale")
        #expect(cache.current().keySet == ["a"])
        #expect(cache.isReady)
        clock.set(start + 100 + 3_599)
        #expect(cache.current().label == "stale")
        clock.set(start + 100 + 3_600)
        #expect(cache.current().label == "unavailable")
        #expect(!cache.isReady)
    }

    @Test func aLaterSuccessEndsStaleness() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100), failure(), keys("b", maxAge: 100)])
        let cache = makeCache(fetch, clock: clock)
        cache.refreshIfDue()
        clock.advance(100)
        cache.refreshIfDue()
        #expect(cache.current().label == "stale")
        clock.advance(5)
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 100))
        #expect(cache.current().label == "ready")
        #expect(cache.current().keySet == ["b"])
    }

    @Test func retriesBackOffFromFiveSecondsToFiveMinutes() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([failure()])
        let cache = makeCache(fetch, clock: clock)
        var delays: [Int64] = []
        for _ in 0..<9 {
            let before = clock.now
            #expect(cache.refreshIfDue() == .failed("connect: refused"))
            let due = cache.nextRefreshAt
            delays.append(due - before)
            clock.set(due - 1)
            #expect(cache.refreshIfDue() == .notDue)
            clock.set(due)
        }
        #expect(delays == [5, 10, 20, 40, 80, 160, 300, 300, 300])
        fetch.then(keys("a", maxAge: 100), failure())
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 100))
        clock.advance(80)
        let before = clock.now
        cache.refreshIfDue()
        #expect(cache.nextRefreshAt - before == 5)  // a success resets the backoff
    }

    @Test func unknownKeyRefreshesAtMostOncePerThirtySeconds() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a"), keys("a,b"), keys("a,b,c")])
        let cache = makeCache(fetch, clock: clock)
        cache.refreshIfDue()
        clock.advance(10)
        #expect(cache.refreshIfDue() == .notDue)
        #expect(cache.noteUnknownKey())
        #expect(cache.nextRefreshAt <= clock.now)
        #expect(cache.refreshIfDue() == .loaded(keys: 2, lifetimeSeconds: 21_600))
        clock.advance(29)
        #expect(!cache.noteUnknownKey())
        #expect(cache.refreshIfDue() == .notDue)
        #expect(fetch.calls == 2)
        clock.advance(1)
        #expect(cache.noteUnknownKey())
        #expect(cache.refreshIfDue() == .loaded(keys: 3, lifetimeSeconds: 21_600))
        #expect(fetch.calls == 3)
    }

    @Test func failedUnknownKeyRefreshDoesNotPullTheScheduleForward() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 1_000), failure()])
        let cache = makeCache(fetch, clock: clock)
        let start = clock.now
        cache.refreshIfDue()
        clock.advance(10)
        cache.noteUnknownKey()
        #expect(cache.refreshIfDue() == .failed("connect: refused"))
        #expect(cache.nextRefreshAt == start + 800)
        #expect(cache.current().keySet == ["a"])
    }

    @Test func parseErrorCountsAsAFailure() {
        let clock = ManualClock()
        let events = EventLog()
        let fetch = ScriptedFetch([keys("a"), keys("bad")])
        let cache = makeCache(fetch, clock: clock, onEvent: events.record)
        cache.refreshIfDue()
        #expect(cache.refreshIfDue(force: true) == .failed("parse error"))
        #expect(cache.current().keySet == ["a"])
        #expect(cache.nextRefreshAt == clock.now + 21_600 * 8 / 10)
        #expect(events.all == [.loaded(keys: 1, lifetimeSeconds: 21_600), .failed("parse error")])
    }

    @Test func parseErrorOnFirstLoadLeavesTheCacheUnready() {
        let clock = ManualClock()
        let cache = makeCache(ScriptedFetch([keys("bad")]), clock: clock)
        #expect(cache.refreshIfDue() == .failed("parse error"))
        #expect(!cache.isReady)
        #expect(cache.nextRefreshAt == clock.now + 5)
    }
}
