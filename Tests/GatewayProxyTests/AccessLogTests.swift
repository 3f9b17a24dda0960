#if canImport(Glibc)
import Glibc
#endif
import Testing
import Observability

/// The access log's buffer: lines written whole and in order, however often it flushes and compacts.
@Suite struct AccessLogTests {
    @Test func manyLongLinesInOneBatchComeOutWholeAndInOrder() throws {
        // Enough long lines in one batch that the buffer flushes part of it, then compacts while a line is being
        // written (the line's start must survive that move).
        var template = Array("/tmp/access-log-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        defer { close(fd); unlink(template) }
        let log = AccessLog(fd: fd)
        let method: StaticString = "GET"
        func padding(_ i: Int) -> String { String(repeating: "a", count: 50 + i * 397 % 6000) }
        for i in 0..<500 {
            var path = Array("/p/\(i)/\(padding(i))".utf8)
            path.withUnsafeMutableBytes { p in
                log.record(time: 0, route: Array("null".utf8),
                           method: UnsafeRawBufferPointer(start: method.utf8Start, count: method.utf8CodeUnitCount),
                           path: UnsafeRawBufferPointer(p), status: 200, upstreamStatus: 200, bytesIn: 1, bytesOut: 2,
                           verdict: "none")
            }
        }
        log.flush()
        lseek(fd, 0, SEEK_SET)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 501)
        var broken: [Int] = []   // indices only: the lines are kilobytes long
        for (i, line) in lines.dropLast().enumerated() {
            let whole = line.hasPrefix("{\"time\":\"") && line.hasSuffix("}")
            if !whole || !line.contains("\"path\":\"/p/\(i)/\(padding(i))\"") { broken.append(i) }
        }
        #expect(broken.isEmpty, "lines broken or out of place: \(broken.prefix(10))")
    }
}
