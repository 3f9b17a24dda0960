import Foundation
import GatewayCore
import Synchronization

/// Runs a closure on `threads` real OS threads, in `rounds` that start together: before each round every thread
/// spins at a barrier until all have arrived, so each round's calls truly contend (on a 2-core machine, at least
/// two at a time). Real threads, not tasks: the stores block, and the point is contention.
enum ThreadRace {
    private final class Shared<T: Sendable>: Sendable {
        let arrived = Atomic<Int>(0)
        let results: AnnotatedMutex<[Int: Result<[T], any Error>]> = AnnotatedMutex([:])
        let done = DispatchSemaphore(value: 0)
    }

    /// Returns each thread's results, indexed `[thread][round]`. A thread that throws stops taking part, so the
    /// others' barrier waits would never end: it keeps arriving at the remaining barriers before rethrowing.
    static func run<T: Sendable>(
        threads: Int, rounds: Int, _ body: @escaping @Sendable (_ thread: Int, _ round: Int) throws -> T
    ) throws -> [[T]] {
        let shared = Shared<T>()
        for index in 0..<threads {
            let thread = Thread {
                var values: [T] = []
                var failure: (any Error)?
                for round in 0..<rounds {
                    shared.arrived.add(1, ordering: .acquiringAndReleasing)
                    while shared.arrived.load(ordering: .acquiring) < threads * (round + 1) { sched_yield() }
                    guard failure == nil else { continue }
                    do { values.append(try body(index, round)) } catch { failure = error }
                }
                let result: Result<[T], any Error> = failure.map { .failure($0) } ?? .success(values)
                shared.results.withLock { $0[index] = result }
                shared.done.signal()
            }
            thread.start()
        }
        for _ in 0..<threads { shared.done.wait() }
        let results = shared.results.withLock { $0 }
        return try (0..<threads).map { try results[$0]!.get() }
    }

    /// One round: each thread's single result.
    static func run<T: Sendable>(threads: Int, _ body: @escaping @Sendable (_ thread: Int) throws -> T) throws -> [T] {
        try run(threads: threads, rounds: 1) { thread, _ in try body(thread) }.map { $0[0] }
    }
}

/// A fresh folder under the system temp directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        let base = NSTemporaryDirectory() + "attest-gateway-state-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        path = base
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Whether a file or folder exists at `relative` inside this directory.
    func contains(_ relative: String, isDirectory expected: Bool) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path + "/" + relative, isDirectory: &isDirectory)
            && isDirectory.boolValue == expected
    }
}
