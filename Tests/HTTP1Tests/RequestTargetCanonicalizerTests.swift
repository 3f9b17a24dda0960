import HTTP1
import Testing

/// `RequestTargetCanonicalizer`: one table of spellings with the result each must give (canonical, unchanged,
/// ambiguous) under each `paths:` option, then properties over seeded random targets built from the spellings that
/// broke other proxies (CVE-2019-9901 and friends), checked against an independent model of RFC 3986 §5.2.4.
@Suite("Request-target canonicalizer")
struct RequestTargetCanonicalizerTests {
    // MARK: The table

    @Test(arguments: CanonicalizerRow.table)
    func spellingCanonicalizesAsTheContractSays(_ row: CanonicalizerRow) {
        let got = canonicalizeTarget(Array(row.target.utf8), row.options)
        #expect(got == row.expected, "\(row.target) [\(row.options.label)]: \(row.why)")
    }

    /// Every row also agrees with the reference model, so the model itself is checked against the contract.
    @Test func referenceModelAgreesWithTheTable() {
        for row in CanonicalizerRow.table {
            let model = CanonicalizerReference.canonicalize(Array(row.target.utf8), row.options)
            #expect(model == row.expected, "model: \(row.target) [\(row.options.label)]")
        }
    }

    @Test func theQueryIsNeverTouchedWhateverItHolds() {
        let queries = ["", "?", "?a=%2F", "?a=%2f", "?../..", "?x=/./..//", "?%61%62", "?a=\\", "?a=;b", "?%00", "?%zz",
                       "?#frag", "??", "?a=%C3%A9"]
        for query in queries {
            for options in CanonicalizerOptions.all {
                #expect(canonicalizeTarget(Array(("/api/users" + query).utf8), options) == .unchanged, "\(query)")
                #expect(canonicalizeTarget(Array(("/x/../%61pi/./users" + query).utf8), options)
                        == .canonical("/api/users" + query), "\(query) [\(options.label)]")
            }
        }
    }

    @Test func targetsNotInOriginFormAreLeftAlone() {
        for target in ["", "*", "http://example.com/%61pi/../x", "example.com:443", "a/../b"] {
            #expect(canonicalizeTarget(Array(target.utf8), .init()) == .unchanged, "\(target)")
        }
    }

    @Test func everyOptionCombinationIsInTheTable() {
        let labels = Set(CanonicalizerRow.table.map(\.options.label))
        #expect(labels.isSuperset(of: CanonicalizerOptions.all.map(\.label)))
    }

    // MARK: Properties over random targets

    /// Seeded, so a failure reproduces; bounded, so the suite stays fast (about 8 x 6,000 targets).
    @Test(arguments: CanonicalizerOptions.all.indices)
    func randomTargetsSatisfyThePropertiesAndMatchTheModel(_ optionIndex: Int) {
        let options = CanonicalizerOptions.all[optionIndex]
        var generator = NastyTargetGenerator(seed: 0x9901 &+ UInt64(optionIndex))
        var counts = (unchanged: 0, canonical: 0, ambiguous: 0)
        var failures = 0
        for _ in 0..<6_000 where failures < 10 {
            let target = generator.target()
            let got = canonicalizeTarget(target, options)
            let problems = CanonicalizerProperties.violations(of: target, got, options)
            let model = CanonicalizerReference.canonicalize(target, options)
            if !problems.isEmpty || got != model {
                failures += 1
                Issue.record("\(String(decoding: target, as: UTF8.self)) [\(options.label)]: got \(got), model \(model); \(problems)")
            }
            switch got {
            case .unchanged: counts.unchanged += 1
            case .canonical: counts.canonical += 1
            case .ambiguous: counts.ambiguous += 1
            }
        }
        // The generator must exercise all three outcomes, or the properties above prove little.
        #expect(counts.unchanged > 100 && counts.canonical > 100 && counts.ambiguous > 100, "\(counts)")
    }

    /// Loosening an option only accepts more: whatever the strict options accept comes out the same when
    /// `%2F` or `;` are kept.
    @Test func keepingEscapedSlashesOrParametersNeverChangesWhatStrictAccepts() {
        var generator = NastyTargetGenerator(seed: 2019)
        for _ in 0..<6_000 {
            let target = generator.target()
            for merge in [true, false] {
                let strict = canonicalizeTarget(target, .init(mergeSlashes: merge))
                guard strict != .ambiguous else { continue }
                for loose in [CanonicalizerOptions(mergeSlashes: merge, keepEscapedSlashes: true),
                              CanonicalizerOptions(mergeSlashes: merge, keepPathParameters: true),
                              CanonicalizerOptions(mergeSlashes: merge, keepEscapedSlashes: true, keepPathParameters: true)] {
                    let got = canonicalizeTarget(target, loose)
                    #expect(got == strict, "\(String(decoding: target, as: UTF8.self)) [\(loose.label)]")
                }
            }
        }
    }
}

typealias CanonicalizerOptions = RequestTargetCanonicalizer.Options

/// The canonicalizer's result with the output as a string, for readable expectations.
enum CanonicalizerExpectation: Equatable, Sendable, CustomStringConvertible {
    case unchanged
    case canonical(String)
    case ambiguous

    var description: String {
        switch self {
        case .unchanged: "unchanged"
        case .canonical(let s): "canonical(\(s))"
        case .ambiguous: "ambiguous"
        }
    }
}

func canonicalizeTarget(_ target: [UInt8], _ options: CanonicalizerOptions) -> CanonicalizerExpectation {
    switch target.withUnsafeBytes({ RequestTargetCanonicalizer.canonicalize($0, options: options) }) {
    case .unchanged: .unchanged
    case .canonical(let out): .canonical(String(decoding: out, as: UTF8.self))
    case .ambiguous: .ambiguous
    }
}

extension RequestTargetCanonicalizer.Options {
    /// Every combination of the three `paths:` options.
    static let all: [Self] = [true, false].flatMap { merge in
        [true, false].flatMap { slashes in
            [true, false].map { parameters in
                Self(mergeSlashes: merge, keepEscapedSlashes: slashes, keepPathParameters: parameters)
            }
        }
    }

    var label: String {
        "merge_slashes: \(mergeSlashes), escaped_slashes: \(keepEscapedSlashes ? "keep" : "reject"), "
            + "path_parameters: \(keepPathParameters ? "keep" : "reject")"
    }
}

/// One spelling, the options it is read under, and what must come out.
struct CanonicalizerRow: Sendable, CustomTestStringConvertible {
    let target: String
    let options: CanonicalizerOptions
    let expected: CanonicalizerExpectation
    let why: String

    var testDescription: String { "\(target) → \(expected) [\(options.label)]" }

    static let strict = CanonicalizerOptions()
    static let noMerge = CanonicalizerOptions(mergeSlashes: false)
    static let keepSlashes = CanonicalizerOptions(keepEscapedSlashes: true)
    static let keepParameters = CanonicalizerOptions(keepPathParameters: true)

    private static func row(_ target: String, _ expected: CanonicalizerExpectation, _ why: String,
                            _ options: CanonicalizerOptions = strict) -> Self {
        Self(target: target, options: options, expected: expected, why: why)
    }

    /// Each row under the default options unless it names others; rows that hold under every option combination
    /// are repeated for each.
    static let table: [Self] = {
        var rows: [Self] = [
            // Already canonical: the fast path.
            row("/", .unchanged, "the root"),
            row("/api/users", .unchanged, "plain"),
            row("/api/users/", .unchanged, "a trailing slash is kept"),
            row("/api/users?x=1&y=%2F", .unchanged, "the query is not looked at"),
            row("/.well-known/jwks", .unchanged, "a segment starting with a dot is a name"),
            row("/a.", .unchanged, "a dot at the end of a name"),
            row("/a/.../b", .unchanged, "three dots are a name"),
            row("/a/..b/.c", .unchanged, "dots followed by other bytes are names"),
            row("/%25", .unchanged, "an encoded % stays encoded"),
            row("/%2541", .unchanged, "%25 is not decoded twice (%2541 is not %41 is not A)"),
            row("/%C3%A9", .unchanged, "non-ASCII stays encoded, upper-case"),
            row("/a%20b", .unchanged, "an encoded space stays encoded"),
            row("/a%3Ab", .unchanged, "an encoded reserved character stays encoded"),
            row("/a%3Bb", .unchanged, "an encoded ; is not a parameter"),
            row("/a%3Fb", .unchanged, "an encoded ? is not the query"),

            // Unreserved %XX decoded, other %XX upper-cased.
            row("/%61pi/users", .canonical("/api/users"), "%61 is a: CVE-2019-9901"),
            row("/%41PI", .canonical("/API"), "decoded, case kept"),
            row("/%7Euser/%2D%5F%30", .canonical("/~user/-_0"), "~ - _ digits are unreserved"),
            row("/%7e", .canonical("/~"), "lower-case hex of an unreserved byte"),
            row("/a%3ab", .canonical("/a%3Ab"), "lower-case hex upper-cased"),
            row("/%c3%a9", .canonical("/%C3%A9"), "non-ASCII hex upper-cased, not decoded"),
            row("/%25%34%31", .canonical("/%2541"), "%34%31 decoded to 41 after a kept %25: still not A"),
            row("/%2e%2E%2e", .canonical("/..."), "three encoded dots are a name"),

            // Dot segments, also encoded.
            row("/./api/users", .canonical("/api/users"), "a leading dot segment"),
            row("/api/./users", .canonical("/api/users"), "a dot segment inside"),
            row("/x/../api/users", .canonical("/api/users"), "a dot-dot segment"),
            row("/%2e/api/users", .canonical("/api/users"), "an encoded dot segment"),
            row("/%2E%2e/api", .ambiguous, "an encoded dot-dot at the root"),
            row("/api/%2e%2E/api/users", .canonical("/api/users"), "an encoded dot-dot inside"),
            row("/api/.%2e/api/users", .canonical("/api/users"), "a half-encoded dot-dot"),
            row("/a/.", .canonical("/a/"), "a trailing dot leaves the slash before it"),
            row("/a/..", .canonical("/"), "a trailing dot-dot goes back to the root"),
            row("/a/b/..", .canonical("/a/"), "a trailing dot-dot leaves the slash"),
            row("/api/users/..", .canonical("/api/"), "a trailing dot-dot after a protected path"),
            row("/a/./", .canonical("/a/"), "a dot segment before a trailing slash"),
            row("/.", .canonical("/"), "the root's dot"),
            row("/./", .canonical("/"), "the root's dot with a slash"),
            row("/a/b/../../c", .canonical("/c"), "two dot-dots"),
            row("/..", .ambiguous, "dot-dot above the root"),
            row("/../api/users", .ambiguous, "dot-dot above the root before a protected path"),
            row("/a/../..", .ambiguous, "dot-dot above the root after one segment"),
            row("/./..", .ambiguous, "a dot segment does not count as a level"),

            // Repeated slashes.
            row("//api/users", .canonical("/api/users"), "leading double slash"),
            row("/api//users", .canonical("/api/users"), "double slash inside"),
            row("/api///users//", .canonical("/api/users/"), "runs of slashes, trailing too"),
            row("//", .canonical("/"), "only slashes"),
            row("/a//..", .canonical("/"), "merged before the dot-dot: /a/.. is /"),
            row("//api/users", .unchanged, "merge_slashes: false keeps //", noMerge),
            row("/api//users", .unchanged, "merge_slashes: false keeps // inside", noMerge),
            row("//", .unchanged, "merge_slashes: false keeps the root's //", noMerge),
            row("/a//./b", .canonical("/a//b"), "merge off: the dot goes, the empty segment stays", noMerge),
            row("/a//../b", .canonical("/a/b"), "merge off: dot-dot removes the empty segment", noMerge),
            row("//..", .canonical("/"), "merge off: dot-dot removes the empty first segment", noMerge),
            row("/..//", .ambiguous, "merge off: still nothing above the root", noMerge),

            // Escaped slashes.
            row("/api%2fusers", .ambiguous, "%2F refused by default"),
            row("/api%2Fusers", .ambiguous, "%2F refused by default"),
            row("/API%2fusers", .ambiguous, "%2F refused whatever the case around it"),
            row("/api%5Cusers", .ambiguous, "%5C refused by default"),
            row("/api%5cusers", .ambiguous, "%5c refused by default"),
            row("/api%2Fusers", .unchanged, "escaped_slashes: keep leaves %2F encoded", keepSlashes),
            row("/api%2fusers", .canonical("/api%2Fusers"), "kept encoded, hex upper-cased", keepSlashes),
            row("/api%5cusers", .canonical("/api%5Cusers"), "kept encoded, hex upper-cased", keepSlashes),
            row("/a/..%2F", .unchanged, "kept: ..%2F is a name, not a dot segment", keepSlashes),
            row("/a/%2e%2e%2f", .canonical("/a/..%2F"), "kept: decoded dots, encoded slash, one name", keepSlashes),

            // Path parameters.
            row("/api;x/users", .ambiguous, "; refused by default"),
            row("/api/users;jsessionid=1", .ambiguous, "; refused by default, also at the end"),
            row("/api;x/users", .unchanged, "path_parameters: keep leaves it", keepParameters),
            row("/api/users;jsessionid=1", .unchanged, "kept as sent", keepParameters),
            row("/;/a", .unchanged, "kept: an empty name before ;", keepParameters),
            row("/a;b/../c", .canonical("/c"), "kept: a segment with a parameter is one level", keepParameters),
            row("/..;/api/users", .ambiguous, "..; is .. to Tomcat: refused even when kept", keepParameters),
            row("/..;x/api", .ambiguous, "..;x is .. to Tomcat", keepParameters),
            row("/api/.;x/users", .ambiguous, ".;x is . to Tomcat", keepParameters),
            row("/a/%2e%2e;/b", .ambiguous, "encoded dots before ;", keepParameters),
            row("/a/...;x", .unchanged, "three dots before ; are a name", keepParameters),
        ]
        // Refused under every option combination.
        let alwaysAmbiguous: [(String, String)] = [
            ("/..;/api/users", "..; above the root"),
            ("/api\\users", "a raw backslash"),
            ("/\\api", "a raw backslash first"),
            ("/a#b", "a raw #"),
            ("/#", "a raw # alone"),
            ("/%00api", "encoded NUL"),
            ("/a%00", "encoded NUL at the end"),
            ("/a%7F", "encoded DEL"),
            ("/a%7f", "encoded DEL, lower-case"),
            ("/a%0a", "encoded LF"),
            ("/a%0D%0AX:y", "encoded CRLF"),
            ("/a%09", "encoded tab"),
            ("/a%1F", "encoded unit separator"),
            ("/a%4", "truncated escape"),
            ("/a%4?x", "truncated escape before the query"),
            ("/a%", "lone %"),
            ("/%", "lone % first"),
            ("/a%zz", "not hex"),
            ("/a%4g", "second digit not hex"),
            ("/a%g4", "first digit not hex"),
            ("/a%%41", "% escaping %"),
            ("/..", "above the root"),
            ("/%2e%2e", "encoded above the root"),
            ("/../api/users", "above the root"),
        ]
        for (target, why) in alwaysAmbiguous {
            for options in CanonicalizerOptions.all { rows.append(row(target, .ambiguous, why, options)) }
        }
        // The same canonical result under every option combination.
        let alwaysCanonical: [(String, String, String)] = [
            ("/%61pi/users", "/api/users", "unreserved decoded"),
            ("/./api/users", "/api/users", "dot segment"),
            ("/x/../api/users", "/api/users", "dot-dot segment"),
            ("/api/./users", "/api/users", "dot segment inside"),
            ("/%2e/api/users", "/api/users", "encoded dot"),
            ("/api/%2e%2e/api/users", "/api/users", "encoded dot-dot"),
            ("/a/.", "/a/", "trailing dot"),
            ("/a/..", "/", "trailing dot-dot"),
            ("/api/users/..", "/api/", "trailing dot-dot"),
            ("/%c3%a9", "/%C3%A9", "non-ASCII upper-cased"),
            ("/a%3ab", "/a%3Ab", "reserved upper-cased"),
            ("/%25%34%31", "/%2541", "no double decoding"),
            ("/./a?../%2f", "/a?../%2f", "the query as sent"),
        ]
        for (target, out, why) in alwaysCanonical {
            for options in CanonicalizerOptions.all { rows.append(row(target, .canonical(out), why, options)) }
        }
        for options in CanonicalizerOptions.all {
            rows.append(row("/api/users?a=..%2f&b=%2F/./", .unchanged, "the query as sent", options))
            rows.append(row("/%2541", .unchanged, "%25 not decoded twice", options))
        }
        return rows
    }()
}

// MARK: - Properties and the reference model

/// The properties every result must have (empty when it has them).
enum CanonicalizerProperties {
    static func violations(of target: [UInt8], _ result: CanonicalizerExpectation, _ options: CanonicalizerOptions) -> [String] {
        guard target.first == UInt8(ascii: "/") else {
            return result == .unchanged ? [] : ["a target not in origin form was changed"]
        }
        switch result {
        case .ambiguous:
            return []
        case .unchanged:
            return isCanonical(target, options).map { "unchanged but " + $0 }
        case .canonical(let text):
            let out = Array(text.utf8)
            var problems = isCanonical(out, options)
            if out == target { problems.append("canonical output equals the input (should be .unchanged)") }
            let again = canonicalizeTarget(out, options)
            if again != .unchanged { problems.append("not idempotent: \(again)") }
            if query(of: out) != query(of: target) { problems.append("the query changed") }
            return problems
        }
    }

    static func query(of target: [UInt8]) -> ArraySlice<UInt8> {
        target[(target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex)...]
    }

    /// What makes a target canonical, stated on the path directly rather than as an algorithm.
    static func isCanonical(_ target: [UInt8], _ options: CanonicalizerOptions) -> [String] {
        let path = Array(target[..<(target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex)])
        let text = String(decoding: path, as: UTF8.self)
        var problems: [String] = []
        if path.first != UInt8(ascii: "/") { problems.append("does not start with /") }
        if options.mergeSlashes && text.contains("//") { problems.append("contains //") }
        if text.contains("/./") { problems.append("contains /./") }
        if text.contains("/../") { problems.append("contains /../") }
        if text.hasSuffix("/.") { problems.append("ends with /.") }
        if text.hasSuffix("/..") { problems.append("ends with /..") }
        if text.contains("\\") { problems.append("contains \\") }
        if text.contains("#") { problems.append("contains #") }
        if !options.keepPathParameters && text.contains(";") { problems.append("contains ;") }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        if segments.contains(where: { $0.contains(";") && [".", ".."].contains($0.prefix { $0 != ";" }) }) {
            problems.append("a dot segment with a parameter")
        }
        var i = 0
        while i < path.count {
            defer { i += 1 }
            guard path[i] == UInt8(ascii: "%") else { continue }
            guard i + 2 < path.count, let hi = hex(path[i + 1]), let lo = hex(path[i + 2]) else {
                problems.append("a malformed escape at \(i)")
                break
            }
            let v = hi << 4 | lo
            if CanonicalizerReference.isUnreserved(v) { problems.append("%XX of an unreserved byte at \(i)") }
            if v < 0x20 || v == 0x7F { problems.append("an encoded control byte at \(i)") }
            if !options.keepEscapedSlashes && (v == 0x2F || v == 0x5C) { problems.append("an escaped slash at \(i)") }
            if path[i + 1] >= UInt8(ascii: "a") || path[i + 2] >= UInt8(ascii: "a") { problems.append("lower-case hex at \(i)") }
            i += 2
        }
        return problems
    }

    static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - 48
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - 87
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - 55
        default: nil
        }
    }
}

/// An independent model of the contract: normalise the escapes, apply the refusal rules, merge slashes, then
/// RFC 3986 §5.2.4 `remove_dot_segments` literally (its string-buffer algorithm, not segments), refusing the step
/// that would go above the root instead of clamping it.
enum CanonicalizerReference {
    static func canonicalize(_ target: [UInt8], _ options: CanonicalizerOptions) -> CanonicalizerExpectation {
        guard target.first == UInt8(ascii: "/") else { return .unchanged }
        let queryStart = target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
        let path = Array(target[..<queryStart])

        // 1. Escapes: unreserved decoded, the rest upper-cased; refusals.
        var normal: [UInt8] = []
        var i = 0
        while i < path.count {
            let c = path[i]
            if c == UInt8(ascii: "\\") || c == UInt8(ascii: "#") { return .ambiguous }
            if c == UInt8(ascii: ";") && !options.keepPathParameters { return .ambiguous }
            guard c == UInt8(ascii: "%") else {
                normal.append(c)
                i += 1
                continue
            }
            guard i + 2 < path.count, let hi = CanonicalizerProperties.hex(path[i + 1]),
                  let lo = CanonicalizerProperties.hex(path[i + 2]) else { return .ambiguous }
            let v = hi << 4 | lo
            if v < 0x20 || v == 0x7F { return .ambiguous }
            if isUnreserved(v) {
                normal.append(v)
            } else {
                if (v == 0x2F || v == 0x5C) && !options.keepEscapedSlashes { return .ambiguous }
                normal += Array("%".utf8) + Array(String(v, radix: 16, uppercase: true).utf8).paddedHex()
            }
            i += 3
        }

        // 2. A kept parameter never hides a dot segment.
        for segment in normal.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        where segment.contains(UInt8(ascii: ";")) {
            let head = segment.prefix { $0 != UInt8(ascii: ";") }
            if head.elementsEqual(".".utf8) || head.elementsEqual("..".utf8) { return .ambiguous }
        }

        // 3. Slashes merged.
        if options.mergeSlashes {
            var merged: [UInt8] = []
            for c in normal where !(c == UInt8(ascii: "/") && merged.last == UInt8(ascii: "/")) { merged.append(c) }
            normal = merged
        }

        // 4. RFC 3986 §5.2.4 (the input always starts with "/", so steps A and D never apply).
        var input = normal[...]
        var output: [UInt8] = []
        func removeLastSegment() -> Bool {
            guard !output.isEmpty else { return false }   // above the root
            output.removeSubrange((output.lastIndex(of: UInt8(ascii: "/")) ?? 0)...)
            return true
        }
        while !input.isEmpty {
            if input.starts(with: "/./".utf8) {
                input = "/".utf8 + input.dropFirst(3)
            } else if input.elementsEqual("/.".utf8) {
                input = Array("/".utf8)[...]
            } else if input.starts(with: "/../".utf8) {
                input = "/".utf8 + input.dropFirst(4)
                guard removeLastSegment() else { return .ambiguous }
            } else if input.elementsEqual("/..".utf8) {
                input = Array("/".utf8)[...]
                guard removeLastSegment() else { return .ambiguous }
            } else {
                let end = input.dropFirst().firstIndex(of: UInt8(ascii: "/")) ?? input.endIndex
                output += input[..<end]
                input = input[end...]
            }
        }
        let out = output + target[queryStart...]
        return out == target ? .unchanged : .canonical(String(decoding: out, as: UTF8.self))
    }

    static func isUnreserved(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "~")
        }
    }
}

extension [UInt8] {
    /// One hex digit gets its leading zero ("A" → "0A").
    fileprivate func paddedHex() -> [UInt8] { count == 1 ? [UInt8(ascii: "0")] + self : self }
}

/// Request targets from the spellings that break path matching: slashes, dots, their encodings in both cases,
/// escaped slashes and backslashes, parameters, control bytes, malformed escapes, `#`, `?` and plain names.
/// SplitMix64, so a seed gives the same targets on every platform.
struct NastyTargetGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    static let alphabet = [
        "/", "/", "/", "//", ".", ".", "..", "/./", "/../", "%2e", "%2E", "%2e%2e", "%2E.", "%2f", "%2F", "%5c", "%5C",
        "\\", ";", ";x=1", "..;", "%3b", "%3B", "%61", "%41", "%7e", "%7E", "%2D", "%5f", "%30", "%25", "%2525", "%C3%A9",
        "%c3", "%00", "%0a", "%0D", "%1f", "%7F", "%7f", "%20", "%3A", "%3f", "%", "%4", "%zz", "%g1", "#", "?", "?",
        "=", "&", "a", "b", "api", "users", "x", "~", "-", "_", "0", "9", "A", "Z",
    ]

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// "/" and then up to 12 pieces of the alphabet.
    mutating func target() -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "/")]
        let pieces = Int(next() % 13)
        for _ in 0..<pieces {
            out += Array(Self.alphabet[Int(next() % UInt64(Self.alphabet.count))].utf8)
        }
        return out
    }
}
