#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
import KeySetCache
import Testing

/// Records events from the refresher thread.
final class EventLog: Sendable {
    private let events = AnnotatedMutex<[KeySetEvent]>([])
    var all: [KeySetEvent] { events.withLock { $0 } }
    var record: @Sendable (KeySetEvent) -> Void { { event in self.events.withLock { $0.append(event) } } }
}

/// Polls `condition` every 10 ms for at most `seconds`; returns whether it became true.
func eventually(within seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicSeconds() + seconds
    while monotonicSeconds() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

@Suite struct KeySetRefresherTests {
    @Test func refresherLoadsOnceAndStopEndsIt() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a")])
        let events = EventLog()
        let cache = makeCache(fetch, clock: clock, onEvent: events.record)
        cache.startRefresher()
        #expect(eventually { cache.isReady })
        usleep(300_000)
        #expect(fetch.calls == 1)
        let before = monotonicSeconds()
        cache.stop()
        #expect(monotonicSeconds() - before < 2)
        #expect(events.all == [.loaded(keys: 1, lifetimeSeconds: 21_600)])
    }

    @Test func unknownKeyWakesTheRefresher() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a"), keys("a,b")])
        let cache = makeCache(fetch, clock: clock)
        cache.startRefresher()
        defer { cache.stop() }
        #expect(eventually { cache.isReady })
        #expect(cache.noteUnknownKey())
        #expect(eventually { cache.current().keySet == ["a", "b"] })
        #expect(fetch.calls == 2)
    }

    @Test func refresherCanRestartAfterStop() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100)])
        let cache = makeCache(fetch, clock: clock)
        cache.startRefresher()
        #expect(eventually { fetch.calls == 1 })
        cache.stop()
        clock.advance(80)
        cache.startRefresher()
        #expect(eventually { fetch.calls == 2 })
        cache.stop()
        cache.stop()  // a second stop is harmless
    }

    @Test func fileSourceReadsTheFile() throws {
        let path = "/tmp/keysetcache-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        let content = Array("k1,k2,k3".utf8)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        _ = content.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        defer { unlink(path) }
        let fetched = try KeySetSources.file(path: path)()
        #expect(fetched.body == content)
        #expect(fetched.maxAgeSeconds == nil)
        #expect(throws: KeySetSourceError.self) { try KeySetSources.file(path: path, maxBytes: 4)() }
        #expect(throws: KeySetSourceError.self) { try KeySetSources.file(path: path + ".missing")() }
        let cache = TestCache(policy: .init(), clock: ManualClock().closure, fetch: KeySetSources.file(path: path),
                              parse: parseTestKeySet)
        #expect(cache.refreshIfDue() == .loaded(keys: 3, lifetimeSeconds: 21_600))
    }

    @Test func adaptedHTTPFetchCarriesCacheControl() throws {
        let fetch = KeySetSources.adapting { (body: Array("a".utf8), cacheControl: "public, max-age=120") }
        #expect(try fetch().maxAgeSeconds == 120)
    }
}
