#if canImport(Glibc)
import Glibc
#endif

/// A growable byte buffer for the request path: one allocation, reused for the life of a connection.
///
/// Readable bytes live in `[readerIndex, writerIndex)`. Loop-confined: never shared between threads.
public final class ByteBuffer {
    // Internal storage, visible to the inlinable fast paths below (profiled: these run several times per request).
    @usableFromInline var _base: UnsafeMutableRawPointer
    @usableFromInline var _capacity: Int
    @usableFromInline var _readerIndex = 0
    @usableFromInline var _writerIndex = 0

    public init(capacity: Int) {
        _capacity = max(capacity, 16)
        _base = UnsafeMutableRawPointer.allocate(byteCount: _capacity, alignment: 16)
    }

    deinit { _base.deallocate() }

    @inlinable public var base: UnsafeMutableRawPointer { _base }
    @inlinable public var capacity: Int { _capacity }
    @inlinable public var readerIndex: Int { _readerIndex }
    @inlinable public var writerIndex: Int { _writerIndex }
    @inlinable public var readableBytes: Int { _writerIndex - _readerIndex }
    @inlinable public var isEmpty: Bool { _writerIndex == _readerIndex }
    @inlinable public var writableBytes: Int { _capacity - _writerIndex }

    /// The readable bytes, valid until the next mutation.
    @inlinable public var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: _base + _readerIndex, count: _writerIndex - _readerIndex)
    }

    /// Where the next bytes are written, valid until the next mutation; call `didWrite` afterwards.
    @inlinable public var writablePointer: UnsafeMutableRawPointer { _base + _writerIndex }

    @inlinable public func didWrite(_ n: Int) { _writerIndex += n }

    /// Drops `n` bytes from the front; resets to the start when empty so the buffer never creeps forward.
    @inlinable public func consume(_ n: Int) {
        _readerIndex += n
        if _readerIndex == _writerIndex { _readerIndex = 0; _writerIndex = 0 }
    }

    public func clear() { _readerIndex = 0; _writerIndex = 0 }

    /// Makes room for at least `n` more bytes at the end, compacting first and growing when needed.
    @inlinable public func reserve(_ n: Int) {
        if _capacity - _writerIndex >= n { return }
        makeRoom(n)
    }

    @usableFromInline func makeRoom(_ n: Int) {
        if readerIndex > 0 {
            let count = readableBytes
            if count > 0 { memmove(base, base + readerIndex, count) }
            _readerIndex = 0
            _writerIndex = count
            if writableBytes >= n { return }
        }
        var newCapacity = capacity
        while newCapacity - writerIndex < n { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if writerIndex > 0 { newBase.copyMemory(from: base, byteCount: writerIndex) }
        _base.deallocate()
        _base = newBase
        _capacity = newCapacity
    }

    /// Moves readable bytes to the front (so a full buffer can read more).
    public func compact() {
        guard readerIndex > 0 else { return }
        let count = readableBytes
        if count > 0 { memmove(base, base + readerIndex, count) }
        _readerIndex = 0
        _writerIndex = count
    }

    @inlinable public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (_base + _writerIndex).copyMemory(from: src, byteCount: bytes.count)
        _writerIndex += bytes.count
    }

    @inline(__always) public func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    @inline(__always) public func append(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { append($0) }
    }

    @inlinable public func append(_ s: StaticString) {
        append(UnsafeRawBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    public func append(_ s: String) {
        var s = s
        s.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    @inlinable public func append(byte: UInt8) {
        reserve(1)
        _base.storeBytes(of: byte, toByteOffset: _writerIndex, as: UInt8.self)
        _writerIndex += 1
    }

    /// Appends `value` in decimal ASCII.
    @inlinable public func appendDecimal(_ value: Int) {
        reserve(21)
        var v = value.magnitude
        if value < 0 { append(byte: UInt8(ascii: "-")) }
        var digits = 1
        var t = v
        while t >= 10 { t /= 10; digits += 1 }
        var i = _writerIndex + digits - 1
        repeat {
            _base.storeBytes(of: UInt8(truncatingIfNeeded: v % 10) &+ 48, toByteOffset: i, as: UInt8.self)
            v /= 10
            i -= 1
        } while v > 0
        _writerIndex += digits
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
