import Testing
@testable import GatewayProxy
import HTTP1
import GatewayCore

/// The pieces WebSocket routes are built from: which heads are an RFC 6455 opening handshake, and
/// `token_query_parameter` moving a token from the query into the verifier's header.
@Suite struct UpgradePiecesTests {
    func parse(_ text: String) -> HTTP1RequestHead? { GRPCPiecesTests().parse(text) }

    func handshake(_ requestLine: String = "GET /ws HTTP/1.1", _ fields: String) -> Bool {
        parse("\(requestLine)\r\nHost: x\r\n\(fields)\r\n")?.isWebSocketHandshake ?? false
    }

    @Test func aHandshakeNeedsGetHTTP11UpgradeWebsocketAndConnectionUpgrade() {
        #expect(handshake(_: "GET /ws HTTP/1.1", "Upgrade: websocket\r\nConnection: Upgrade\r\n"))
        #expect(handshake(_: "GET /ws HTTP/1.1", "Upgrade: WebSocket\r\nConnection: keep-alive, upgrade\r\n"),
                "tokens are case-insensitive and Connection is a list")
        #expect(!handshake(_: "GET /ws HTTP/1.1", "Upgrade: websocket\r\n"), "no Connection: upgrade")
        #expect(!handshake(_: "GET /ws HTTP/1.1", "Connection: upgrade\r\n"), "no Upgrade")
        #expect(!handshake(_: "GET /ws HTTP/1.1", "Upgrade: h2c\r\nConnection: upgrade\r\n"), "another protocol")
        #expect(!handshake("POST /ws HTTP/1.1", "Upgrade: websocket\r\nConnection: upgrade\r\nContent-Length: 0\r\n"))
        #expect(!handshake("GET /ws HTTP/1.0", "Upgrade: websocket\r\nConnection: upgrade\r\n"))
        #expect(!handshake(_: "GET /ws HTTP/1.1", "Upgrade: websocket\r\nConnection: upgrade\r\nContent-Length: 5\r\n"),
                "a handshake has no body")
    }

    let sources = [QueryTokenSource(parameter: Array("appcheck".utf8), header: Array("X-Firebase-AppCheck".utf8))]

    /// The rebuilt head; nil when nothing moved (a parse failure is recorded as an issue).
    func rewrite(_ target: String, _ fields: String = "") -> HTTP1RequestHead? {
        guard let head = parse("GET \(target) HTTP/1.1\r\nHost: x\r\n\(fields)\r\n") else {
            Issue.record("the test head does not parse")
            return nil
        }
        guard let r = QueryTokenSource.rewrite(head, sources, limits: HTTP1Limits()) else { return nil }
        guard case .success(let rebuilt) = r else {
            Issue.record("the rebuilt head does not parse")
            return nil
        }
        return rebuilt
    }

    func values(_ h: HTTP1RequestHead, _ name: String) -> [String] {
        h.fields.filter { h.string($0.name).lowercased() == name }.map { h.string($0.value) }
    }

    @Test func theParameterLeavesTheTargetAndBecomesTheHeader() throws {
        let h = try #require(rewrite("/ws?a=1&appcheck=tok.en.sig&b=2"))
        #expect(h.string(h.target) == "/ws?a=1&b=2", "the other parameters keep their order")
        #expect(values(h, "x-firebase-appcheck") == ["tok.en.sig"])
        #expect(values(h, "host") == ["x"], "the received fields stay")
    }

    @Test func theOnlyParameterLeavesNoQuestionMark() throws {
        let h = try #require(rewrite("/ws?appcheck=t"))
        #expect(h.string(h.target) == "/ws")
    }

    @Test func twoCopiesBecomeTwoHeadersNotOnePicked() throws {
        let h = try #require(rewrite("/ws?appcheck=a&appcheck=b"))
        #expect(values(h, "x-firebase-appcheck") == ["a", "b"])
        let both = try #require(rewrite("/ws?appcheck=a", "X-Firebase-AppCheck: h\r\n"))
        #expect(values(both, "x-firebase-appcheck") == ["h", "a"], "a header and a parameter: both stay, for the verifier to refuse")
    }

    @Test func otherNamesAndNoQueryAreLeftAlone() {
        #expect(rewrite("/ws") == nil)
        #expect(rewrite("/ws?appcheckx=1&xappcheck=2") == nil, "names compare whole")
        #expect(rewrite("/ws?AppCheck=1") == nil, "names compare byte for byte")
    }

    @Test func aValueThatCannotBeAFieldValueIsRefusedByTheParser() throws {
        // %0D%0A stays percent-encoded (no decoding here), so it cannot split the rebuilt head.
        let h = try #require(rewrite("/ws?appcheck=a%0D%0AX-Evil:%201"))
        #expect(values(h, "x-firebase-appcheck") == ["a%0D%0AX-Evil:%201"])
        #expect(values(h, "x-evil").isEmpty)
    }
}
