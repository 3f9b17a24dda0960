import GatewayCore
import HTTP1

/// `token_query_parameter` (App Check, WebSocket handshakes only): browsers cannot set headers on a WebSocket, so
/// the token may ride in the query. Before anything reads the request, the parameter leaves the target and its
/// value becomes the verifier's header, so routing, verification, the upstream and the access log all see one
/// request whose credential is where every other request carries it. A handshake that also sends the header, or
/// the parameter twice, then carries the credential twice: `malformed_token`, not one of them picked.
struct QueryTokenSource: Sendable {
    /// The parameter name as it appears in the query (unreserved characters only: compared byte for byte).
    let parameter: [UInt8]
    /// The verifier's header, as written in the rebuilt head.
    let header: [UInt8]

    /// The head with every listed parameter moved into its header, or nil when none is in the query (or the
    /// rebuilt head does not parse within `limits`, which the caller answers like any unparsable head).
    static func rewrite(_ head: HTTP1RequestHead, _ sources: [QueryTokenSource],
                        limits: HTTP1Limits) -> Result<HTTP1RequestHead, HTTP1ParseError>? {
        let target = Array(head.bytes[head.target])
        guard let q = target.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        var kept: [ArraySlice<UInt8>] = []
        var moved: [(header: [UInt8], value: ArraySlice<UInt8>)] = []
        for pair in target[(q + 1)...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            let eq = pair.firstIndex(of: UInt8(ascii: "=")) ?? pair.endIndex
            let name = pair[pair.startIndex..<eq]
            if let source = sources.first(where: { name.elementsEqual($0.parameter) }) {
                moved.append((source.header, eq < pair.endIndex ? pair[(eq + 1)...] : []))
            } else {
                kept.append(pair)
            }
        }
        guard !moved.isEmpty else { return nil }
        var bytes = Array(head.bytes[head.method])
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: target[..<q])
        if !kept.isEmpty {
            bytes.append(UInt8(ascii: "?"))
            for (i, pair) in kept.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: "&")) }
                bytes.append(contentsOf: pair)
            }
        }
        bytes.append(contentsOf: Array(" HTTP/1.1".utf8))
        // The field lines as received (from the end of the request line to the blank line), then the moved tokens.
        // (Lines end in CRLF: the parser refuses a bare LF.)
        guard let lineEnd = head.bytes[head.target.upperBound...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        bytes.append(contentsOf: head.bytes[(lineEnd - 1)..<(head.bytes.count - 2)])
        for m in moved {
            bytes.append(contentsOf: m.header)
            bytes.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            bytes.append(contentsOf: m.value)
            bytes.append(contentsOf: [13, 10])
        }
        bytes.append(contentsOf: [13, 10])
        var parser = HTTP1RequestParser(limits: limits)
        return bytes.withUnsafeBytes { raw -> Result<HTTP1RequestHead, HTTP1ParseError>? in
            switch parser.next(raw) {
            case .head(let rebuilt, _): return .success(rebuilt)
            case .error(let e): return .failure(e)
            default: return .failure(HTTP1ParseError(.malformedRequestLine))
            }
        }
    }
}
