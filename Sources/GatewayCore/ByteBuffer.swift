#if canImport(Glibc)
import Glibc
#endif

/// A growable byte buffer for the request path: one allocation, reused for the life of a connection.
///
/// Readable bytes live in `[readerIndex, writerIndex)`. Loop-confined: never shared between threads.
public final class ByteBuffer {
    public private(set) var base: UnsafeMutableRawPointer
    public private(set) var capacity: Int
    public private(set) var readerIndex = 0
    public private(set) var writerIndex = 0

    public init(capacity: Int) {
        self.capacity = max(capacity, 16)
        self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    @inline(__always) public var readableBytes: Int { writerIndex - readerIndex }
    @inline(__always) public var isEmpty: Bool { writerIndex == readerIndex }
    @inline(__always) public var writableBytes: Int { capacity - writerIndex }

    /// The readable bytes, valid until the next mutation.
    @inline(__always) public var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + readerIndex, count: writerIndex - readerIndex)
    }

    /// Where the next bytes are written, valid until the next mutation; call `didWrite` afterwards.
    @inline(__always) public var writablePointer: UnsafeMutableRawPointer { base + writerIndex }

    @inline(__always) public func didWrite(_ n: Int) { writerIndex += n }

    /// Drops `n` bytes from the front; resets to the start when empty so the buffer never creeps forward.
    @inline(__always) public func consume(_ n: Int) {
        readerIndex += n
        if readerIndex == writerIndex { readerIndex = 0; writerIndex = 0 }
    }

    public func clear() { readerIndex = 0; writerIndex = 0 }

    /// Makes room for at least `n` more bytes at the end, compacting first and growing when needed.
    public func reserve(_ n: Int) {
        if writableBytes >= n { return }
        if readerIndex > 0 {
            let count = readableBytes
            if count > 0 { memmove(base, base + readerIndex, count) }
            readerIndex = 0
            writerIndex = count
            if writableBytes >= n { return }
        }
        var newCapacity = capacity
        while newCapacity - writerIndex < n { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if writerIndex > 0 { newBase.copyMemory(from: base, byteCount: writerIndex) }
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    /// Moves readable bytes to the front (so a full buffer can read more).
    public func compact() {
        guard readerIndex > 0 else { return }
        let count = readableBytes
        if count > 0 { memmove(base, base + readerIndex, count) }
        readerIndex = 0
        writerIndex = count
    }

    @inline(__always) public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + writerIndex).copyMemory(from: src, byteCount: bytes.count)
        writerIndex += bytes.count
    }

    @inline(__always) public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    @inline(__always) public func append(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { append($0) }
    }

    @inline(__always) public func append(_ s: StaticString) {
        append(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    public func append(_ s: String) {
        var s = s
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always) public func append(byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: writerIndex, as: UInt8.self)
        writerIndex += 1
    }

    /// Appends `value` in decimal ASCII.
    public func appendDecimal(_ value: Int) {
        reserve(21)
        var v = value
        if v < 0 { append(byte: UInt8(ascii: "-")); v = -v }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let n = withUnsafeMutableBytes(of: &digits) { d -> Int in
            var i = 0
            repeat { d[i] = UInt8(truncatingIfNeeded: v % 10) &+ 48; v /= 10; i += 1 } while v > 0
            return i
        }
        withUnsafeBytes(of: &digits) { d in
            var i = n - 1
            while i >= 0 { base.storeBytes(of: d[i], toByteOffset: writerIndex, as: UInt8.self); writerIndex += 1; i -= 1 }
        }
    }

    /// Appends `value` in lower-case hexadecimal ASCII (chunk sizes).
    public func appendHex(_ value: Int) {
        reserve(16)
        var shift = 60
        while shift > 0 && (value >> shift) & 0xF == 0 { shift -= 4 }
        while shift >= 0 {
            let nibble = UInt8((value >> shift) & 0xF)
            append(byte: nibble < 10 ? nibble &+ 48 : nibble &+ 87)
            shift -= 4
        }
    }
}
