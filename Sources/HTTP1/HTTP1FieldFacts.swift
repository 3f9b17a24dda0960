/// What the framing-relevant fields of a head say, collected field by field as the head is scanned.
///
/// Only five names matter to framing and routing; everything else passes through untouched. Ranges in here are
/// relative to the head start (the same origin as ``HTTP1Field``).
struct HTTP1FieldFacts: Sendable, Equatable {
    /// The agreed Content-Length value, once at least one valid field was seen.
    var contentLength: Int?
    /// The first Content-Length problem, reported at the end of the head.
    var contentLengthError: HTTP1ParseError.Code?
    var sawContentLength = false

    var transferEncodingFields = 0
    /// List elements over all Transfer-Encoding fields.
    var transferCodings = 0
    var chunkedCodings = 0
    var lastCodingIsChunked = false
    var emptyCoding = false

    var hostFields = 0
    var host: Range<Int>?
    var hostInvalid = false

    var connectionClose = false
    var connectionKeepAlive = false
    /// Connection names "upgrade" (a protocol switch is asked for, RFC 9110 7.8).
    var connectionUpgrade = false
    /// An Upgrade field names "websocket" (any case, any place in its list).
    var upgradeWebSocket = false
    var expectsContinue = false
    /// A TE field lists "trailers" (the client takes trailers: gRPC).
    var teTrailers = false
    /// Content-Type is application/grpc or application/grpc+… / ;… (a gRPC call).
    var grpc = false

    /// Content-Length above 2^53 is refused: no legitimate body is that large, and values near Int.max invite
    /// overflow in arithmetic further down the pipeline (and in other implementations).
    @inline(__always) static var maxContentLength: Int { 1 << 53 }

    /// Records the field `p[name]: p[value]`; `origin` is the head start within `p`.
    @inline(__always)
    mutating func note(_ p: UnsafeRawBufferPointer, name: Range<Int>, value: Range<Int>, origin: Int) {
        switch name.count {
        case 4 where HTTP1Bytes.equalsLowercased(p, name, "host"):
            hostFields += 1
            if host == nil { host = (value.lowerBound - origin)..<(value.upperBound - origin) }
            for k in value where !HTTP1Bytes.isHost(p[k]) { hostInvalid = true }
        case 2 where HTTP1Bytes.equalsLowercased(p, name, "te"):
            HTTP1Bytes.forEachListElement(p, value) { element in
                if HTTP1Bytes.equalsLowercased(p, element, "trailers") { teTrailers = true }
                return true
            }
        case 12 where HTTP1Bytes.equalsLowercased(p, name, "content-type"):
            // application/grpc, application/grpc+proto, application/grpc;… (not grpc-web: that is HTTP/1.1-shaped)
            let v = HTTP1Bytes.trimOWS(p, value)
            if v.count >= 16 && HTTP1Bytes.equalsLowercased(p, v.lowerBound..<(v.lowerBound + 16), "application/grpc") {
                let next = v.count == 16 ? UInt8(ascii: ";") : p[v.lowerBound + 16]
                if next == UInt8(ascii: "+") || next == UInt8(ascii: ";") || next == UInt8(ascii: " ") { grpc = true }
            }
        case 6 where HTTP1Bytes.equalsLowercased(p, name, "expect"):
            if HTTP1Bytes.equalsLowercased(p, value, "100-continue") { expectsContinue = true }
        case 7 where HTTP1Bytes.equalsLowercased(p, name, "upgrade"):
            HTTP1Bytes.forEachListElement(p, value) { element in
                if HTTP1Bytes.equalsLowercased(p, element, "websocket") { upgradeWebSocket = true }
                return true
            }
        case 10 where HTTP1Bytes.equalsLowercased(p, name, "connection"):
            noteConnection(p, value)
        case 14 where HTTP1Bytes.equalsLowercased(p, name, "content-length"):
            noteContentLength(p, value)
        case 17 where HTTP1Bytes.equalsLowercased(p, name, "transfer-encoding"):
            noteTransferEncoding(p, value)
        default:
            break
        }
    }

    private mutating func noteConnection(_ p: UnsafeRawBufferPointer, _ value: Range<Int>) {
        HTTP1Bytes.forEachListElement(p, value) { element in
            if HTTP1Bytes.equalsLowercased(p, element, "close") { connectionClose = true }
            if HTTP1Bytes.equalsLowercased(p, element, "keep-alive") { connectionKeepAlive = true }
            if HTTP1Bytes.equalsLowercased(p, element, "upgrade") { connectionUpgrade = true }
            return true
        }
    }

    /// RFC 9110 8.6 / RFC 9112 6.3: `1*DIGIT`; a list or repetition of one identical value may be taken as that
    /// value, anything else is unrecoverable framing. No sign, hex, inner spaces or empty elements: lenient
    /// parsers that accept "+5" or "0x5" are exactly what CL-based smuggling exploits.
    private mutating func noteContentLength(_ p: UnsafeRawBufferPointer, _ value: Range<Int>) {
        sawContentLength = true
        guard contentLengthError == nil else { return }
        var failure: HTTP1ParseError.Code?
        var agreed = contentLength
        HTTP1Bytes.forEachListElement(p, value) { element in
            guard !element.isEmpty, element.count <= 16 else { failure = .invalidContentLength; return false }
            var n = 0
            for k in element {
                let b = p[k]
                guard HTTP1Bytes.isDigit(b) else { failure = .invalidContentLength; return false }
                n = n * 10 + Int(b &- 0x30)
            }
            guard n <= HTTP1FieldFacts.maxContentLength else { failure = .invalidContentLength; return false }
            if let a = agreed, a != n { failure = .conflictingContentLength; return false }
            agreed = n
            return true
        }
        if let failure { contentLengthError = failure } else { contentLength = agreed }
    }

    /// Counts codings; the framing decision (request: exactly one "chunked"; response: "chunked" last) is made
    /// at the end of the head, once every Transfer-Encoding field has been seen.
    private mutating func noteTransferEncoding(_ p: UnsafeRawBufferPointer, _ value: Range<Int>) {
        transferEncodingFields += 1
        HTTP1Bytes.forEachListElement(p, value) { element in
            transferCodings += 1
            if element.isEmpty { emptyCoding = true }
            lastCodingIsChunked = HTTP1Bytes.equalsLowercased(p, element, "chunked")
            if lastCodingIsChunked { chunkedCodings += 1 }
            return true
        }
    }

    /// Connection semantics (RFC 9112 9.3): 1.1 persists unless "close"; 1.0 only with "keep-alive".
    func persists(_ version: HTTP1Version) -> Bool {
        if connectionClose { return false }
        return version == .http11 || connectionKeepAlive
    }
}
