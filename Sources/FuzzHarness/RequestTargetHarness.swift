import HTTP1

/// The `request-target` target: `RequestTargetCanonicalizer` over the input as a request target, under every
/// combination of the `paths:` options (merge_slashes, escaped_slashes, path_parameters).
///
/// Invariants: a target not in origin form comes back unchanged; a canonical output starts with "/", keeps the
/// query byte for byte, differs from the input, and is canonical itself (canonicalizing it again gives `.unchanged`);
/// an output — and an input the canonicalizer calls unchanged — has no dot segment (`/./`, `/../`, a trailing `/.` or
/// `/..`), no `//` when slashes are merged, no `%XX` of an unreserved byte, of a control byte or in lower-case hex,
/// no malformed escape, no raw `\` or `#`, no `%2F`/`%5C` or `;` unless kept, and no `.;`/`..;` segment; and keeping
/// escaped slashes or parameters only accepts more: what the stricter options accept comes out the same.
enum RequestTargetHarness {
    typealias Options = RequestTargetCanonicalizer.Options

    static let allOptions: [Options] = [true, false].flatMap { merge in
        [true, false].flatMap { slashes in
            [true, false].map { Options(mergeSlashes: merge, keepEscapedSlashes: slashes, keepPathParameters: $0) }
        }
    }

    static func run(_ data: UnsafeRawBufferPointer) {
        var results: [RequestTargetCanonicalizer.Result] = []
        results.reserveCapacity(allOptions.count)
        for options in allOptions {
            let result = RequestTargetCanonicalizer.canonicalize(data, options: options)
            check(data, result, options)
            results.append(result)
        }
        // Looser options accept a superset, with the same output.
        for (i, strict) in allOptions.enumerated() where results[i] != .ambiguous {
            for (j, loose) in allOptions.enumerated() where j != i && loose.mergeSlashes == strict.mergeSlashes
                && (loose.keepEscapedSlashes || !strict.keepEscapedSlashes)
                && (loose.keepPathParameters || !strict.keepPathParameters) {
                fuzzCheck(results[j] == results[i], "\(describe(loose)) gives \(results[j]) where \(describe(strict)) gives \(results[i])")
            }
        }
    }

    static func check(_ target: UnsafeRawBufferPointer, _ result: RequestTargetCanonicalizer.Result, _ options: Options) {
        guard target.first == UInt8(ascii: "/") else {
            fuzzCheck(result == .unchanged, "a target not in origin form was changed: \(result)")
            return
        }
        switch result {
        case .ambiguous:
            break
        case .unchanged:
            if let problem = problem(target, options) { fuzzCheck(false, "unchanged, but the input \(problem)") }
        case .canonical(let out):
            out.withUnsafeBytes { output in
                if let problem = problem(output, options) { fuzzCheck(false, "the output \(problem) [\(describe(options))]") }
                fuzzCheck(!output.elementsEqual(target), "canonical output equal to the input")
                fuzzCheck(query(output).elementsEqual(query(target)), "the query changed")
                let again = RequestTargetCanonicalizer.canonicalize(output, options: options)
                fuzzCheck(again == .unchanged, "not idempotent: canonicalizing the output gives \(again) [\(describe(options))]")
            }
        }
    }

    /// The query: from the first "?" on (empty when there is none).
    static func query(_ target: UnsafeRawBufferPointer) -> Slice<UnsafeRawBufferPointer> {
        target[(target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex)...]
    }

    /// What makes the path of `target` not canonical, or nil when it is canonical.
    static func problem(_ target: UnsafeRawBufferPointer, _ options: Options) -> String? {
        let end = target.firstIndex(of: UInt8(ascii: "?")) ?? target.endIndex
        guard end > 0, target[0] == UInt8(ascii: "/") else { return "does not start with /" }
        // Bytes and escapes.
        var i = 0
        while i < end {
            switch target[i] {
            case UInt8(ascii: "\\"): return "has a raw backslash"
            case UInt8(ascii: "#"): return "has a raw #"
            case UInt8(ascii: ";") where !options.keepPathParameters: return "has a ; (path_parameters: reject)"
            case UInt8(ascii: "%"):
                guard i + 2 < end, let hi = hexValue(target[i + 1]), let lo = hexValue(target[i + 2]) else {
                    return "has a malformed escape at \(i)"
                }
                let v = hi << 4 | lo
                if isUnreserved(v) { return "has %XX of an unreserved byte at \(i)" }
                if v < 0x20 || v == 0x7F { return "has an encoded control byte at \(i)" }
                if (v == 0x2F || v == 0x5C) && !options.keepEscapedSlashes { return "has an escaped slash at \(i)" }
                if target[i + 1] >= UInt8(ascii: "a") || target[i + 2] >= UInt8(ascii: "a") { return "has lower-case hex at \(i)" }
                i += 2
            default:
                break
            }
            i += 1
        }
        // Segments: "/" is one empty segment, a trailing slash ends in one; any other empty one is a "//".
        let segments = target[1..<end].split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        for (k, segment) in segments.enumerated() {
            if segment.isEmpty && options.mergeSlashes && k < segments.count - 1 { return "has //" }
            let beforeParameter = segment.prefix { $0 != UInt8(ascii: ";") }
            if !beforeParameter.isEmpty && beforeParameter.count <= 2 && beforeParameter.allSatisfy({ $0 == UInt8(ascii: ".") }) {
                return beforeParameter.count == segment.count ? "has a dot segment" : "has a dot segment with a parameter"
            }
        }
        return nil
    }

    static func describe(_ options: Options) -> String {
        "merge_slashes: \(options.mergeSlashes), escaped_slashes: \(options.keepEscapedSlashes ? "keep" : "reject"), "
            + "path_parameters: \(options.keepPathParameters ? "keep" : "reject")"
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - 48
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - 87
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - 55
        default: nil
        }
    }

    private static func isUnreserved(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}
