import Testing
@testable import GatewayProxy
import Attestation
import GatewayCore
import GatewayCrypto
import HTTP1
import JOSE
import KeySetCache

/// The route-level decisions: which header, any-of / all-of, and the verdict headers the upstream gets.
@Suite struct RouteVerificationTests {
    static let key: RSAPrivateKey = try! RSAPrivateKey.generate(bits: 2048)

    func verifier(_ name: String, header: String) -> AppCheckVerifier {
        let key = Self.key
        let keys = KeySetCache<JWKS>(
            policy: .init(maxAgeSeconds: 3600), clock: { 1_800_000_000 },
            fetch: { KeySetFetch(body: Array(("{\"keys\":[" + key.jwk(kid: "k") + "]}").utf8), maxAgeSeconds: nil) },
            parse: { try JWKS.parse($0) }, countKeys: { $0.keys.count })
        keys.refreshIfDue(force: true)
        let policy = AppCheckPolicy(projectNumber: "1", projectID: nil, appIDs: nil, clockSkewSeconds: 60)
        return AppCheckVerifier(name: name, policy: policy, headerName: header, keys: keys)
    }

    func token(expired: Bool = false) -> String {
        let now: Int64 = 1_800_000_000
        let claims: JSONValue = .object(JSONObject([
            ("iss", "https://firebaseappcheck.googleapis.com/1"), ("sub", "1:1:ios:a"), ("aud", ["projects/1"]),
            ("iat", .number(JSONNumber(now - 10))), ("exp", .number(JSONNumber(expired ? now - 3600 : now + 3600))),
        ]))
        return try! JWSSigner.signRS256(claims: claims, kid: "k", key: Self.key)
    }

    func plan(_ verifiers: [AppCheckVerifier], requireAll: Bool = false, monitor: Bool = false) -> RouteVerification {
        Authenticator(verifiers: verifiers, requireAll: requireAll, monitor: monitor, stripTokenHeaders: true, limitedUse: false)
    }

    func head(_ fields: String) -> HTTP1RequestHead {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let bytes = Array(("GET /api HTTP/1.1\r\nHost: h\r\n" + fields + "\r\n").utf8)
        return bytes.withUnsafeBytes { raw in
            guard case .head(let h, _) = parser.next(raw) else { fatalError("test head did not parse") }
            return h
        }
    }

    func decide(_ p: RouteVerification, _ fields: String) -> VerificationDecision {
        var progress = AuthenticationProgress()
        let h = head(fields)
        let step = h.withHeaderView { headers in
            p.evaluate(headers, progress: &progress) { _ in
                VerificationRequest(now: 1_800_000_000, signedLine: h.signedLine, loopState: nil)
            }
        }
        guard case .decided(let d) = step else { fatalError("App Check never suspends") }
        return d
    }

    @Test func noTokenIsAbsentWithMissingToken() {
        let d = decide(plan([verifier("fb", header: "X-Firebase-AppCheck")]), "")
        #expect(d.status == .missingToken)
        #expect("\(d.accessLogVerdict)" == "absent")
    }

    @Test func aRepeatedOrEmptyTokenHeaderIsMalformed() {
        let p = plan([verifier("fb", header: "X-Firebase-AppCheck")])
        #expect(decide(p, "X-Firebase-AppCheck: \(token())\r\nx-firebase-appcheck: \(token())\r\n").status == .malformedToken)
        #expect(decide(p, "X-Firebase-AppCheck: \r\n").status == .malformedToken)
    }

    @Test func anyOfPassesWhenOneVerifierPasses() {
        let p = plan([verifier("a", header: "X-A"), verifier("b", header: "X-B")])
        let d = decide(p, "X-A: \(token(expired: true))\r\nX-B: \(token())\r\n")
        guard case .verified(let i, _) = d else { Issue.record("expected a pass, got \(d)"); return }
        #expect(i == 1)
        // With only a failing token present, the failure decides.
        #expect(decide(p, "X-A: \(token(expired: true))\r\n").status == .expired)
    }

    @Test func requireAllNeedsEveryVerifier() {
        let p = plan([verifier("a", header: "X-A"), verifier("b", header: "X-B")], requireAll: true)
        #expect(decide(p, "X-A: \(token())\r\n").status == .missingToken)
        #expect(decide(p, "X-A: \(token())\r\nX-B: \(token(expired: true))\r\n").status == .expired)
        #expect(decide(p, "X-A: \(token())\r\nX-B: \(token())\r\n").status == nil)
    }

    @Test func verdictHeadersNameTheVerifierAndApp() {
        let p = plan([verifier("fb", header: "X-Firebase-AppCheck")])
        let out = ByteBuffer(capacity: 64)
        p.appendVerdictHeaders(decide(p, "X-Firebase-AppCheck: \(token())\r\n"), to: out)
        #expect(String(decoding: out.readable, as: UTF8.self) ==
                "X-Attest-Verdict: verified\r\nX-Attest-Verifier: fb\r\nX-Attest-App-Id: 1:1:ios:a\r\n")
        out.clear()
        p.appendVerdictHeaders(decide(p, "X-Firebase-AppCheck: \(token(expired: true))\r\n"), to: out)
        #expect(String(decoding: out.readable, as: UTF8.self) ==
                "X-Attest-Verdict: failed\r\nX-Attest-Verifier: fb\r\nX-Attest-Reason: expired\r\n")
    }

    @Test func tokenHeadersAreStrippedFromTheUpstreamRequest() {
        let h = head("X-Firebase-AppCheck: abc\r\nAccept: */*\r\n")
        let out = ByteBuffer(capacity: 128)
        HeaderFilter.appendUpstreamRequestHead(h, basePath: [], clientAddress: Array("1.2.3.4".utf8),
                                               strip: [Array("x-firebase-appcheck".utf8)], to: out)
        let text = String(decoding: out.readable, as: UTF8.self)
        #expect(!text.contains("abc"))
        #expect(text.contains("Accept: */*"))
    }
}
