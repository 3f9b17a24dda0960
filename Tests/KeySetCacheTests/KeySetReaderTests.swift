#if canImport(Glibc)
import Glibc
#endif
import GatewayCore
@testable import KeySetCache
import Synchronization
import Testing

/// Whether two answers are the same state with the same set.
func same(_ a: KeySetState<TestKeySet>, _ b: KeySetState<TestKeySet>) -> Bool {
    a.label == b.label && a.keySet == b.keySet
}

/// Runs each body on its own POSIX thread (all started before any is joined) and waits for all of them.
func runOnThreads(_ bodies: [@Sendable () -> Void]) {
    var threads: [pthread_t] = []
    for body in bodies {
        let box = Unmanaged.passRetained(ThreadBox(body)).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(&handle, nil, { argument in
            Unmanaged<ThreadBox>.fromOpaque(argument!).takeRetainedValue().body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        threads.append(handle)
    }
    for thread in threads { pthread_join(thread, nil) }
}

private final class ThreadBox {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Holds threads until all have arrived, and tells the readers when the writer is done, so they overlap.
private final class Race: Sendable {
    private let arrived = Atomic<Int>(0)
    private let done = Atomic<Bool>(false)
    private let count: Int
    init(threads: Int) { count = threads }
    func start() {
        arrived.add(1, ordering: .relaxed)
        while arrived.load(ordering: .relaxed) < count { sched_yield() }
    }
    func writerFinished() { done.store(true, ordering: .releasing) }
    var isWriterFinished: Bool { done.load(ordering: .acquiring) }
}

/// A fetch that returns the set ["k1"], then ["k2"], ... (the number counts the fetches).
private final class CountingFetch: Sendable {
    private let fetches = AnnotatedMutex(0)
    var closure: @Sendable () throws -> KeySetFetch {
        { KeySetFetch(body: Array("k\(self.fetches.withLock { $0 += 1; return $0 })".utf8), maxAgeSeconds: nil) }
    }
}

@Suite struct KeySetReaderTests {
    @Test func readerAgreesWithCurrentThroughTheLifecycle() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100), failure()])
        let cache = makeCache(fetch, clock: clock)
        let start = clock.now
        let reader = cache.makeReader()  // before the first load
        #expect(same(reader.current(), cache.current()))
        #expect(reader.current().label == "unavailable")

        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 100))
        #expect(same(reader.current(), cache.current()))
        #expect(reader.current().keySet == ["a"])
        let loadedVersion = reader.version

        // Every second through the lifetime, the grace and past it, the refresher failing with back-off
        // (due at +80, then 5, 10, 20, ... s later): ready below 100 s, stale below 3,700 s, then unavailable.
        var failedAt: [Int64] = []
        for t in Int64(0)...3_800 {
            clock.set(start + t)
            if case .failed = cache.refreshIfDue() { failedAt.append(t) }
            let expected = t < 100 ? "ready" : t < 3_700 ? "stale" : "unavailable"
            let answer = reader.current()
            #expect(same(answer, cache.current()), "at +\(t) s")
            #expect(answer.label == expected, "at +\(t) s")
            if t < 3_700 { #expect(answer.keySet == ["a"], "at +\(t) s") }
        }
        #expect(failedAt == [80, 85, 95, 115, 155, 235, 395] + Array(stride(from: 695, through: 3_695, by: 300)))
        #expect(reader.version == loadedVersion)  // failures change nothing a reader sees

        // A reload ends the outage with the new set.
        fetch.then(keys("b", maxAge: 100))
        #expect(cache.refreshIfDue(force: true) == .loaded(keys: 1, lifetimeSeconds: 100))
        #expect(same(reader.current(), cache.current()))
        #expect(reader.current().label == "ready")
        #expect(reader.current().keySet == ["b"])
        #expect(reader.version == loadedVersion + 1)
        clock.advance(100)
        #expect(same(reader.current(), cache.current()))
        #expect(reader.current().label == "stale")
    }

    @Test func readerSeesANewSetOnTheFirstCallAfterARefresh() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a"), keys("a,b"), keys("c")])
        let cache = makeCache(fetch, clock: clock)
        cache.refreshIfDue()
        let reader = cache.makeReader()
        #expect(reader.current().keySet == ["a"])
        #expect(cache.refreshIfDue(force: true) == .loaded(keys: 2, lifetimeSeconds: 21_600))
        #expect(reader.current().keySet == ["a", "b"])
        // The unknown-kid path: noted on the request path, installed by the refresher.
        #expect(cache.noteUnknownKey())
        #expect(reader.current().keySet == ["a", "b"])
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 21_600))
        #expect(reader.current().keySet == ["c"])
        // A reader made later starts from the same set; readers are independent of each other.
        let other = cache.makeReader()
        #expect(other.current().keySet == ["c"])
        #expect(other.version == reader.version)
    }

    @Test func fastPathTakesNoLock() {
        let clock = ManualClock()
        let fetch = ScriptedFetch([keys("a", maxAge: 100), failure(), keys("b")])
        let cache = makeCache(fetch, clock: clock)
        cache.refreshIfDue()
        let reader = cache.makeReader()
        var locks = cache.lockAcquisitions
        for _ in 0..<1_000 { #expect(reader.current().keySet == ["a"]) }
        #expect(cache.lockAcquisitions == locks)  // none at all: makeReader took the snapshot

        // Time alone moves the state (ready → stale → unavailable) without a new snapshot.
        clock.advance(100)
        #expect(reader.current().label == "stale")
        clock.advance(3_600)
        #expect(reader.current().label == "unavailable")
        #expect(cache.lockAcquisitions == locks)

        // Neither a failed refresh nor an unknown-kid note changes what readers see: still no lock.
        #expect(cache.refreshIfDue(force: true) == .failed("connect: refused"))
        #expect(cache.noteUnknownKey())
        locks = cache.lockAcquisitions
        #expect(reader.current().label == "unavailable")
        #expect(cache.lockAcquisitions == locks)

        // A new set: one lock on the first call after it, then none again.
        #expect(cache.refreshIfDue(force: true) == .loaded(keys: 1, lifetimeSeconds: 21_600))
        locks = cache.lockAcquisitions
        #expect(reader.current().keySet == ["b"])
        #expect(cache.lockAcquisitions == locks + 1)
        for _ in 0..<1_000 { #expect(reader.current().keySet == ["b"]) }
        #expect(cache.lockAcquisitions == locks + 1)
    }

    /// One thread installs 2,000 sets while two readers (one each, as event loops would) ask at least 200,000
    /// times and until the writer is done: every answer is a set that was installed, each reader's versions and
    /// sets only move forward, a reader's first call after the writer is done sees the last set, and the readers
    /// take the lock only on a change. Also run under ThreadSanitizer (scripts/sanitize.sh).
    @Test func concurrentRefreshesAndReaders() {
        let refreshes = 2_000
        let calls = 200_000
        let cache = TestCache(policy: .init(), clock: { 1_700_000_000 }, fetch: CountingFetch().closure,
                              parse: parseTestKeySet)
        #expect(cache.refreshIfDue() == .loaded(keys: 1, lifetimeSeconds: 21_600))  // ["k1"]
        let locksBefore = cache.lockAcquisitions
        let problems = AnnotatedMutex<[String]>([])
        let readersFinished = AnnotatedMutex(0)
        let race = Race(threads: 3)

        let writer: @Sendable () -> Void = {
            race.start()
            defer { race.writerFinished() }
            for _ in 0..<refreshes {
                guard case .loaded = cache.refreshIfDue(force: true) else {
                    problems.withLock { $0.append("a forced refresh did not load") }
                    return
                }
            }
        }
        let reader: @Sendable () -> Void = {
            let reader = cache.makeReader()
            race.start()
            var lastVersion = reader.version
            var lastSet = 1
            var call = 0
            var writerWasDone = false
            while call < calls || !writerWasDone {
                call += 1
                writerWasDone = race.isWriterFinished
                let answer = reader.current()
                guard case .ready(let set) = answer, set.count == 1, set[0].hasPrefix("k"),
                      let number = Int(set[0].dropFirst()), (1...refreshes + 1).contains(number) else {
                    problems.withLock { $0.append("not an installed set: \(answer)") }
                    return
                }
                guard reader.version >= lastVersion, number >= lastSet else {
                    problems.withLock { $0.append("went back: version \(lastVersion) → \(reader.version), k\(lastSet) → k\(number)") }
                    return
                }
                // The n-th set installed is kN and serving version n: the snapshot a reader holds is the one its
                // version names.
                if reader.version != UInt64(number) {
                    problems.withLock { $0.append("k\(number) held as version \(reader.version)") }
                    return
                }
                if writerWasDone && number != refreshes + 1 {
                    problems.withLock { $0.append("k\(number) after the writer finished") }
                    return
                }
                lastVersion = reader.version
                lastSet = number
            }
            readersFinished.withLock { $0 += 1 }
        }
        runOnThreads([writer, reader, reader])

        #expect(problems.withLock { $0 } == [])
        #expect(readersFinished.withLock { $0 } == 2)
        // The writer takes 2 locks per refresh; each reader one to start and at most one per set installed
        // after that — far below one per call.
        let locks = cache.lockAcquisitions - locksBefore
        #expect(locks <= UInt64(2 * refreshes + 2 * (1 + refreshes)), "\(locks) lock acquisitions")
        let last = cache.makeReader()
        #expect(last.current().keySet == ["k\(refreshes + 1)"])
        #expect(same(last.current(), cache.current()))
    }
}
