import StateStore
import Synchronization
import Testing

/// Conformance checks for App Attest keys, counters and receipts.
extension StateStoreConformance {
    static func keyRegistration(_ store: any AttestationStateStore, _ run: Run) throws {
        // Names deliberately out of alphabetical order: the list must follow registration, not sorting.
        let zeta = run.key("zeta", app: "app-a", counter: 3)
        let beta = run.key("beta", app: "app-b")
        let alpha = run.key("alpha", app: "app-a")
        for record in [zeta, beta, alpha] {
            #expect(try store.registerKey(record))
        }
        #expect(try store.key(id: zeta.keyID) == zeta)
        #expect(try store.key(id: beta.keyID) == beta)
        #expect(try store.key(id: run.name("unknown")) == nil)
        #expect(try store.keys(appID: run.name("app-a")) == [zeta, alpha])
        #expect(try store.keys(appID: run.name("app-b")) == [beta])
        #expect(try store.keys(appID: run.name("app-unknown")).isEmpty)
    }

    static func duplicateRegistrationKeepsOriginal(_ store: any AttestationStateStore, _ run: Run) throws {
        let original = run.key("key", app: "app-a", counter: 7)
        #expect(try store.registerKey(original))
        var impostor = run.key("key", app: "app-b", counter: 0)
        impostor.publicKey = [0x04, 1, 2, 3]
        impostor.environment = "development"
        #expect(try !store.registerKey(impostor))
        #expect(try !store.registerKey(original))
        #expect(try store.key(id: original.keyID) == original)
        #expect(try store.keys(appID: run.name("app-a")) == [original])
        #expect(try store.keys(appID: run.name("app-b")).isEmpty)
    }

    /// The attestation's extensions come back as registered, by id and by app: all three set, none set (nil, not
    /// empty), and empty values (kept apart from nil). Advancing the counter leaves them alone.
    static func keyAttestationExtensionsRoundTrip(_ store: any AttestationStateStore, _ run: Run) throws {
        var full = run.key("full", app: "app")
        full.validationCategory = [0x01, 0x00, 0x00, 0x00]
        full.bundleVersion = "27.0.1 (1234)"
        // DER-like bytes with a NUL and high bytes, so nothing on the way may treat them as text.
        full.keyAccessControl = [0x30, 0x08, 0x02, 0x01, 0x00, 0x04, 0x03, 0xFF, 0x00, 0x80]
        let none = run.key("none", app: "app")
        var empty = run.key("empty", app: "app")
        empty.validationCategory = []
        empty.bundleVersion = ""
        empty.keyAccessControl = []
        for record in [full, none, empty] {
            #expect(try store.registerKey(record))
        }
        let loaded = try #require(try store.key(id: full.keyID))
        #expect(loaded == full)
        #expect(loaded.validationCategory == [0x01, 0x00, 0x00, 0x00])
        #expect(loaded.bundleVersion == "27.0.1 (1234)")
        #expect(loaded.keyAccessControl == full.keyAccessControl)
        let bare = try #require(try store.key(id: none.keyID))
        #expect(bare.validationCategory == nil && bare.bundleVersion == nil && bare.keyAccessControl == nil)
        #expect(bare == none)
        #expect(try store.key(id: empty.keyID) == empty)
        #expect(try store.keys(appID: run.name("app")) == [full, none, empty])
        #expect(try store.advanceCounter(keyID: full.keyID, to: 1))
        var advanced = full
        advanced.counter = 1
        #expect(try store.key(id: full.keyID) == advanced)
    }

    static func counterCompareAndSet(_ store: any AttestationStateStore, _ run: Run) throws {
        let record = run.key("key", app: "app", counter: 5)
        #expect(try store.registerKey(record))
        #expect(try !store.advanceCounter(keyID: record.keyID, to: 5), "equal fails")
        #expect(try !store.advanceCounter(keyID: record.keyID, to: 4), "smaller fails")
        #expect(try store.advanceCounter(keyID: record.keyID, to: 6))
        #expect(try !store.advanceCounter(keyID: record.keyID, to: 6))
        #expect(try store.advanceCounter(keyID: record.keyID, to: 1_000))
        #expect(try !store.advanceCounter(keyID: record.keyID, to: 999))
        #expect(try store.key(id: record.keyID)?.counter == 1_000)
        #expect(try store.advanceCounter(keyID: record.keyID, to: .max), "the full UInt32 range is stored")
        #expect(try store.key(id: record.keyID)?.counter == .max)
        #expect(try !store.advanceCounter(keyID: run.name("unknown"), to: 1), "unknown key fails")
        #expect(try store.key(id: run.name("unknown")) == nil, "and is not created")
    }

    /// 16 threads advance one key through shuffled distinct values. Linearizability, observed from outside: when
    /// one success returned before another began, the later one stored a greater value; and the final counter is
    /// the largest value tried (that call cannot have lost).
    static func concurrentCounterAdvance(_ store: any AttestationStateStore, _ run: Run) throws {
        struct Attempt: Sendable {
            let value: UInt32, succeeded: Bool, started: Int, ended: Int
        }
        let record = run.key("key", app: "app")
        #expect(try store.registerKey(record))
        let perThread = 20
        let values = Array(UInt32(1)...UInt32(threads * perThread)).shuffled()
        let ticket = Ticket()
        let attempts = try ThreadRace.run(threads: threads, rounds: perThread) { thread, round in
            let value = values[thread * perThread + round]
            let started = ticket.next()
            let succeeded = try store.advanceCounter(keyID: record.keyID, to: value)
            return Attempt(value: value, succeeded: succeeded, started: started, ended: ticket.next())
        }.flatMap { $0 }
        let successes = attempts.filter(\.succeeded)
        #expect(try store.key(id: record.keyID)?.counter == values.max())
        #expect(successes.contains { $0.value == values.max() })
        var violations = 0
        for earlier in successes {
            for later in successes where earlier.ended < later.started && later.value <= earlier.value {
                violations += 1
            }
        }
        #expect(violations == 0, "a success stored a value not above an earlier success")
    }

    /// `advanceCounters(batch:)` through the existential (what the gateway calls): each result means what one
    /// `advanceCounter` would, applied in order — a repeat or a lower value after a higher one in the same batch
    /// fails, an unknown key fails and is not created — also across the chunks a backend splits 300 into.
    static func batchCounterAdvance(_ store: any AttestationStateStore, _ run: Run) throws {
        let a = run.key("a", app: "app", counter: 5), b = run.key("b", app: "app"), c = run.key("c", app: "app", counter: 10)
        for record in [a, b, c] { #expect(try store.registerKey(record)) }
        let unknown = run.name("unknown")
        let plan: [(AttestedKeyRecord?, Int)] = [(a, 6), (a, 6), (a, 7), (b, 1), (nil, 1), (c, 9), (a, 5), (c, 11)]
        let small = plan.map { key, counter in
            CounterAdvance(keyID: key?.keyID ?? unknown, counter: UInt32(counter))
        }
        #expect(store.advanceCounters(batch: small).map { try? $0.get() } == [true, false, true, true, false, false, false, true])
        #expect(try store.key(id: a.keyID)?.counter == 7)
        #expect(try store.key(id: b.keyID)?.counter == 1)
        #expect(try store.key(id: c.keyID)?.counter == 11)
        #expect(try store.key(id: unknown) == nil, "an unknown key is not created")
        // 300 advances over the three keys, each key's values rising but every 40th repeating the one before.
        var stored = [a.keyID: UInt32(7), b.keyID: 1, c.keyID: 11]
        var big: [CounterAdvance] = [], expected: [Bool] = []
        for i in 0..<300 {
            let keyID = [a, b, c][i % 3].keyID
            let counter = i % 40 == 39 ? stored[keyID]! : stored[keyID]! + UInt32(1 + i % 2)
            big.append(CounterAdvance(keyID: keyID, counter: counter))
            expected.append(counter > stored[keyID]!)
            stored[keyID] = max(stored[keyID]!, counter)
        }
        #expect(store.advanceCounters(batch: big).map { try? $0.get() } == expected)
        for record in [a, b, c] { #expect(try store.key(id: record.keyID)?.counter == stored[record.keyID]) }
        #expect(store.advanceCounters(batch: []).isEmpty)
        #expect(store.advanceCounters(batch: [big[0]]).map { try? $0.get() } == [false])
        #expect(store.advanceCounters(batch: [CounterAdvance(keyID: a.keyID, counter: stored[a.keyID]! + 1)]).map { try? $0.get() } == [true])
    }

    /// 8 threads each advance the same 20 keys through 1…10 (200 advances in one batch, each thread in its own
    /// order): no value is stored twice for a key, each key ends at 10, and within a batch a key's successes rise.
    static func concurrentCounterBatches(_ store: any AttestationStateStore, _ run: Run) throws {
        let records = (0..<20).map { run.key("k\($0)", app: "app") }
        for record in records { #expect(try store.registerKey(record)) }
        let work = records.indices.flatMap { k in (1...10).map { (key: k, value: UInt32($0)) } }
        let outcomes = try ThreadRace.run(threads: 8) { _ -> [(key: Int, value: UInt32, won: Bool)] in
            let order = work.shuffled()
            let results = store.advanceCounters(batch: order.map { CounterAdvance(keyID: records[$0.key].keyID, counter: $0.value) })
            return zip(order, results).map { ($0.key, $0.value, (try? $1.get()) == true) }
        }
        var winners: [String: Int] = [:]
        for batch in outcomes {
            var highest = [Int: UInt32]()
            for o in batch where o.won {
                winners["\(o.key).\(o.value)", default: 0] += 1
                #expect(o.value > highest[o.key, default: 0], "a success in a batch below an earlier one for its key")
                highest[o.key] = o.value
            }
        }
        #expect(winners.values.allSatisfy { $0 == 1 }, "a value stored twice for one key")
        for record in records { #expect(try store.key(id: record.keyID)?.counter == 10) }
    }

    static func receipts(_ store: any AttestationStateStore, _ run: Run) throws {
        let keyID = run.name("key")
        #expect(try store.receipt(keyID: keyID) == nil)
        let first = ReceiptRecord(receipt: [0x30, 0x80, 0x00, 0xFF], riskMetric: 3, createdAt: run.now - 100,
                                  notBefore: run.now + 86_400, lastUsedAt: run.now)
        try store.putReceipt(keyID: keyID, first)
        #expect(try store.receipt(keyID: keyID) == first)
        let second = ReceiptRecord(receipt: Array(repeating: 0xAB, count: 4_096), riskMetric: nil,
                                   createdAt: run.now, notBefore: nil, lastUsedAt: run.now + 5)
        try store.putReceipt(keyID: keyID, second)
        #expect(try store.receipt(keyID: keyID) == second, "put replaces")
        #expect(try store.receipt(keyID: run.name("other")) == nil)
    }
}

/// A global order of events across threads (an atomic ticket counter).
private final class Ticket: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .sequentiallyConsistent).newValue }
}
