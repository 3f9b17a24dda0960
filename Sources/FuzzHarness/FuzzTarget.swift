/// One fuzz target: a parser family fed arbitrary bytes, with its cheap invariants checked.
///
/// Each target's ``run(_:)`` is what libFuzzer calls per input (`GatewayFuzz --target=NAME` built with
/// `-sanitize=fuzzer`) and what the regression tests replay over `Tests/Fuzz/Corpus/<name>/` and
/// `Tests/Fuzz/Regressions/<name>/`. A crash — a trap in the product code or a failed invariant here — is a finding;
/// an input being rejected by the parser is not.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// `HTTP1RequestParser` and `HTTP1ResponseParser`, each fed whole and split at a data-derived point.
    case http1Request = "http1-request"
    /// `Base64URL`, `StrictJSON`, `UnverifiedJWS` and `JWKS` parsing.
    case jose
    /// `CBORDecoder`, the App Attest attestation and assertion objects, and authenticator data.
    case cborAppAttest = "cbor-appattest"
    /// `ConfigLoader` over a YAML document (what `check-config` and `serve` read).
    case configYAML = "config-yaml"
    /// App Attest receipts: OpenSSL's CMS and ASN.1 readers, the receipt fields, verification.
    case receipt
    /// `H2ServerSession`: nghttp2's server session and the gateway's HTTP/2 limits, fed client frames.
    case http2Session = "http2-session"
    /// `RequestTargetCanonicalizer`: the input as a request target, under every `paths:` option combination.
    case requestTarget = "request-target"
    /// `HTTP1RequestHead.assemble` (an HTTP/2 request's parts as a head), differentially against the HTTP/1.1 parser.
    case h2RequestHead = "h2-request-head"
    /// Play Integrity classic tokens: `CompactJWE` (A256KW + A256GCM) and `PlayIntegrityVerifier.decodeClassic`, the
    /// verdict parser and the policy, with the input as a token, as a JWE plaintext and as a signed verdict.
    case playIntegrity = "play-integrity"

    /// The target's command-line and directory name.
    public var name: String { rawValue }

    /// Runs one input through the target; traps when an invariant is violated.
    public func run(_ data: UnsafeRawBufferPointer) {
        switch self {
        case .http1Request: HTTP1Harness.run(data)
        case .jose: JOSEHarness.run(data)
        case .cborAppAttest: CBORHarness.run(data)
        case .configYAML: ConfigHarness.run(data)
        case .receipt: ReceiptHarness.run(data)
        case .http2Session: H2Harness.run(data)
        case .requestTarget: RequestTargetHarness.run(data)
        case .h2RequestHead: H2RequestHeadHarness.run(data)
        case .playIntegrity: PlayIntegrityHarness.run(data)
        }
    }

    /// Array convenience for ``run(_:)-(UnsafeRawBufferPointer)``.
    public func run(_ data: [UInt8]) {
        data.withUnsafeBytes { run($0) }
    }
}
