#if canImport(Glibc)
import Glibc
#endif
internal import CCBOR
import CBOR

/// Encodes a `CBORValue` with libcbor (`cbor_serialize_alloc`), the mirror image of the CBOR module's decoder.
///
/// Integers and lengths take their shortest form and map entries keep their order, so the bytes are what a
/// device's CBOR encoder writes (RFC 8949 preferred serialisation). Floats and simple values other than
/// booleans and null are not needed by App Attest and are refused.
enum CBOREncoding {
    struct Unsupported: Error, CustomStringConvertible {
        let description: String
    }

    static func encode(_ value: CBORValue) throws -> [UInt8] {
        let item = try CBORItem.build(value)
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var capacity = 0
        let length = cbor_serialize_alloc(item.raw, &buffer, &capacity)
        defer { free(buffer) }
        guard length > 0, let buffer else { throw Unsupported(description: "cbor_serialize_alloc failed") }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }
}

/// One reference to a libcbor item, released in `deinit` only. Containers take their own references to the
/// items added to them (`cbor_map_add`, `cbor_array_push`, `cbor_build_tag` all incref), so every builder
/// result is owned by exactly one `CBORItem` and the tree is freed when the root's last reference goes.
private final class CBORItem {
    let raw: UnsafeMutablePointer<cbor_item_t>

    private init(_ raw: UnsafeMutablePointer<cbor_item_t>?) throws {
        guard let raw else { throw CBOREncoding.Unsupported(description: "libcbor allocation failed") }
        self.raw = raw
    }

    deinit {
        var pointer: UnsafeMutablePointer<cbor_item_t>? = raw
        cbor_decref(&pointer)
    }

    static func build(_ value: CBORValue) throws -> CBORItem {
        switch value {
        case .unsigned(let n): return try CBORItem(unsignedItem(n))
        case .negative(let n):
            let item = try CBORItem(unsignedItem(n))
            cbor_mark_negint(item.raw)  // same width, major type 1: the integer -1 - n
            return item
        case .bytes(let bytes):
            guard !bytes.isEmpty else { return try CBORItem(cbor_new_definite_bytestring()) }
            return try CBORItem(bytes.withUnsafeBufferPointer { cbor_build_bytestring($0.baseAddress, $0.count) })
        case .text(let text):
            let utf8 = Array(text.utf8)
            guard !utf8.isEmpty else { return try CBORItem(cbor_new_definite_string()) }
            return try CBORItem(utf8.withUnsafeBufferPointer { p in
                p.withMemoryRebound(to: CChar.self) { cbor_build_stringn($0.baseAddress, $0.count) }
            })
        case .array(let elements):
            let array = try CBORItem(cbor_new_definite_array(elements.count))
            for element in elements {
                let e = try build(element)
                // withExtendedLifetime: `e` must not be released (and freed) before libcbor has taken its reference.
                guard withExtendedLifetime(e, { cbor_array_push(array.raw, e.raw) }) else {
                    throw CBOREncoding.Unsupported(description: "cbor_array_push")
                }
            }
            return array
        case .map(let entries):
            let map = try CBORItem(cbor_new_definite_map(entries.count))
            for (key, value) in entries {
                let k = try build(key), v = try build(value)
                guard withExtendedLifetime((k, v), { cbor_map_add(map.raw, cbor_pair(key: k.raw, value: v.raw)) }) else {
                    throw CBOREncoding.Unsupported(description: "cbor_map_add")
                }
            }
            return map
        case .tag(let tag, let tagged):
            let t = try build(tagged)
            return try withExtendedLifetime(t) { try CBORItem(cbor_build_tag(tag, t.raw)) }
        case .bool(let b): return try CBORItem(cbor_build_bool(b))
        case .null: return try CBORItem(cbor_new_null())
        case .undefined, .simple, .float: throw CBOREncoding.Unsupported(description: "cannot encode \(value)")
        }
    }

    /// A major type 0 item of the narrowest width that holds `n`.
    private static func unsignedItem(_ n: UInt64) -> UnsafeMutablePointer<cbor_item_t>? {
        switch n {
        case 0...UInt64(UInt8.max): cbor_build_uint8(UInt8(n))
        case 0...UInt64(UInt16.max): cbor_build_uint16(UInt16(n))
        case 0...UInt64(UInt32.max): cbor_build_uint32(UInt32(n))
        default: cbor_build_uint64(n)
        }
    }
}
