/// `method SP request-target SP HTTP-version` (RFC 9112 section 3), parsed strictly: single spaces, a token
/// method, a target without whitespace or control bytes in one of the four request-target forms.
///
/// Lenient request-line parsing (extra spaces, tabs, HTTP/0.9 lines) lets two parsers disagree on the target or
/// on where the head ends; an edge proxy has no need for any of it.
struct HTTP1RequestLine: Sendable, Equatable {
    /// Offsets relative to the head start, like fields.
    var method: Range<Int>
    var target: Range<Int>
    var version: HTTP1Version

    /// Whether the target in `p[line]` (a request line, possibly still incomplete) is already longer than `max`.
    ///
    /// Checked before anything else about the line, and on incomplete lines too, so a long target is reported
    /// as 414 whatever the split of the input, and before the head grows past `maxHeaderBytes`.
    ///
    /// The target ends at the first CR too: a CR is never part of one (it ends the line, or it is a bare CR the
    /// line's parse refuses), and where a line is cut — before or after a CR, or between two — must not change
    /// the target's length (a fuzzer found `…://\r\r\n` read as 414 in two pieces and as 400 `bare_cr` in one).
    static func targetTooLong(_ p: UnsafeRawBufferPointer, _ line: Range<Int>, max: Int) -> Bool {
        let end = HTTP1Bytes.find(HTTP1Bytes.cr, in: p, from: line.lowerBound, to: line.upperBound) ?? line.upperBound
        guard end - line.lowerBound > max else { return false }
        guard let sp1 = HTTP1Bytes.find(HTTP1Bytes.sp, in: p, from: line.lowerBound, to: end) else { return false }
        let targetEnd = HTTP1Bytes.find(HTTP1Bytes.sp, in: p, from: sp1 + 1, to: end) ?? end
        return targetEnd - (sp1 + 1) > max
    }

    /// Parses the complete line `p[line]` (line ending excluded); `origin` is the head start.
    static func parse(
        _ p: UnsafeRawBufferPointer, _ line: Range<Int>, origin: Int
    ) throws(HTTP1ParseError) -> HTTP1RequestLine {
        let s = line.lowerBound
        let e = line.upperBound
        if HTTP1Bytes.find(HTTP1Bytes.cr, in: p, from: s, to: e) != nil { throw HTTP1ParseError(.bareCR) }
        guard let sp1 = HTTP1Bytes.find(HTTP1Bytes.sp, in: p, from: s, to: e), sp1 > s,
            let sp2 = HTTP1Bytes.find(HTTP1Bytes.sp, in: p, from: sp1 + 1, to: e), sp2 > sp1 + 1
        else { throw HTTP1ParseError(.malformedRequestLine) }
        let method = s..<sp1
        let target = (sp1 + 1)..<sp2
        for k in method where !HTTP1Bytes.isToken(p[k]) { throw HTTP1ParseError(.invalidMethod) }
        let version = try parseVersion(p, (sp2 + 1)..<e, malformed: .malformedRequestLine)
        try checkTargetForm(p, method: method, target: target)
        return HTTP1RequestLine(
            method: (method.lowerBound - origin)..<(method.upperBound - origin),
            target: (target.lowerBound - origin)..<(target.upperBound - origin),
            version: version)
    }

    /// `HTTP/1.0` or `HTTP/1.1` exactly (case-sensitive, RFC 9112 2.3); another `HTTP/d.d` is 505.
    static func parseVersion(
        _ p: UnsafeRawBufferPointer, _ r: Range<Int>, malformed: HTTP1ParseError.Code
    ) throws(HTTP1ParseError) -> HTTP1Version {
        guard r.count == 8 else { throw HTTP1ParseError(malformed) }
        let s = r.lowerBound
        guard p[s] == UInt8(ascii: "H"), p[s + 1] == UInt8(ascii: "T"), p[s + 2] == UInt8(ascii: "T"),
            p[s + 3] == UInt8(ascii: "P"), p[s + 4] == UInt8(ascii: "/"), HTTP1Bytes.isDigit(p[s + 5]),
            p[s + 6] == UInt8(ascii: "."), HTTP1Bytes.isDigit(p[s + 7])
        else { throw HTTP1ParseError(malformed) }
        guard p[s + 5] == UInt8(ascii: "1") else { throw HTTP1ParseError(.unsupportedVersion) }
        switch p[s + 7] {
        case UInt8(ascii: "0"): return .http10
        case UInt8(ascii: "1"): return .http11
        default: throw HTTP1ParseError(.unsupportedVersion)
        }
    }

    /// RFC 9112 3.2: origin-form for most methods, absolute-form (proxies must accept it), authority-form only
    /// for CONNECT, asterisk-form only for OPTIONS.
    static func checkTargetForm(
        _ p: UnsafeRawBufferPointer, method: Range<Int>, target: Range<Int>
    ) throws(HTTP1ParseError) {
        for k in target where !HTTP1Bytes.isTarget(p[k]) { throw HTTP1ParseError(.invalidTarget) }
        let first = p[target.lowerBound]
        let isConnect = HTTP1Bytes.equalsExactly(p, method, "CONNECT")
        if isConnect {
            // authority-form: host ":" port — no path, no scheme.
            guard first != UInt8(ascii: "/"),
                HTTP1Bytes.find(UInt8(ascii: ":"), in: p, from: target.lowerBound, to: target.upperBound) != nil,
                HTTP1Bytes.find(UInt8(ascii: "/"), in: p, from: target.lowerBound, to: target.upperBound) == nil
            else { throw HTTP1ParseError(.invalidTarget) }
            return
        }
        if first == UInt8(ascii: "/") { return }
        if target.count == 1, first == UInt8(ascii: "*") {
            guard HTTP1Bytes.equalsExactly(p, method, "OPTIONS") else { throw HTTP1ParseError(.invalidTarget) }
            return
        }
        // absolute-form: scheme "://" ...
        var k = target.lowerBound
        guard (first | 0x20) &- 0x61 < 26 else { throw HTTP1ParseError(.invalidTarget) }
        while k < target.upperBound {
            let b = p[k]
            let isSchemeByte = (b | 0x20) &- 0x61 < 26 || HTTP1Bytes.isDigit(b) || b == UInt8(ascii: "+")
                || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
            if !isSchemeByte { break }
            k += 1
        }
        guard target.upperBound - k > 3, p[k] == UInt8(ascii: ":"), p[k + 1] == UInt8(ascii: "/"),
            p[k + 2] == UInt8(ascii: "/")
        else { throw HTTP1ParseError(.invalidTarget) }
    }
}
