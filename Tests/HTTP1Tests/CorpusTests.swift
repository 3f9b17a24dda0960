import Foundation
import HTTP1
import Testing

/// One line of Corpus/manifest.tsv (see Corpus/make_corpus.py for the columns).
struct CorpusCase: Sendable, CustomTestStringConvertible {
    var file: String
    var expect: String
    var status: Int?
    var messages: Int
    var bodies: [Int]
    var keepAlive: [Bool]
    var framing: [String]
    var testDescription: String { file }

    static let all: [CorpusCase] = load()

    static var corpusURL: URL {
        Bundle.module.url(forResource: "Corpus", withExtension: nil)!
    }

    private static func load() -> [CorpusCase] {
        guard let text = try? String(contentsOf: corpusURL.appendingPathComponent("manifest.tsv"), encoding: .utf8)
        else { return [] }
        func list(_ s: Substring) -> [Substring] { s == "-" || s.isEmpty ? [] : s.split(separator: ",") }
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { line in
            let c = line.split(separator: "\t", omittingEmptySubsequences: false)
            return CorpusCase(
                file: String(c[0]), expect: String(c[1]), status: Int(c[2]), messages: Int(c[3])!,
                bodies: list(c[4]).map { Int($0)! }, keepAlive: list(c[5]).map { $0 == "1" },
                framing: list(c[6]).map(String.init))
        }
    }

    func data() throws -> [UInt8] {
        [UInt8](try Data(contentsOf: CorpusCase.corpusURL.appendingPathComponent(file)))
    }
}

/// The label the manifest uses for a framing.
func framingLabel(_ f: HTTP1BodyFraming) -> String {
    switch f {
    case .none: "none"
    case .contentLength(let n): "cl\(n)"
    case .chunked: "chunked"
    case .untilClose: "close"
    }
}

@Suite("Request corpus")
struct CorpusTests {
    @Test func corpusHasAtLeastSixtyCasesOfEachKind() {
        #expect(CorpusCase.all.filter { $0.expect == "ok" }.count >= 60)
        #expect(CorpusCase.all.filter { $0.expect != "ok" }.count >= 60)
    }

    @Test func everyCorpusFileIsInTheManifest() throws {
        let listed = Set(CorpusCase.all.map(\.file))
        for dir in ["valid", "malformed"] {
            let names = try FileManager.default.contentsOfDirectory(
                atPath: CorpusCase.corpusURL.appendingPathComponent(dir).path)
            for name in names { #expect(listed.contains("\(dir)/\(name)"), "unlisted \(dir)/\(name)") }
        }
    }

    @Test(arguments: CorpusCase.all)
    func corpusCaseMatchesManifestForEverySplit(_ c: CorpusCase) throws {
        let input = try c.data()
        let whole = parseRequests(input, split: .whole)
        check(whole, against: c)
        for split in [Split.byteByByte, .random] {
            let other = parseRequests(input, split: split)
            #expect(other == whole, "\(split) differs from whole")
        }
    }

    /// Seeded byte mutations of every corpus file: no crash, and the same outcome for every split.
    @Test func mutatedCorpusInputsParseTheSameForEverySplit() throws {
        var rng = SeededGenerator(seed: 0xF022)
        let interesting: [UInt8] = [0, 9, 10, 13, 32, 44, 58, 59, 48, 70, 127, 200]
        for c in CorpusCase.all {
            let original = try c.data()
            guard !original.isEmpty, original.count < 10_000 else { continue }
            for _ in 0..<8 {
                var input = original
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let at = Int.random(in: 0..<input.count, using: &rng)
                    input[at] = interesting.randomElement(using: &rng)!
                }
                let whole = parseRequests(input, split: .whole)
                #expect(whole.violations.isEmpty, "\(c.file)")
                #expect(parseRequests(input, split: .random) == whole, "\(c.file) mutated: random split differs")
                #expect(parseRequests(input, split: .byteByByte) == whole, "\(c.file) mutated: byte split differs")
            }
        }
    }

    private func check(_ o: ParseOutcome<HTTP1RequestHead>, against c: CorpusCase) {
        #expect(o.violations.isEmpty, "\(o.violations)")
        let complete = o.messages.filter(\.complete)
        #expect(complete.count == c.messages, "messages")
        #expect(complete.map(\.body.count) == c.bodies, "body lengths")
        #expect(complete.map(\.head.keepAlive) == c.keepAlive, "keep-alive")
        #expect(complete.map { framingLabel($0.head.framing) } == c.framing, "framing")
        if c.expect == "ok" {
            #expect(o.error == nil, "unexpected \(String(describing: o.error))")
            #expect(o.leftover == 0, "bytes left unconsumed")
            #expect(o.messages.count == c.messages, "an incomplete message trails")
        } else {
            #expect(o.error?.code.rawValue == c.expect)
            #expect(o.error?.status == c.status)
        }
    }
}

@Suite("Error coverage")
struct ErrorCoverageTests {
    /// Codes only the response parser can produce; ResponseParserTests covers them.
    static let responseOnly: Set<HTTP1ParseError.Code> = [.malformedStatusLine, .truncatedMessage, .unsolicitedResponse]

    @Test func everyRequestErrorCodeIsProducedByTheCorpus() {
        let produced = Set(CorpusCase.all.map(\.expect))
        for code in HTTP1ParseError.Code.allCases where !Self.responseOnly.contains(code) {
            #expect(produced.contains(code.rawValue), "no corpus case for \(code.rawValue)")
        }
    }
}
