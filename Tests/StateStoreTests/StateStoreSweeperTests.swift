import GatewayCore
import StateStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The background sweeper: sweeps on its own thread with the injected clock, and stops promptly.
@Suite struct StateStoreSweeperTests {
    @Test func sweepsExpiredValuesInTheBackground() throws {
        let store = MemoryStateStore()
        #expect(try store.consumeOnce(namespace: "jti", key: "old", expiresAt: 100, now: 0))
        #expect(try store.consumeOnce(namespace: "jti", key: "live", expiresAt: 10_000, now: 0))
        let swept = AnnotatedMutex<[Int]>([])
        let sweeper = StateStoreSweeper(store: store, intervalSeconds: 0.01, clock: { 500 }, report: { result in
            if case .success(let count) = result { swept.withLock { $0.append(count) } }
        })
        sweeper.start()
        sweeper.start()  // a second start is a no-op
        let deadline = ContinuousClock.now + .seconds(5)
        while swept.withLock({ $0.count < 3 }) && ContinuousClock.now < deadline {
            usleepMillis(5)
        }
        #expect(sweeper.stop())
        let counts = swept.withLock { $0 }
        #expect(counts.first == 1)
        #expect(counts.dropFirst().allSatisfy { $0 == 0 })
        #expect(try !store.consumeOnce(namespace: "jti", key: "live", expiresAt: 10_000, now: 500))
    }

    @Test func stopWakesALongSleepAtOnce() {
        let sweeper = StateStoreSweeper(store: MemoryStateStore(), intervalSeconds: 3_600)
        sweeper.start()
        let started = ContinuousClock.now
        #expect(sweeper.stop(timeoutMillis: 2_000))
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test func stopWithoutStartReturnsAtOnce() {
        let sweeper = StateStoreSweeper(store: MemoryStateStore(), intervalSeconds: 1)
        #expect(sweeper.stop())
        sweeper.start()  // after stop: does nothing
        #expect(sweeper.stop(timeoutMillis: 0))
    }
}

private func usleepMillis(_ millis: Int) {
    var remaining = timespec(tv_sec: 0, tv_nsec: millis * 1_000_000)
    nanosleep(&remaining, nil)
}
