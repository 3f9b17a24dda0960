internal import CCBOR

/// The result of decoding one item from the front of some bytes.
public struct CBORDecodedPrefix: Sendable, Equatable {
    /// The item.
    public let value: CBORValue
    /// How many input bytes the item occupied; bytes after that were not looked at.
    public let bytesConsumed: Int
}

/// Decodes CBOR with libcbor, behind a structural pre-scan that enforces `limits`.
///
/// Accepted: definite-length items of every major type. Rejected, always: indefinite-length strings, arrays
/// and maps (App Attest never produces them, and refusing them keeps one encoding per value), maps with
/// duplicate keys (ambiguous lookups are a classic parser-differential hole), invalid UTF-8 in text strings.
public struct CBORDecoder: Sendable {
    /// The limits checked before libcbor is called.
    public var limits: CBORDecoderLimits

    public init(limits: CBORDecoderLimits = .default) {
        self.limits = limits
    }

    /// Decodes `bytes`, which must hold exactly one item.
    public func decode(_ bytes: [UInt8]) -> Result<CBORValue, CBORError> {
        decodePrefix(bytes).flatMap { decoded in
            decoded.bytesConsumed == bytes.count
                ? .success(decoded.value) : .failure(CBORError(.trailingBytes, at: decoded.bytesConsumed))
        }
    }

    /// Decodes the first item of `bytes` and reports how many bytes it used, so the caller can continue
    /// after it (authenticator data carries a COSE key followed by an extensions map).
    public func decodePrefix(_ bytes: [UInt8]) -> Result<CBORDecodedPrefix, CBORError> {
        guard bytes.count <= limits.maxInputBytes else { return .failure(CBORError(.inputTooLarge, at: 0)) }
        guard !bytes.isEmpty else { return .failure(CBORError(.truncated, at: 0)) }
        return bytes.withUnsafeBytes { raw -> Result<CBORDecodedPrefix, CBORError> in
            do throws(CBORError) {
                let length = try CBORStructureScanner.itemLength(of: raw, limits: limits)
                let root = try LoadedCBORItem.load(raw)
                // libcbor and the scanner must agree on where the item ends; if not, trust neither.
                guard root.bytesRead == length else { throw CBORError(.malformed, at: min(length, root.bytesRead)) }
                let value = try root.value(offset: 0)
                return .success(CBORDecodedPrefix(value: value, bytesConsumed: length))
            } catch {
                return .failure(error)
            }
        }
    }
}

/// Owns one reference to a libcbor item and drops it in `deinit`, the only place it is released.
private final class LoadedCBORItem {
    let item: UnsafeMutablePointer<cbor_item_t>
    let bytesRead: Int

    private init(item: UnsafeMutablePointer<cbor_item_t>, bytesRead: Int) {
        self.item = item
        self.bytesRead = bytesRead
    }

    deinit {
        var pointer: UnsafeMutablePointer<cbor_item_t>? = item
        cbor_decref(&pointer)
    }

    static func load(_ raw: UnsafeRawBufferPointer) throws(CBORError) -> LoadedCBORItem {
        var result = cbor_load_result()
        let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
        guard let item = cbor_load(base, raw.count, &result) else {
            let at = Int(result.error.position)
            switch result.error.code {
            case CBOR_ERR_NOTENOUGHDATA, CBOR_ERR_NODATA: throw CBORError(.truncated, at: at)
            case CBOR_ERR_MEMERROR: throw CBORError(.outOfMemory, at: at)
            default: throw CBORError(.malformed, at: at)
            }
        }
        return LoadedCBORItem(item: item, bytesRead: Int(result.read))
    }

    /// Copies the item tree into Swift values. `offset` only labels errors (libcbor keeps no positions).
    func value(offset: Int) throws(CBORError) -> CBORValue {
        try Self.convert(item, offset: offset)
    }

    private static func convert(_ item: UnsafeMutablePointer<cbor_item_t>, offset: Int) throws(CBORError) -> CBORValue {
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT:
            return .unsigned(cbor_get_int(item))
        case CBOR_TYPE_NEGINT:
            return .negative(cbor_get_int(item))
        case CBOR_TYPE_BYTESTRING:
            guard cbor_bytestring_is_definite(item) else { throw CBORError(.indefiniteLength, at: offset) }
            return .bytes(copy(cbor_bytestring_handle(item), count: cbor_bytestring_length(item)))
        case CBOR_TYPE_STRING:
            guard cbor_string_is_definite(item) else { throw CBORError(.indefiniteLength, at: offset) }
            let utf8 = copy(cbor_string_handle(item), count: cbor_string_length(item))
            guard let text = String(validating: utf8, as: UTF8.self) else { throw CBORError(.invalidUTF8, at: offset) }
            return .text(text)
        case CBOR_TYPE_ARRAY:
            guard cbor_array_is_definite(item) else { throw CBORError(.indefiniteLength, at: offset) }
            let count = cbor_array_size(item)
            guard count > 0 else { return .array([]) }
            guard let handle = cbor_array_handle(item) else { throw CBORError(.malformed, at: offset) }
            var elements: [CBORValue] = []
            elements.reserveCapacity(count)
            for i in 0..<count {
                guard let element = handle[i] else { throw CBORError(.malformed, at: offset) }
                elements.append(try convert(element, offset: offset))
            }
            return .array(elements)
        case CBOR_TYPE_MAP:
            guard cbor_map_is_definite(item) else { throw CBORError(.indefiniteLength, at: offset) }
            let count = cbor_map_size(item)
            guard count > 0 else { return .map([]) }
            guard let handle = cbor_map_handle(item) else { throw CBORError(.malformed, at: offset) }
            var entries: [(CBORValue, CBORValue)] = []
            entries.reserveCapacity(count)
            for i in 0..<count {
                guard let k = handle[i].key, let v = handle[i].value else { throw CBORError(.malformed, at: offset) }
                let key = try convert(k, offset: offset)
                // Quadratic, but maps are bounded by maxItems (and App Attest maps hold at most five entries).
                guard !entries.contains(where: { $0.0 == key }) else { throw CBORError(.duplicateMapKey, at: offset) }
                entries.append((key, try convert(v, offset: offset)))
            }
            return .map(entries)
        case CBOR_TYPE_TAG:
            // cbor_tag_item hands out a new reference; the wrapper's deinit gives it back.
            guard let tagged = cbor_tag_item(item) else { throw CBORError(.malformed, at: offset) }
            let owner = LoadedCBORItem(item: tagged, bytesRead: 0)
            return .tag(cbor_tag_value(item), try owner.value(offset: offset))
        default:  // CBOR_TYPE_FLOAT_CTRL
            if cbor_float_ctrl_is_ctrl(item) {
                switch cbor_ctrl_value(item) {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 23: return .undefined
                case let other: return .simple(other)
                }
            }
            return .float(cbor_float_get_float(item))
        }
    }

    private static func copy(_ pointer: UnsafeMutablePointer<UInt8>?, count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: count))
    }
}
