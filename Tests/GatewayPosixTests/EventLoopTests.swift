import GatewayPosix
import Testing

/// `EventLoop.execute` across threads: tasks run on the loop, and a loop that has stopped keeps none.
@Suite struct EventLoopTests {
    /// Set on the loop's thread, read after joining it (`@unchecked`: the join orders the two).
    final class Flag: @unchecked Sendable { var value = false }
    /// Captured by a task; gone once the task is released.
    final class Probe: Sendable {}

    @Test func aTaskHandedOverBeforeRunRunsOnTheLoop() throws {
        let loop = try EventLoop(index: 0)
        let ran = Flag()
        loop.execute {
            ran.value = true
            loop.stop()
        }
        Threads.join(Threads.start { loop.run() })
        #expect(ran.value)
    }

    /// ServeCommand sends its drain-timeout step to every loop, including ones that already finished: such a task
    /// used to stay queued forever, keeping what it captured (there: the worker, and through it the loop).
    @Test func aTaskHandedToAStoppedLoopIsReleasedNotKept() throws {
        let loop = try EventLoop(index: 0)
        loop.execute { loop.stop() }
        Threads.join(Threads.start { loop.run() })

        weak var released: Probe?
        let ran = Flag()
        do {
            let probe = Probe()
            released = probe
            loop.execute {
                _ = probe
                ran.value = true
            }
        }
        #expect(released == nil)
        #expect(!ran.value)
    }
}
