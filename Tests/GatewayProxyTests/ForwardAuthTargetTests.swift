import Testing
@testable import GatewayProxy
import GatewayConfig
import HTTP1

/// Where a forward-auth call's original request comes from, and every call that is refused instead of judged.
@Suite struct ForwardAuthTargetTests {
    static let endpoint = "/.attest/verify"

    func read(_ target: String = endpoint, _ fields: [String] = [], source: ForwardAuthSource = .auto,
              hostRequired: Bool = false, options: RequestTargetCanonicalizer.Options = .init()) -> ForwardAuthTarget.Outcome {
        var parser = HTTP1RequestParser(limits: HTTP1Limits())
        let text = "GET \(target) HTTP/1.1\r\nHost: auth.internal\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"
        let bytes = Array(text.utf8)
        let head: HTTP1RequestHead = bytes.withUnsafeBytes { raw in
            guard case .head(let h, _) = parser.next(raw) else { fatalError("test head did not parse") }
            return h
        }
        return ForwardAuthTarget.read(head, endpoint: Array(Self.endpoint.utf8), source: source,
                                      hostRequired: hostRequired, pathOptions: options)
    }

    func original(_ method: String, _ target: String, _ canonical: String? = nil, host: String?) -> ForwardAuthTarget.Outcome {
        .original(ForwardAuthTarget(method: Array(method.utf8), target: Array(target.utf8),
                                    canonical: Array((canonical ?? target).utf8), host: host.map { Array($0.utf8) }))
    }

    static let nginxCall = ["X-Original-URI: /api/x?a=1", "X-Original-Method: POST", "X-Original-Host: api.example.com"]
    static let traefikCall = ["X-Forwarded-Uri: /api/x?a=1", "X-Forwarded-Method: POST", "X-Forwarded-Host: api.example.com",
                              "X-Forwarded-Proto: https"]

    @Test func eachSourceIsReadFromItsOwnHeaders() {
        for source in [ForwardAuthSource.auto, .nginx] {
            #expect(read(Self.endpoint, Self.nginxCall, source: source) == original("POST", "/api/x?a=1", host: "api.example.com"))
        }
        for source in [ForwardAuthSource.auto, .traefik] {
            #expect(read(Self.endpoint, Self.traefikCall, source: source) == original("POST", "/api/x?a=1", host: "api.example.com"))
        }
        for source in [ForwardAuthSource.auto, .envoy] {
            #expect(read(Self.endpoint + "/api/x?a=1", source: source) == original("GET", "/api/x?a=1", host: "auth.internal"))
        }
    }

    @Test func hostComesFromTheChosenSourceOnly() {
        // An nginx call never takes X-Forwarded-Host (the client's, copied through), nor the call's own Host.
        let call = ["X-Original-URI: /api/x", "X-Original-Method: GET", "X-Forwarded-Host: api.example.com"]
        #expect(read(Self.endpoint, call, source: .nginx) == original("GET", "/api/x", host: nil))
        #expect(read(Self.endpoint, call, source: .nginx, hostRequired: true) == .untrusted)
        let traefik = ["X-Forwarded-Uri: /api/x", "X-Forwarded-Method: GET", "X-Original-Host: api.example.com"]
        #expect(read(Self.endpoint, traefik, source: .traefik, hostRequired: true) == .untrusted)
    }

    @Test func twoSourcesURIHeadersAreRefused() {
        let both = ["X-Original-URI: /api/x", "X-Original-Method: POST", "X-Forwarded-Uri: /public"]
        #expect(read(Self.endpoint, both) == .untrusted)
        #expect(read(Self.endpoint + "/public", ["X-Original-URI: /api/x", "X-Original-Method: POST"]) == .untrusted)
        #expect(read(Self.endpoint + "/public", ["X-Forwarded-Uri: /api/x", "X-Forwarded-Method: POST"]) == .untrusted)
    }

    @Test func aNamedSourceRefusesEveryOtherSourcesURI() {
        #expect(read(Self.endpoint, Self.nginxCall + ["X-Forwarded-Uri: /public"], source: .nginx) == .untrusted)
        #expect(read(Self.endpoint + "/public", Self.nginxCall, source: .nginx) == .untrusted)
        #expect(read(Self.endpoint, Self.traefikCall + ["X-Original-URI: /public"], source: .traefik) == .untrusted)
        #expect(read(Self.endpoint + "/public", Self.traefikCall, source: .traefik) == .untrusted)
        #expect(read(Self.endpoint + "/api/x", ["X-Original-URI: /public"], source: .envoy) == .untrusted)
        #expect(read(Self.endpoint + "/api/x", ["X-Forwarded-Uri: /public"], source: .envoy) == .untrusted)
        // Another source's method or host header alone does not name a source: ignored.
        #expect(read(Self.endpoint + "/api/x", ["X-Original-Method: POST", "X-Forwarded-Host: evil"], source: .envoy)
                == original("GET", "/api/x", host: "auth.internal"))
    }

    @Test func aNamedSourceWithoutItsURIIsATargetMissing() {
        #expect(read(Self.endpoint, [], source: .nginx) == .missing)
        #expect(read(Self.endpoint, [], source: .traefik) == .missing)
        #expect(read(Self.endpoint, [], source: .envoy) == .missing)
        #expect(read(Self.endpoint, []) == .missing)
        #expect(read(Self.endpoint, ["X-Original-URI: api/x", "X-Original-Method: GET"]) == .missing)
    }

    @Test func repeatedOrEmptyFieldsAreRefused() {
        let cases: [[String]] = [
            ["X-Original-URI: /api/x", "X-Original-URI: /public", "X-Original-Method: GET"],
            ["X-Original-URI:", "X-Original-Method: GET"],
            ["X-Original-URI: /api/x", "X-Original-Method: GET", "X-Original-Method: POST"],
            ["X-Original-URI: /api/x", "X-Original-Method:"],
            ["X-Original-URI: /api/x", "X-Original-Method: GET", "X-Original-Host: a", "X-Original-Host: b"],
            ["X-Original-URI: /api/x", "X-Original-Method: GET", "X-Original-Host:"],
            ["X-Forwarded-Uri: /api/x", "X-Forwarded-Method: GET", "X-Forwarded-Host: a", "X-Forwarded-Host: b"],
            ["X-Forwarded-Uri: /api/x", "X-Forwarded-Method: G T"],
        ]
        for fields in cases { #expect(read(Self.endpoint, fields) == .untrusted, "\(fields)") }
    }

    @Test func aCallThatSpellsTheEndpointDifferentlyIsRefused() {
        // Routed here by its canonical path, but its raw target does not start with the endpoint: no proxy's call.
        #expect(read("/x/../.attest/verify/api/x") == .untrusted)
        #expect(read("/.attest/%76erify/api/x") == .untrusted)
        #expect(read("http://gw" + Self.endpoint + "/api/x") == original("GET", "/api/x", host: "auth.internal"))
    }

    @Test func aMissingMethodHeaderIsRefusedNotTakenFromTheCall() {
        #expect(read(Self.endpoint, ["X-Original-URI: /api/x"]) == .untrusted)
        #expect(read(Self.endpoint, ["X-Forwarded-Uri: /api/x"], source: .traefik) == .untrusted)
    }

    @Test func noHostWhileARouteMatchesHostIsRefused() {
        #expect(read(Self.endpoint, ["X-Original-URI: /a", "X-Original-Method: GET"], hostRequired: true) == .untrusted)
        #expect(read(Self.endpoint, ["X-Forwarded-Uri: /a", "X-Forwarded-Method: GET"], hostRequired: true) == .untrusted)
        #expect(read(Self.endpoint + "/a", hostRequired: true) == original("GET", "/a", host: "auth.internal"))
    }

    @Test func theOriginalTargetIsMadeCanonicalButKeptAsSent() {
        for spelling in ["/%61pi/x", "//api/x", "/x/../api/x", "/./api//x"] {
            let fields = ["X-Forwarded-Uri: \(spelling)?q=%2F", "X-Forwarded-Method: GET"]
            #expect(read(Self.endpoint, fields) == original("GET", "\(spelling)?q=%2F", "/api/x?q=%2F", host: nil))
        }
        #expect(read(Self.endpoint + "/%61pi/x") == original("GET", "/%61pi/x", "/api/x", host: "auth.internal"))
        // An absolute-form URI: its path and query.
        #expect(read(Self.endpoint, ["X-Original-URI: http://api.example.com/%61pi?x", "X-Original-Method: GET"])
                == original("GET", "/%61pi?x", "/api?x", host: nil))
    }

    @Test func anAmbiguousOriginalTargetIsRefused() {
        for spelling in ["/api%2Fx", "/../api/x", "/api;x=1", "/a%00"] {
            #expect(read(Self.endpoint, ["X-Original-URI: \(spelling)", "X-Original-Method: GET"]) == .ambiguous, "\(spelling)")
        }
        #expect(read(Self.endpoint + "/..%2Fapi") == .ambiguous)
        #expect(read(Self.endpoint, ["X-Original-URI: /a b", "X-Original-Method: GET"]) == .ambiguous)
        #expect(read(Self.endpoint, ["X-Original-URI: /a%2Fb", "X-Original-Method: GET"],
                     options: .init(keepEscapedSlashes: true)) == original("GET", "/a%2Fb", host: nil))
    }
}
