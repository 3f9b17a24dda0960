import Foundation
import FuzzHarness
import Testing

/// Every seed input and every saved fuzz finding runs through its harness on each `make test`, so a fixed crash
/// stays fixed. A regression traps (the whole test process stops with the harness's message); replay the
/// target's directories with `swift run GatewayFuzz --target=NAME Tests/Fuzz/Regressions/NAME` to see which input.
@Suite("Fuzz corpus replay")
struct CorpusReplayTests {
    /// Tests/Fuzz, found from this file so the tests do not depend on the working directory.
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz").path

    @Test(arguments: FuzzTarget.allCases)
    func seedCorpusAndSavedFindingsReplayWithoutTrapping(_ target: FuzzTarget) throws {
        let seeds = FuzzReplay.files(under: "\(Self.fuzzDirectory)/Corpus/\(target.name)")
        let findings = FuzzReplay.files(under: "\(Self.fuzzDirectory)/Regressions/\(target.name)")
        #expect(seeds.count >= 5, "the seed corpus of \(target.name) is missing")
        for path in seeds + findings {
            let data = try #require(FuzzReplay.contents(of: path), "cannot read \(path)")
            target.run(data)
        }
    }

    @Test func everyTargetHasACorpusDirectoryAndNoOtherDirectoryExists() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(Self.fuzzDirectory)/Corpus")
        #expect(Set(names) == Set(FuzzTarget.allCases.map(\.name)))
    }
}
