#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte classes of RFC 9110/9112 and small scanning primitives over raw buffers.
///
/// The tables are 64-bit literal masks inside the functions rather than module-level arrays: a global `let`
/// costs a `swift_once` check on every access, a literal costs nothing.
enum HTTP1Bytes {
    @inline(__always) static var cr: UInt8 { 13 }
    @inline(__always) static var lf: UInt8 { 10 }
    @inline(__always) static var sp: UInt8 { 32 }
    @inline(__always) static var htab: UInt8 { 9 }

    /// `tchar` (RFC 9110 5.6.2): the only bytes allowed in methods, field names and chunk-extension names.
    @inline(__always) static func isToken(_ b: UInt8) -> Bool {
        let low: UInt64 = 0x03ff_6cfa_0000_0000
        let high: UInt64 = 0x57ff_ffff_c7ff_fffe
        if b < 64 { return (low >> UInt64(b)) & 1 != 0 }
        if b < 128 { return (high >> UInt64(b &- 64)) & 1 != 0 }
        return false
    }

    /// field-vchar / obs-text / SP / HTAB. NUL, other controls and DEL are rejected because downstream software
    /// (C strings, log pipelines, other proxies) disagrees about them — a classic smuggling lever.
    @inline(__always) static func isFieldValue(_ b: UInt8) -> Bool {
        b >= 0x20 ? b != 0x7F : b == 0x09
    }

    /// Whether every byte of `p[range]` passes ``isFieldValue(_:)``; checks 8 bytes per step (SWAR) because
    /// field values (cookies, tokens) are most of a head's bytes.
    @inline(__always) static func allFieldValue(_ p: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var k = range.lowerBound
        while k + 8 <= range.upperBound {
            let w = p.loadUnaligned(fromByteOffset: k, as: UInt64.self)
            let below20 = (w &- ones &* 0x20) & ~w & highs  // some byte < 0x20 (HTAB needs a closer look)
            let d = w ^ (ones &* 0x7F)
            let del = (d &- ones) & ~d & highs  // some byte == 0x7F
            if below20 | del != 0 {
                for j in k..<(k + 8) where !isFieldValue(p[j]) { return false }
            }
            k += 8
        }
        while k < range.upperBound {
            if !isFieldValue(p[k]) { return false }
            k += 1
        }
        return true
    }

    /// Bytes allowed in a request-target: visible ASCII. Raw non-ASCII is not a URI character.
    @inline(__always) static func isTarget(_ b: UInt8) -> Bool { b > 0x20 && b < 0x7F }

    /// Reason-phrase bytes: HTAB / SP / VCHAR / obs-text.
    @inline(__always) static func isReason(_ b: UInt8) -> Bool { isFieldValue(b) }

    /// Bytes allowed in a Host value: reg-name / IP-literal characters, pct-encoding and ":" port.
    @inline(__always) static func isHost(_ b: UInt8) -> Bool {
        // ALPHA DIGIT - . _ ~ ! $ & ' ( ) * + , ; = % : [ ]
        let low: UInt64 = 0x2fff_7ff2_0000_0000
        let high: UInt64 = 0x47ff_fffe_afff_fffe
        if b < 64 { return (low >> UInt64(b)) & 1 != 0 }
        if b < 128 { return (high >> UInt64(b &- 64)) & 1 != 0 }
        return false
    }

    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }

    /// The value of a HEXDIG, or -1.
    @inline(__always) static func hexValue(_ b: UInt8) -> Int {
        if b &- 0x30 < 10 { return Int(b &- 0x30) }
        let l = b | 0x20
        if l &- 0x61 < 6 { return Int(l &- 0x61) + 10 }
        return -1
    }

    @inline(__always) static func isOWS(_ b: UInt8) -> Bool { b == sp || b == htab }

    /// The index of the first `byte` in `p[from..<to]`, using libc `memchr`.
    @inline(__always)
    static func find(_ byte: UInt8, in p: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        guard from < to, let base = p.baseAddress else { return nil }
        guard let hit = memchr(base + from, Int32(byte), to - from) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// `range` with leading and trailing OWS removed.
    @inline(__always) static func trimOWS(_ p: UnsafeRawBufferPointer, _ range: Range<Int>) -> Range<Int> {
        var lo = range.lowerBound
        var hi = range.upperBound
        while lo < hi, isOWS(p[lo]) { lo += 1 }
        while hi > lo, isOWS(p[hi - 1]) { hi -= 1 }
        return lo..<hi
    }

    /// ASCII case-insensitive equality of `p[range]` with an all-lower-case literal.
    static func equalsLowercased(_ p: UnsafeRawBufferPointer, _ range: Range<Int>, _ lower: StaticString) -> Bool {
        lower.withUTF8Buffer { l in
            guard l.count == range.count else { return false }
            var i = 0
            while i < l.count {
                var b = p[range.lowerBound + i]
                if b &- 0x41 < 26 { b |= 0x20 }
                if b != l[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// Calls `body` with each element of a comma-separated list (RFC 9110 5.6.1), OWS-trimmed; empty elements
    /// are passed as empty ranges so that callers can decide to reject them. Stops when `body` returns false.
    static func forEachListElement(
        _ p: UnsafeRawBufferPointer, _ range: Range<Int>, _ body: (Range<Int>) -> Bool
    ) {
        var start = range.lowerBound
        while true {
            let comma = find(UInt8(ascii: ","), in: p, from: start, to: range.upperBound)
            let end = comma ?? range.upperBound
            if !body(trimOWS(p, start..<end)) { return }
            guard let c = comma else { return }
            start = c + 1
        }
    }
}

extension HTTP1Bytes {
    /// Case-sensitive equality of `p[range]` with a literal.
    static func equalsExactly(_ p: UnsafeRawBufferPointer, _ range: Range<Int>, _ literal: StaticString) -> Bool {
        literal.withUTF8Buffer { l in
            guard l.count == range.count else { return false }
            var i = 0
            while i < l.count {
                if p[range.lowerBound + i] != l[i] { return false }
                i += 1
            }
            return true
        }
    }
}
