import Testing
@testable import GatewayProxy
import GatewayCore
import HTTP1
import HTTP2
import Attestation

/// The pieces gRPC and HTTP/2 upstreams are built from: the request head turned into an h2 header block, an h2
/// response head read as the exchange reads heads, trailer filtering, the gRPC form of local answers, and how a
/// request is recognised as a gRPC call.
@Suite struct GRPCPiecesTests {
    func block(_ text: String, https: Bool = false, te: Bool = false) -> ([(String, String)], Bool)? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> ([(String, String)], Bool)? in
            guard let (f, hasBody) = UpstreamH2Stream.headerBlock(raw, scheme: https, teTrailers: te,
                                                                  defaultAuthority: "api.internal") else { return nil }
            return (f.fields.map { (String(decoding: f.bytes[$0.name], as: UTF8.self),
                                    String(decoding: f.bytes[$0.value], as: UTF8.self)) }, hasBody)
        }
    }

    @Test func headerBlockHasPseudoHeadersFirstAndNoConnectionFields() throws {
        let (fields, hasBody) = try #require(block(
            "POST /svc.Echo/Call HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/grpc\r\nConnection: close\r\n" +
            "Keep-Alive: 5\r\nTransfer-Encoding: chunked\r\nUpgrade: h2c\r\nTE: trailers\r\nX-Attest-Verdict: verified\r\n\r\n",
            te: true))
        #expect(fields.prefix(4).map(\.0) == [":method", ":scheme", ":authority", ":path"])
        #expect(fields[0].1 == "POST" && fields[1].1 == "http" && fields[2].1 == "gw.test" && fields[3].1 == "/svc.Echo/Call")
        let names = fields.map(\.0)
        #expect(!names.contains("host") && !names.contains("connection") && !names.contains("keep-alive"))
        #expect(!names.contains("transfer-encoding") && !names.contains("upgrade"))
        #expect(names.filter { $0 == "te" }.count == 1, "te: trailers once, ours")
        #expect(fields.contains { $0 == ("te", "trailers") })
        #expect(fields.contains { $0 == ("content-type", "application/grpc") }, "names are lower-cased")
        #expect(fields.contains { $0 == ("x-attest-verdict", "verified") })
        #expect(hasBody, "a chunked request has a body")
    }

    @Test func headerBlockWithoutHostUsesTheUpstreamNameAndHttpsScheme() throws {
        let (fields, hasBody) = try #require(block("GET /x?y=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", https: true))
        #expect(fields[1].1 == "https" && fields[2].1 == "api.internal" && fields[3].1 == "/x?y=1")
        #expect(!hasBody, "Content-Length 0 is no body")
        #expect(!fields.contains { $0.0 == "te" }, "no te unless the client takes trailers")
    }

    @Test func headerBlockRefusesWhatIsNotAHead() {
        #expect(block("GARBAGE\r\n\r\n") == nil)
        #expect(block("GET / HTTP/1.1\r\nno colon here\r\n\r\n") == nil)
    }

    func h2Head(_ pairs: [(String, String)], status: Int = 200, endStream: Bool = false, head: Bool = false) -> HTTP1ResponseHead? {
        var f = H2Fields()
        for (n, v) in pairs { Array(n.utf8).withUnsafeBytes { nb in Array(v.utf8).withUnsafeBytes { f.add(nb, $0) } } }
        return HTTP1ResponseHead.fromHTTP2(bytes: f.bytes, status: status, fields: f.fields, endStream: endStream, toHEAD: head)
    }

    @Test func h2ResponseFraming() throws {
        #expect(try #require(h2Head([("content-length", "12")])).framing == .contentLength(12))
        #expect(try #require(h2Head([("content-type", "application/grpc")])).framing == .untilClose, "ends with the stream")
        #expect(try #require(h2Head([("grpc-status", "16")], endStream: true)).framing == .none, "trailers-only")
        #expect(try #require(h2Head([("content-length", "5")], status: 204)).framing == .none)
        #expect(try #require(h2Head([("content-length", "5")], head: true)).framing == .none)
        #expect(try #require(h2Head([("content-length", "5"), ("content-length", "5")])).framing == .contentLength(5))
        #expect(h2Head([("content-length", "5"), ("content-length", "6")]) == nil, "two lengths: refused")
        #expect(h2Head([("content-length", "-1")]) == nil)
        #expect(h2Head([("content-length", "1e3")]) == nil)
    }

    @Test func trailersKeepGRPCStatusAndDropFramingAndAuthFields() {
        let allowed = ["grpc-status", "grpc-message", "grpc-status-details-bin", "x-trailer"]
        let refused = ["content-length", "Transfer-Encoding", "host", "authorization", "set-cookie", "connection",
                       "x-attest-verdict", "te", "trailer", "bad name", ""]
        for n in allowed {
            #expect(Array(n.utf8).withUnsafeBytes { HeaderFilter.allowedInTrailer($0) }, "\(n)")
        }
        for n in refused {
            #expect(!Array(n.utf8).withUnsafeBytes { HeaderFilter.allowedInTrailer($0) }, "\(n)")
        }
    }

    @Test func chunkedTrailersAreWrittenAfterTheLastChunk() {
        var t = H2Fields()
        for (n, v) in [("grpc-status", "0"), ("content-length", "9")] {
            Array(n.utf8).withUnsafeBytes { nb in Array(v.utf8).withUnsafeBytes { t.add(nb, $0) } }
        }
        let out = ByteBuffer(capacity: 64)
        out.appendLastChunk(trailers: t)
        #expect(String(decoding: out.readable, as: UTF8.self) == "0\r\ngrpc-status: 0\r\n\r\n")
    }

    @Test func localAnswersToGRPCCallsAreTrailersOnlyWithTheMappedStatus() {
        let cases: [(LocalResponse, Int, String)] = [
            (.rejected(.missingToken), 16, "missing_token"),
            (.rejected(.appNotAllowed), 7, "app_not_allowed"),
            (.notFound(), 12, "not_found"),
            (.payloadTooLarge(), 8, "body_too_large"),
            (.badGateway("upstream_unreachable"), 14, "upstream_unreachable"),
            (.gatewayTimeout(), 4, "upstream_timeout"),
            (.ambiguousPath(), 3, "ambiguous_path"),
        ]
        for (r, code, message) in cases {
            var g = r
            g.grpc = true
            #expect(g.wireStatus == 200 && g.grpcStatus == code && g.body.isEmpty, "\(r.status)")
            let f = g.fields(date: Array("Thu, 03 Dec 2026 06:00:00 GMT".utf8), bodyLength: 0)
            #expect(f.contains { $0 == ("grpc-status", String(code)) } && f.contains { $0 == ("grpc-message", message) })
            #expect(f.contains { $0 == ("content-type", "application/grpc") })
            let out = ByteBuffer(capacity: 256)
            g.append(to: out, close: false, date: Array("Thu, 03 Dec 2026 06:00:00 GMT".utf8))
            let text = String(decoding: out.readable, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n") && text.contains("grpc-status: \(code)\r\n") && text.hasSuffix("Content-Length: 0\r\n\r\n"))
        }
    }

    func parse(_ text: String) -> HTTP1RequestHead? {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> HTTP1RequestHead? in
            if case .head(let h, _) = parser.next(raw) { return h }
            return nil
        }
    }

    @Test func chunkedTrailerLinesBecomeLowerCasedFieldsWithoutWhitespace() {
        let t = UpstreamConnection.trailerFields(Array("X-Sum: 1 \r\nX-B:2\r\nX-Empty:\t\r\n".utf8))
        let pairs = t.fields.map { (String(decoding: t.bytes[$0.name], as: UTF8.self), String(decoding: t.bytes[$0.value], as: UTF8.self)) }
        #expect(pairs.map(\.0) == ["x-sum", "x-b", "x-empty"] && pairs.map(\.1) == ["1", "2", ""])
    }

    @Test func grpcCallsAreRecognisedByContentType() {
        func grpc(_ ct: String) -> Bool { parse("POST /a HTTP/1.1\r\nHost: x\r\nContent-Type: \(ct)\r\nContent-Length: 0\r\n\r\n")?.grpc ?? false }
        #expect(grpc("application/grpc"))
        #expect(grpc("application/grpc+proto"))
        #expect(grpc("Application/GRPC;charset=utf-8"))
        #expect(!grpc("application/grpc-web"), "grpc-web is HTTP/1.1-shaped: its errors are not trailers-only here")
        #expect(!grpc("application/grpcx"))
        #expect(!grpc("application/json"))
        #expect(parse("GET /a HTTP/1.1\r\nHost: x\r\nTE: gzip, trailers\r\n\r\n")?.teTrailers == true)
        #expect(parse("GET /a HTTP/1.1\r\nHost: x\r\nTE: gzip\r\n\r\n")?.teTrailers == false)
    }
}
