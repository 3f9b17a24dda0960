import HTTP1
import GatewayCore

/// What the feeder checks on every head a parser produces: every range lies within the head's own bytes, the
/// head ends with its empty line, and the limits it was parsed under hold.
protocol FuzzedHTTP1Head: Sendable, Equatable {
    var bytes: [UInt8] { get }
    var fields: [HTTP1Field] { get }
    var framing: HTTP1BodyFraming { get }
    /// The head's own ranges besides the fields (method, target, Host; reason phrase).
    var otherRanges: [Range<Int>] { get }
    /// Checks specific to the start line.
    func checkStartLine(limits: HTTP1Limits)
}

extension FuzzedHTTP1Head {
    func checkInvariants(limits: HTTP1Limits) {
        let count = bytes.count
        fuzzCheck(count >= 4 && count <= limits.maxHeaderBytes, "head of \(count) bytes, limit \(limits.maxHeaderBytes)")
        fuzzCheck(bytes[(count - 4)...].elementsEqual([13, 10, 13, 10]), "head does not end with CRLF CRLF")
        fuzzCheck(fields.count <= limits.maxHeaders, "\(fields.count) fields, limit \(limits.maxHeaders)")
        for range in otherRanges { fuzzCheck(range.lowerBound >= 0 && range.upperBound <= count, "range \(range) outside \(count)") }
        for field in fields {
            fuzzCheck(!field.name.isEmpty && field.name.lowerBound >= 0 && field.value.upperBound <= count
                      && field.name.upperBound <= field.value.lowerBound, "field \(field) outside \(count)")
            // Values are trimmed of optional whitespace on both sides.
            if let first = field.value.first, let last = field.value.last {
                fuzzCheck(!isOWS(bytes[first]) && !isOWS(bytes[last]), "field value not trimmed")
            }
        }
        if case .contentLength(let n) = framing { fuzzCheck(n > 0, "Content-Length framing of \(n)") }
        checkStartLine(limits: limits)
    }

    private func isOWS(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
}

extension HTTP1RequestHead: FuzzedHTTP1Head {
    var otherRanges: [Range<Int>] { [method, target] + (host.map { [$0] } ?? []) }

    func checkStartLine(limits: HTTP1Limits) {
        fuzzCheck(!method.isEmpty && !target.isEmpty, "empty method or target")
        fuzzCheck(target.count <= limits.maxTargetBytes, "target of \(target.count) bytes, limit \(limits.maxTargetBytes)")
        fuzzCheck(framing != .untilClose, "a request framed until close")
    }
}

extension HTTP1ResponseHead: FuzzedHTTP1Head {
    var otherRanges: [Range<Int>] { [reason] }

    func checkStartLine(limits: HTTP1Limits) {
        fuzzCheck((100...599).contains(status), "status \(status)")
        fuzzCheck(framing != .untilClose || !keepAlive, "a body until close on a keep-alive response")
    }
}
