import Testing
@testable import GatewayProxy

/// The process-wide budget for held bodies: reservations add up across requests and are given back when a body goes.
@Suite struct HeldBodyBudgetTests {
    @Test func reservationsStopAtTheLimitAndComeBack() {
        let budget = HeldBodyBudget(limit: 1000)
        var a: HeldBody? = HeldBody(budget: budget)
        #expect(a!.reserve(total: 600))
        let b = HeldBody(budget: budget)
        #expect(!b.reserve(total: 600))   // would be 1200
        #expect(budget.bytesHeld == 600)
        a = nil
        #expect(budget.bytesHeld == 0)
        #expect(b.reserve(total: 600))
    }

    @Test func chunkedAppendsAreCountedAndRefusedPastTheLimit() {
        let budget = HeldBodyBudget(limit: 4096)
        let held = HeldBody(budget: budget)
        let chunk = [UInt8](repeating: 7, count: 1000)
        var appended = 0
        for _ in 0..<10 {
            guard chunk.withUnsafeBytes({ held.append($0) }) else { break }
            appended += 1
        }
        #expect(appended >= 2 && appended <= 4)
        #expect(held.bytes.count == appended * 1000)
        #expect(budget.bytesHeld <= 4096 && budget.bytesHeld >= held.bytes.count)
    }
}
