import Testing
@testable import GatewayConfig

/// The CONFIG.md example loads with every value as written, and relative paths resolved.
@Suite struct FullExampleTests {
    let config: GatewayConfiguration

    init() throws {
        config = try ConfigLoader.load(yaml: Fixtures.fullExample, fileName: "gateway.yml", baseDirectory: "/etc/gw")
    }

    @Test func verbatimReferenceOnlyObjectsToBothJWKSSources() {
        #expect(errorLines(Fixtures.configReference) == [
            "gateway.yml:46:16: verifiers.firebase.jwks_file: jwks_url and jwks_file are mutually exclusive",
        ])
    }

    @Test func listenersAdminLimitsAndStateHaveTheirValues() {
        #expect(config.version == 1)
        #expect(config.listeners == [ListenerConfig(
            name: "public", address: SocketAddressConfig(host: "127.0.0.1", port: 8080), http2: true,
            tls: TLSConfig(certificate: "/etc/gw/certs/server.pem", privateKey: "/etc/gw/certs/server.key"))])
        #expect(config.admin == AdminConfig(address: SocketAddressConfig(host: "127.0.0.1", port: 9901)))
        #expect(config.limits == LimitsConfig())
        var state = StateConfig()
        state.backend = .sqlite
        state.path = "/etc/gw/data/state.db"
        state.url = "redis://127.0.0.1:6379/0"
        state.keyPrefix = "attest-gateway:"
        state.timeoutMillis = 250
        state.onUnavailable = .reject
        #expect(config.state == state)
    }

    @Test func upstreamHasItsValues() {
        var api = UpstreamConfig(name: "api", host: "127.0.0.1", port: 3000, basePath: "")
        api.connectTimeoutMillis = 2_000
        api.responseTimeoutMillis = 30_000
        api.maxIdleConnections = 64
        #expect(config.upstreams == [api])
        #expect(config.upstream(named: "api")?.tls == false)
    }

    @Test func appCheckVerifierHasItsValues() {
        var firebase = AppCheckVerifierConfig(projectNumber: "123456789012")
        firebase.projectID = "demo-project"
        firebase.appIDs = ["1:123456789012:ios:abc123"]
        firebase.jwksURL = "https://firebaseappcheck.googleapis.com/v1/jwks"
        firebase.jwksMaxAgeMillis = 6 * 3_600_000
        firebase.clockSkewMillis = 60_000
        firebase.header = "X-Firebase-AppCheck"
        #expect(config.verifiers.map(\.name) == ["firebase", "ios", "dc"])
        #expect(config.verifier(named: "firebase")?.kind == .appCheck(firebase))
    }

    @Test func appAttestVerifierHasItsValues() {
        var ios = AppAttestVerifierConfig(teamID: "ABCDE12345", bundleIDs: ["com.example.app"])
        ios.environment = .production
        ios.rootCA = "builtin"
        ios.binding = .request
        ios.maxSkewMillis = 300_000
        ios.challengeTTLMillis = 300_000
        ios.registrationPath = "/.attest/ios"
        var extensions = AppAttestExtensionsPolicy()
        extensions.allowedValidationCategories = [1]
        extensions.minBundleVersion = "42"
        ios.extensions = extensions
        ios.receiptRootCA = "builtin"
        var fraud = FraudMetricConfig(keyID: "ABC123DEFG", privateKey: "/etc/gw/secrets/AuthKey_ABC123DEFG.p8")
        fraud.baseURL = "https://data.appattest.apple.com"
        fraud.caFile = "/etc/gw/certs/test-ca.pem"
        fraud.refreshIntervalMillis = 24 * 3_600_000
        fraud.timeoutMillis = 10_000
        ios.fraudMetric = fraud
        #expect(config.verifier(named: "ios")?.kind == .appAttest(ios))
    }

    @Test func deviceCheckVerifierHasItsValues() {
        var dc = DeviceCheckVerifierConfig(teamID: "ABCDE12345", keyID: "ABC123DEFG",
                                           privateKey: "/etc/gw/secrets/AuthKey_ABC123DEFG.p8")
        dc.environment = .production
        dc.baseURL = "https://api.devicecheck.apple.com"
        dc.caFile = "/etc/gw/certs/test-ca.pem"
        dc.timeoutMillis = 3_000
        dc.header = "X-Apple-DeviceCheck"
        dc.subjectBinding = SubjectBindingConfig(header: "X-User-Hash")
        #expect(config.verifier(named: "dc")?.kind == .deviceCheck(dc))
    }

    @Test func routesHaveTheirValues() {
        var payments = RouteConfig(name: "payments",
                                   match: RouteMatchConfig(path: .prefix("/api/payments"), methods: ["POST"],
                                                           host: "api.example.com"),
                                   upstream: "api")
        payments.verify = ["firebase", "ios"]
        payments.requireAll = false
        payments.limitedUse = true
        payments.maxRiskMetric = 5
        payments.mode = .enforce
        payments.stripTokenHeaders = true
        payments.maxBodyBytes = 1 << 20
        let publicRoute = RouteConfig(name: "public", match: RouteMatchConfig(path: .prefix("/")), upstream: "api")
        #expect(config.routes == [payments, publicRoute])
    }
}
