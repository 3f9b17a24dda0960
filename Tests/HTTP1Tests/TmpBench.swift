import HTTP1
import Testing
import Foundation

@Test func tmpBench() {
    let req = Array("GET /api/v1/items?id=12345 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: wrk/4.2\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\nX-Request-Id: 0123456789abcdef\r\nAuthorization: Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnopqrstuvwxyz\r\nCookie: session=abcdef0123456789; theme=dark\r\n\r\n".utf8)
    var parser = HTTP1RequestParser(limits: HTTP1Limits())
    let n = 200_000
    var total = 0
    let t0 = Date()
    req.withUnsafeBytes { p in
        for _ in 0..<n {
            if case .head(let h, let c) = parser.next(p) { total &+= h.fields.count &+ c }
            _ = parser.next(p)
        }
    }
    let dt = Date().timeIntervalSince(t0)
    print("BENCH \(req.count) bytes: \(dt / Double(n) * 1e9) ns/request total=\(total)")
}
