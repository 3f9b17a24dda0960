public import HTTP1
/// The `paths` section, and the check that routes' match paths are written the way requests are routed.
extension ConfigLoader {
    static func decodePaths(_ top: MappingReader) -> PathsConfig {
        var paths = PathsConfig()
        guard let map = top.mapping("paths") else { return paths }
        map.rejectUnknownKeys(allowed: ["merge_slashes", "escaped_slashes", "path_parameters"])
        if let value = map.bool("merge_slashes") { paths.mergeSlashes = value }
        if let value = map.oneOf("escaped_slashes", [PathsConfig.Action.reject, .keep]) { paths.escapedSlashes = value }
        if let value = map.oneOf("path_parameters", [PathsConfig.Action.reject, .keep]) { paths.pathParameters = value }
        return paths
    }

    /// Requests are routed on their canonical path, so a match path spelled any other way would silently never
    /// match (`/api/./x`, `/%61pi/`) or match something else than it reads. It must already be canonical; the message
    /// says what to write instead. Returns whether `text` (the value of `key`, `path` or `path_prefix`) is usable.
    static func checkCanonical(_ text: String, key: String, paths: PathsConfig, _ map: MappingReader) -> Bool {
        if text.contains("?") {
            map.report("\(key) \"\(text)\" contains a query (\"?\"); routes match the path only", key: key)
            return false
        }
        if let encoded = encodingUnsendable(text) {
            map.report("\(key) \"\(text)\" can never match: requests carry these characters percent-encoded (write \"\(encoded)\")",
                       key: key)
            return false
        }
        if hasMalformedEscape(text) {
            map.report("\(key) \"\(text)\" has a malformed %-escape (use %XX with two hex digits)", key: key)
            return false
        }
        let bytes = Array(text.utf8)
        let result = bytes.withUnsafeBytes { RequestTargetCanonicalizer.canonicalize($0, options: paths.canonicalizerOptions) }
        switch result {
        case .unchanged:
            return true
        case .canonical(let canonical):
            let spelled = String(decoding: canonical, as: UTF8.self)
            map.report("\(key) \"\(text)\" is not canonical; requests are routed on the canonical path \"\(spelled)\"", key: key)
            return false
        case .ambiguous:
            map.report("\(key) \"\(text)\" can never match: requests with this spelling are refused (ambiguous_path)", key: key)
            return false
        }
    }

    /// `text` with the bytes a request-target cannot carry raw (controls, space, DEL, non-ASCII) percent-encoded,
    /// or nil when it has none.
    static func encodingUnsendable(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard bytes.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else { return nil }
        var out = ""
        for b in bytes {
            if b <= 0x20 || b >= 0x7F {
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(b >> 4)]) + String(hex[Int(b & 0xF)])
            } else {
                out.append(Character(Unicode.Scalar(b)))
            }
        }
        return out
    }

    /// A `%` not followed by two hex digits (the canonicaliser refuses it too, but "can never match" would be wrong
    /// for a prefix cut inside an escape).
    static func hasMalformedEscape(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, isHex(bytes[i + 1]), isHex(bytes[i + 2]) else { return true }
                i += 3
            } else {
                i += 1
            }
        }
        return false
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66)
    }
}

extension PathsConfig {
    /// The canonicaliser's options these settings stand for: what the loader checks match paths with, and what the
    /// request path should canonicalise targets with, so the two can never disagree.
    public var canonicalizerOptions: RequestTargetCanonicalizer.Options {
        RequestTargetCanonicalizer.Options(mergeSlashes: mergeSlashes, keepEscapedSlashes: escapedSlashes == .keep,
                                           keepPathParameters: pathParameters == .keep)
    }
}
