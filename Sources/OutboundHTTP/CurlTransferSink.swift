/// Collects the body and header lines that libcurl's callbacks deliver for one transfer, enforcing the
/// body limit as bytes arrive (a Content-Length is not trusted to be present or honest).
///
/// Confined to the thread performing the transfer.
final class CurlTransferSink {
    let maxBodyBytes: Int
    private(set) var body: [UInt8] = []
    private(set) var headers: [(name: String, value: String)] = []
    /// Set when the body callback refused bytes because of `maxBodyBytes`.
    private(set) var bodyTooLarge = false

    init(maxBodyBytes: Int) {
        self.maxBodyBytes = max(0, maxBodyBytes)
    }

    /// Appends body bytes; returns false (abort) when the limit would be exceeded.
    func appendBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard body.count + bytes.count <= maxBodyBytes else {
            bodyTooLarge = true
            return false
        }
        body.append(contentsOf: bytes)
        return true
    }

    /// Records one raw header line (with its CRLF). A status line starts a new header block, so only the
    /// final response's fields are kept (not a proxy's CONNECT answer, nor a 100 Continue).
    func appendHeaderLine(_ raw: UnsafeRawBufferPointer) {
        var line = Array(raw)
        while let last = line.last, last == 0x0A || last == 0x0D { line.removeLast() }
        if line.isEmpty { return }
        if line.starts(with: Array("HTTP/".utf8)) {
            headers.removeAll()
            return
        }
        if line[0] == 0x20 || line[0] == 0x09 {
            // Obsolete line folding: the line continues the previous field's value.
            if let previous = headers.popLast() {
                let more = Self.trimmed(line[...])
                headers.append((previous.name, previous.value + " " + String(decoding: more, as: UTF8.self)))
            }
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self)
        let value = String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self)
        headers.append((name, value))
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        return slice
    }
}
