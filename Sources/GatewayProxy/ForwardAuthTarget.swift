import GatewayCore
import GatewayConfig
import HTTP1

/// The original request a forward-auth call asks about, as the one proxy the call came through describes it.
struct ForwardAuthTarget: Equatable {
    let method: [UInt8]
    /// Origin form (path and query) as the client sent it to the other proxy: what App Attest's request binding
    /// signs (PROTOCOL.md), so never rewritten.
    let target: [UInt8]
    /// `target` made canonical (CONFIG.md `paths`): what the routes match and the access log shows.
    let canonical: [UInt8]
    /// The original host, from the chosen source's own header (Envoy: the call's Host); nil when it names none.
    let host: [UInt8]?

    enum Outcome: Equatable {
        case original(ForwardAuthTarget)
        /// The call names no original request: 400 `forward_auth_target_missing`.
        case missing
        /// The forwarding headers cannot be trusted to describe the original request: 400 `untrusted_forwarding`.
        case untrusted
        /// The original target cannot be made canonical safely: 400 `ambiguous_path`.
        case ambiguous
    }

    /// The header names (lower case) in which a proxy describes the original request.
    struct SourceHeaders {
        let uri: [UInt8]
        let method: [UInt8]
        let host: [UInt8]
        init(_ uri: String, _ method: String, _ host: String) {
            self.uri = Array(uri.utf8); self.method = Array(method.utf8); self.host = Array(host.utf8)
        }
    }

    /// nginx `auth_request` with the `proxy_set_header` lines of docs/forward-auth.md.
    static let nginx = SourceHeaders("x-original-uri", "x-original-method", "x-original-host")
    /// Traefik `forwardAuth` (it also sends X-Forwarded-Proto, which routing does not use).
    static let traefik = SourceHeaders("x-forwarded-uri", "x-forwarded-method", "x-forwarded-host")

    /// Reads the original request from `head`, a call to `forward_auth.path` (`endpoint`).
    ///
    /// Why so strict: the other proxy copies the client's headers into the call, and sets only its own. A header of
    /// another source, or a second copy of one, is therefore the client's word, not the proxy's — judging it would
    /// let a client name the request to be judged (`X-Forwarded-Uri: /public` behind nginx). A source is recognised
    /// by its URI header alone (Envoy's is the path after the endpoint), and every other field is read from that
    /// source only; anything that does not fit one source exactly is refused, never guessed at.
    static func read(_ head: HTTP1RequestHead, endpoint: [UInt8], source: ForwardAuthSource, hostRequired: Bool,
                     pathOptions: RequestTargetCanonicalizer.Options) -> Outcome {
        head.bytes.withUnsafeBytes { raw -> Outcome in
            let headers = HeaderView(bytes: raw, fields: head.fields)
            func field(_ name: [UInt8]) -> HeaderView.Field { headers.single(name) }
            let call = HeaderFilter.originForm(UnsafeRawBufferPointer(rebasing: raw[head.target]))
            // Envoy's original target is the rest of the call's target *as sent*, so the call must spell the
            // endpoint exactly (one routed here by its canonical form, `/x/../.attest/verify/…`, is no proxy's).
            guard Bytes.hasPrefix(call, endpoint) else { return .untrusted }
            let envoyURI = UnsafeRawBufferPointer(rebasing: call[endpoint.count...])
            var carried: [ForwardAuthSource] = []
            if case .missing = field(nginx.uri) {} else { carried.append(.nginx) }
            if case .missing = field(traefik.uri) {} else { carried.append(.traefik) }
            if !envoyURI.isEmpty { carried.append(.envoy) }

            let chosen: ForwardAuthSource
            if source == .auto {
                guard carried.count <= 1 else { return .untrusted }
                guard let only = carried.first else { return .missing }
                chosen = only
            } else {
                guard carried.allSatisfy({ $0 == source }) else { return .untrusted }
                guard !carried.isEmpty else { return .missing }
                chosen = source
            }

            let method: [UInt8]
            let uri: UnsafeRawBufferPointer
            let host: [UInt8]?
            if chosen == .envoy {
                // ext_authz sends the original method and Host on the call itself.
                method = Array(raw[head.method])
                uri = envoyURI
                if let h = head.host {
                    guard !h.isEmpty else { return .untrusted }
                    host = Array(raw[h])
                } else {
                    host = nil
                }
            } else {
                let names = chosen == .nginx ? nginx : traefik
                // A missing method is refused rather than taken from the call: auth subrequests are GETs, so the
                // call's method says nothing about the original one (a POST would be judged as a GET).
                guard case .value(let u) = field(names.uri), case .value(let m) = field(names.method) else {
                    return .untrusted
                }
                method = Array(raw[m])
                uri = UnsafeRawBufferPointer(rebasing: raw[u])
                switch field(names.host) {
                case .missing: host = nil
                case .malformed: return .untrusted
                case .value(let h): host = Array(raw[h])
                }
            }
            // Without the original host a `match.host` route can never match, and the request would fall through
            // to a less protected route: refuse instead.
            guard method.allSatisfy(isToken), !hostRequired || host != nil else { return .untrusted }

            let sent = HeaderFilter.originForm(uri)
            guard sent.first == UInt8(ascii: "/") else { return .missing }
            // The gateway's own parser admits only these bytes in a target; another spelling (raw UTF-8, spaces)
            // could be read differently by the backend.
            guard sent.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return .ambiguous }
            let canonical: [UInt8]
            switch RequestTargetCanonicalizer.canonicalize(sent, options: pathOptions) {
            case .unchanged: canonical = Array(sent)
            case .canonical(let c): canonical = c
            case .ambiguous: return .ambiguous
            }
            return .original(ForwardAuthTarget(method: method, target: Array(sent), canonical: canonical, host: host))
        }
    }

    /// `tchar` (RFC 9110 5.6.2): a method is a token.
    static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }
}
