/// Removes chunked transfer coding (RFC 9112 section 7.1), strictly: hex sizes without whitespace or sign, no
/// overflow, well-formed extensions (skipped), CRLF after every chunk's data, trailer fields checked and dropped
/// (or, with `keepsTrailers`, kept apart for the caller to relay: never merged into the head).
///
/// Chunk parsing differences (a size accepted as "0x10" by one hop and as 0 by another, a missing CRLF
/// tolerated by one) are the TE.TE smuggling family, hence no leniency at all.
///
/// The decoder consumes framing bytes as it goes, so its remembered search offset is relative to the start of
/// the line it is looking at, which is where the next call's input begins.
struct HTTP1ChunkedDecoder: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case sizeLine
        case data(remaining: Int)
        /// The CRLF after a chunk's data.
        case dataEnd
        case trailer
    }

    enum Step: Equatable {
        case body(Range<Int>, consumed: Int)
        case needMore(consumed: Int)
        case end(consumed: Int)
        case error(HTTP1ParseError.Code)
    }

    var state = State.sizeLine
    /// No LF in the first `scanned` bytes of the current line.
    var scanned = 0
    var trailerBytes = 0
    var trailerFields = 0
    /// Keep the trailer section's field lines (each `name: value` checked, CRLF-terminated) in `trailers`.
    var keepsTrailers = false
    /// The kept field lines of the message that just ended (empty when it had none).
    var trailers: [UInt8] = []

    init(keepsTrailers: Bool = false) { self.keepsTrailers = keepsTrailers }

    /// Largest chunk size accepted: same sanity bound as Content-Length.
    @inline(__always) static var maxChunkSize: Int { 1 << 53 }

    /// Decodes as far as `p` allows; returns after each piece of data so the caller can forward it.
    mutating func decode(_ p: UnsafeRawBufferPointer, _ limits: HTTP1Limits) -> Step {
        var pos = 0
        while true {
            switch state {
            case .sizeLine:
                let window = min(p.count, pos + limits.maxChunkLineBytes + 2)
                guard let lf = HTTP1Bytes.find(HTTP1Bytes.lf, in: p, from: pos + scanned, to: window) else {
                    if p.count - pos >= limits.maxChunkLineBytes + 2 { return .error(.badChunkSize) }
                    scanned = p.count - pos
                    return .needMore(consumed: pos)
                }
                scanned = 0
                guard lf > pos, p[lf - 1] == HTTP1Bytes.cr,
                    let size = HTTP1ChunkedDecoder.parseSizeLine(p, pos..<(lf - 1))
                else { return .error(.badChunkSize) }
                pos = lf + 1
                state = size == 0 ? .trailer : .data(remaining: size)
            case .data(let remaining):
                let available = p.count - pos
                guard available > 0 else { return .needMore(consumed: pos) }
                let take = min(remaining, available)
                state = take == remaining ? .dataEnd : .data(remaining: remaining - take)
                return .body(pos..<(pos + take), consumed: pos + take)
            case .dataEnd:
                guard pos < p.count else { return .needMore(consumed: pos) }
                guard p[pos] == HTTP1Bytes.cr else { return .error(.badChunkTerminator) }
                guard pos + 1 < p.count else { return .needMore(consumed: pos) }
                guard p[pos + 1] == HTTP1Bytes.lf else { return .error(.badChunkTerminator) }
                pos += 2
                state = .sizeLine
            case .trailer:
                let allowance = limits.maxHeaderBytes - trailerBytes
                let window = min(p.count, pos + allowance)
                guard let lf = HTTP1Bytes.find(HTTP1Bytes.lf, in: p, from: pos + scanned, to: window) else {
                    if p.count - pos >= allowance { return .error(.headerTooLarge) }
                    scanned = p.count - pos
                    return .needMore(consumed: pos)
                }
                scanned = 0
                guard lf > pos, p[lf - 1] == HTTP1Bytes.cr else { return .error(.badTrailer) }
                let content = pos..<(lf - 1)
                trailerBytes += lf + 1 - pos
                pos = lf + 1
                if content.isEmpty {
                    let kept = trailers
                    self = HTTP1ChunkedDecoder(keepsTrailers: keepsTrailers)
                    trailers = kept
                    return .end(consumed: pos)
                }
                trailerFields += 1
                if trailerFields > limits.maxHeaders { return .error(.tooManyHeaders) }
                // Trailers are dropped, never merged into the head: merging is how a trailer could smuggle a
                // framing or routing field past the checks made on the head.
                if case .error = HTTP1FieldScanner.scan(p, content) { return .error(.badTrailer) }
                if keepsTrailers {
                    trailers.append(contentsOf: UnsafeRawBufferPointer(rebasing: p[content]))
                    trailers.append(contentsOf: [HTTP1Bytes.cr, HTTP1Bytes.lf])
                }
            }
        }
    }

    /// `1*HEXDIG *( ";" token [ "=" ( token / quoted-string ) ] )` with no whitespace anywhere; nil if invalid.
    static func parseSizeLine(_ p: UnsafeRawBufferPointer, _ line: Range<Int>) -> Int? {
        var i = line.lowerBound
        let end = line.upperBound
        var size = 0
        while i < end {
            let h = HTTP1Bytes.hexValue(p[i])
            if h < 0 { break }
            size = size << 4 | h
            if size > maxChunkSize { return nil }
            i += 1
        }
        guard i > line.lowerBound else { return nil }
        while i < end {
            guard p[i] == UInt8(ascii: ";") else { return nil }
            i += 1
            let nameStart = i
            while i < end, HTTP1Bytes.isToken(p[i]) { i += 1 }
            guard i > nameStart else { return nil }
            guard i < end, p[i] == UInt8(ascii: "=") else { continue }
            i += 1
            guard i < end else { return nil }
            if p[i] == UInt8(ascii: "\"") {
                guard let after = skipQuotedString(p, i, end) else { return nil }
                i = after
            } else {
                let valueStart = i
                while i < end, HTTP1Bytes.isToken(p[i]) { i += 1 }
                guard i > valueStart else { return nil }
            }
        }
        return size
    }

    /// The index after the quoted-string starting at `p[start]` (a DQUOTE), or nil.
    private static func skipQuotedString(_ p: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Int? {
        var i = start + 1
        while i < end {
            let b = p[i]
            if b == UInt8(ascii: "\"") { return i + 1 }
            if b == UInt8(ascii: "\\") {
                guard i + 1 < end, HTTP1Bytes.isFieldValue(p[i + 1]) else { return nil }
                i += 2
                continue
            }
            guard HTTP1Bytes.isFieldValue(b) else { return nil }
            i += 1
        }
        return nil
    }
}
