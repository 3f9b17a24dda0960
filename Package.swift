// swift-tools-version:6.0
// attest-gateway: an app-integrity edge gateway. Module layering: see docs/architecture.md.
import PackageDescription

/// A Debian C library wrapped as a SwiftPM system library target (headers + pkg-config link flags).
func systemLibrary(_ name: String, pkgConfig: String, apt: String) -> Target {
    .systemLibrary(name: name, pkgConfig: pkgConfig, providers: [.apt([apt])])
}

/// The request path's modules work on raw pointers into per-connection buffers; Swift's dynamic exclusivity
/// checks on those class-held buffers cost ~12% of the proxy's CPU under load (measured with perf, see
/// docs/performance.md), so release builds of these modules turn them off. Debug builds and tests keep them.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

let package = Package(
    name: "attest-gateway",
    products: [
        .executable(name: "attest-gateway", targets: ["AttestGateway"]),
        // Development tools (echo upstream, App Check issuer, simulated App Attest CA and device): never in production.
        .executable(name: "attest-gateway-dev", targets: ["AttestGatewayDev"]),
    ],
    targets: [
        // Layer 0: C libraries from Debian, and our own small C shims.
        systemLibrary("COpenSSL", pkgConfig: "openssl", apt: "libssl-dev"),
        systemLibrary("CCBOR", pkgConfig: "libcbor", apt: "libcbor-dev"),
        systemLibrary("CNGHTTP2", pkgConfig: "libnghttp2", apt: "libnghttp2-dev"),
        systemLibrary("CYAML", pkgConfig: "yaml-0.1", apt: "libyaml-dev"),
        systemLibrary("CHiredis", pkgConfig: "hiredis", apt: "libhiredis-dev"),
        systemLibrary("CSQLite", pkgConfig: "sqlite3", apt: "libsqlite3-dev"),
        systemLibrary("CCurl", pkgConfig: "libcurl", apt: "libcurl4-openssl-dev"),
        .target(name: "CGatewayShims"),
        // libFuzzer's driver entry point (declaration only; linked by `-sanitize=fuzzer`, see scripts/fuzz.sh).
        .systemLibrary(name: "CLibFuzzer"),
        // ThreadSanitizer's annotation hooks (declaration only, weak; see GatewayCore's AnnotatedMutex).
        .systemLibrary(name: "CSanitizerHooks"),

        // Layer 1: vocabulary.
        .target(name: "GatewayCore", dependencies: ["CSanitizerHooks"], swiftSettings: hotPath),
        .target(name: "Observability", dependencies: ["GatewayCore"], swiftSettings: hotPath),

        // Layer 2: parsers and configuration (no I/O).
        .target(name: "HTTP1", dependencies: ["GatewayCore"], swiftSettings: hotPath),
        .target(name: "GatewayConfig", dependencies: ["CYAML", "GatewayCore", "HTTP1"]),
        .target(name: "GatewayCrypto", dependencies: ["COpenSSL", "GatewayCore"]),
        .target(name: "HTTP2", dependencies: ["CNGHTTP2", "GatewayCore"]),
        .target(name: "JOSE", dependencies: ["GatewayCrypto", "GatewayCore"]),
        .target(name: "CBOR", dependencies: ["CCBOR", "GatewayCore"]),
        .target(name: "KeySetCache", dependencies: ["GatewayCore"]),
        .target(name: "OutboundHTTP", dependencies: ["CCurl", "GatewayCore"]),
        .target(name: "StateStore", dependencies: ["GatewayCore"]),
        .target(name: "StateStoreSQLite", dependencies: ["StateStore", "CSQLite", "GatewayCore"]),
        .target(name: "Attestation", dependencies: ["JOSE", "GatewayCrypto", "KeySetCache", "GatewayCore", "CBOR", "StateStore"]),

        // Test support: a simulated App Attest device and CA (tests, `attest-gateway-dev appattest`, `make demo`). Never a
        // verifier's input, never linked into `attest-gateway`.
        .target(name: "GatewayTestSupport", dependencies: ["COpenSSL", "CCBOR", "GatewayCrypto", "GatewayCore", "CBOR", "Attestation"]),

        // Layer 3: the event loops.
        .target(name: "GatewayPosix", dependencies: ["GatewayCore", "CGatewayShims"], swiftSettings: hotPath),
        // TLS sessions (no I/O) and the socket transport every connection reads and writes through.
        .target(name: "GatewayTLS", dependencies: ["COpenSSL", "GatewayCore", "GatewayPosix"], swiftSettings: hotPath),
        // Redis: hiredis formats commands and reads replies; the bytes go over the gateway's own sockets and TLS.
        .target(name: "StateStoreRedis", dependencies: ["StateStore", "CHiredis", "GatewayCore", "GatewayPosix", "GatewayTLS"]),

        // Layer 4: the request path.
        .target(name: "GatewayProxy", dependencies: [
            "GatewayCore", "Observability", "HTTP1", "GatewayConfig", "GatewayPosix", "GatewayCrypto", "CGatewayShims", "GatewayTLS",
            "HTTP2", "Attestation", "JOSE", "KeySetCache", "OutboundHTTP", "StateStore",
        ], swiftSettings: hotPath),

        // Layer 5: the composition root — verifiers by type, key caches, HTTP clients, the state backend — built
        // from a configuration and handed to GatewayProxy (also `check-config`'s file reads).
        .target(name: "GatewayComposition", dependencies: [
            "GatewayProxy", "GatewayConfig", "GatewayCore", "Attestation", "GatewayCrypto", "GatewayTLS", "JOSE", "KeySetCache",
            "Observability", "OutboundHTTP", "StateStore", "StateStoreSQLite", "StateStoreRedis",
        ]),

        // Layer 6: the executables and the command-line parsing they share.
        .target(name: "GatewayCLI"),
        .executableTarget(name: "AttestGateway", dependencies: [
            "GatewayCLI", "GatewayCore", "GatewayConfig", "GatewayPosix", "GatewayProxy", "GatewayComposition", "Observability", "HTTP1",
            "CGatewayShims", "Attestation", "CBOR", "GatewayCrypto", "JOSE",
        ]),
        .executableTarget(name: "AttestGatewayDev", dependencies: [
            "GatewayCLI", "GatewayCore", "GatewayConfig", "GatewayPosix", "GatewayProxy", "Observability", "HTTP1", "GatewayCrypto",
            "JOSE", "OutboundHTTP", "Attestation", "GatewayTestSupport",
        ]),

        // Fuzzing (`make fuzz`, docs/hardening.md): the harness functions, shared by the libFuzzer executable (built
        // with -sanitize=fuzzer -DFUZZING) and the regression tests; without FUZZING the executable replays files.
        .target(name: "FuzzHarness", dependencies: ["HTTP1", "HTTP2", "GatewayCore", "JOSE", "CBOR", "GatewayConfig", "Attestation", "GatewayCrypto"]),
        .executableTarget(name: "GatewayFuzz", dependencies: ["FuzzHarness", "CLibFuzzer"]),

        // Tests mirror modules.
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1", "GatewayCore"], resources: [.copy("Corpus")]),
        .testTarget(name: "GatewayConfigTests", dependencies: ["GatewayConfig", "GatewayCore"]),
        .testTarget(name: "GatewayProxyTests", dependencies: [
            "GatewayProxy", "GatewayConfig", "HTTP1", "GatewayCore", "Attestation", "JOSE", "GatewayCrypto", "KeySetCache", "StateStore",
            "Observability", "HTTP2",
        ]),
        .testTarget(name: "GatewayCompositionTests", dependencies: [
            "GatewayComposition", "GatewayConfig", "Attestation", "GatewayCrypto", "JOSE",
        ]),
        .testTarget(name: "GatewayTLSTests", dependencies: ["GatewayTLS", "GatewayPosix", "GatewayCore"]),
        .testTarget(name: "HTTP2Tests", dependencies: ["HTTP2", "GatewayCore"]),
        .testTarget(name: "GatewayCryptoTests", dependencies: ["GatewayCrypto", "GatewayCore"]),
        .testTarget(name: "CBORTests", dependencies: ["CBOR", "GatewayCore"], resources: [.copy("Vectors")]),
        .testTarget(name: "JOSETests", dependencies: ["JOSE", "GatewayCrypto", "GatewayCore"]),
        .testTarget(name: "AttestationTests", dependencies: ["Attestation", "JOSE", "GatewayCrypto", "KeySetCache", "CBOR", "StateStore", "GatewayCore"],
                    resources: [.copy("AppAttestVectors"), .copy("AppAttestReceiptVectors")]),
        .testTarget(name: "GatewayTestSupportTests", dependencies: ["GatewayTestSupport", "Attestation", "CBOR", "GatewayCrypto", "GatewayCore", "StateStore"]),
        .testTarget(name: "StateStoreTests", dependencies: ["StateStore", "StateStoreSQLite", "StateStoreRedis", "GatewayCore", "GatewayTLS"]),
        .testTarget(name: "KeySetCacheTests", dependencies: ["KeySetCache", "GatewayCore"]),
        .testTarget(name: "OutboundHTTPTests", dependencies: ["OutboundHTTP", "GatewayCore"]),
        .testTarget(name: "GatewayPosixTests", dependencies: ["GatewayPosix", "GatewayCore"]),
        .testTarget(name: "FuzzHarnessTests", dependencies: ["FuzzHarness"]),
        .testTarget(name: "CLibrariesTests", dependencies: [
            "COpenSSL", "CCBOR", "CNGHTTP2", "CYAML", "CHiredis", "CSQLite", "CCurl", "CGatewayShims",
        ]),
    ],
    swiftLanguageModes: [.v6]
)

/// Strict imports (docs/architecture.md "Modules"): a file sees only the members of modules it imports itself
/// (`MemberImportVisibility`), and an import is internal unless it is written `public import` because the module's
/// types appear in this module's public API (`InternalImportsByDefault`) — so no dependency leaks to importers.
/// scripts/layers.py checks the other half: every import is a declared dependency.
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("MemberImportVisibility"), .enableUpcomingFeature("InternalImportsByDefault"),
    ]
}
