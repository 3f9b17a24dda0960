@testable import GatewayConfig
import Foundation

/// YAML fixtures shared by the loader tests.
enum Fixtures {
    /// The example of docs CONFIG.md, verbatim (it lists both jwks_url and jwks_file, which exclude each other).
    static let configReference = """
    version: 1

    listeners:                          # at least one
      - name: public                    # optional; default listener-<index>
        address: 127.0.0.1:8080         # host:port, [::1]:8080 for IPv6
        http2: true                     # h2c prior knowledge on plaintext; with tls, ALPN offers h2 and http/1.1
        tls:                            # optional: terminate TLS here
          certificate: certs/server.pem # PEM chain
          private_key: certs/server.key

    admin:                              # optional; never served on a public listener
      address: 127.0.0.1:9901           # GET /healthz, /readyz, /metrics (Prometheus text)

    limits:                             # defaults shown
      max_header_bytes: 32KiB
      max_headers: 100
      max_body_bytes: 10MiB             # routes may lower it
      header_timeout: 10s               # time to receive a full request head
      idle_timeout: 60s                 # keep-alive idle
      max_connections: 10000

    state:
      backend: sqlite                   # memory | sqlite (default) | redis
      path: data/state.db               # sqlite (default data/state.db); created with its folder if missing; WAL, so
                                        # several gateway processes on one host may share the file
      url: redis://127.0.0.1:6379/0     # redis: redis://[user:password@]host:port[/db]
      key_prefix: "attest-gateway:"     # redis (default shown); keys: <prefix>jti:<project_number>:<jti>, <prefix>key:<key id>, …
      timeout: 250ms                    # default; bounds each state operation, connecting and lock waits included
      on_unavailable: reject            # reject (default: 503, reason state_unavailable) | allow (forward with
                                        # X-Attest-Verdict: verified and X-Attest-Reason: state_unavailable)

    upstreams:
      api:
        url: http://127.0.0.1:3000      # http://host:port[/base-path]
        connect_timeout: 2s
        response_timeout: 30s
        max_idle_connections: 64

    verifiers:                          # named; routes refer to them by name
      firebase:
        type: app_check                 # Firebase App Check JWT (RS256)
        project_number: "123456789012"
        project_id: demo-project        # optional; aud must contain projects/<number> (or projects/<id> if given)
        app_ids: ["1:123456789012:ios:abc123"]   # optional allow-list on sub; otherwise any app of the project
        jwks_url: https://firebaseappcheck.googleapis.com/v1/jwks   # default; plain http only for loopback hosts
        jwks_file: keys/jwks.json       # alternative to jwks_url: a static JWKS file (offline, tests)
        jwks_max_age: 6h                # default and upper bound; a shorter Cache-Control max-age wins
        clock_skew: 60s                 # default
        header: X-Firebase-AppCheck     # default

      ios:
        type: app_attest                # Apple App Attest
        team_id: ABCDE12345
        bundle_ids: [com.example.app]
        environment: production         # production (default) | development | any
        root_ca: builtin                # default: Apple App Attestation Root CA; or a PEM path (tests)
        binding: request                # request (default) | challenge — what an assertion's clientData is
        max_skew: 5m                    # request binding: accepted timestamp skew
        challenge_ttl: 5m
        registration_path: /.attest/ios # POST {path}/challenge, POST {path}/attest
        extensions:                     # optional policy on iOS 27+ authenticator-data extensions
          allowed_validation_categories: [1]
          min_bundle_version: "42"
        receipt_root_ca: builtin        # with fraud_metric: Apple Root CA - G3 (signs receipts) by default; or a PEM path
        fraud_metric:                   # optional: refresh receipts at Apple's App Attest data server
          key_id: ABC123DEFG            # a key with App Attest / DeviceCheck access
          private_key: secrets/AuthKey_ABC123DEFG.p8
          base_url: https://data.appattest.apple.com   # default by environment (data-development… for development)
          ca_file: certs/test-ca.pem    # optional trust anchor for base_url (tests)
          refresh_interval: 24h         # at most this often per key, never before the receipt's not-before
          timeout: 10s

      dc:
        type: device_check              # Apple DeviceCheck
        team_id: ABCDE12345
        key_id: ABC123DEFG
        private_key: secrets/AuthKey_ABC123DEFG.p8
        environment: production         # production (default) | development
        base_url: https://api.devicecheck.apple.com   # default by environment; set it and environment only labels
        ca_file: certs/test-ca.pem      # optional trust anchor for base_url (tests)
        timeout: 3s                     # per call to Apple; then one retry on 429/5xx/timeout, then device_check_unavailable
        header: X-Apple-DeviceCheck     # default
        subject_binding:                # optional: the "bit0 = device already bound" flow
          header: X-User-Hash           # forwarded unchanged; stored only as its SHA-256

    routes:                             # first match wins; a request that matches none gets 404
      - name: payments                  # optional; default route-<index>
        match:
          path_prefix: /api/payments    # or path: /exact
          methods: [POST]               # optional
          host: api.example.com         # optional
        upstream: api
        verify: [firebase, ios]         # any one passing is enough; [] = no verification
        require_all: false              # true: every listed verifier must pass
        limited_use: true               # App Check tokens must carry jti, each jti accepted once; DeviceCheck tokens once each
        max_risk_metric: 5              # optional: App Attest keys whose fraud metric is higher → risk_too_high
        mode: enforce                   # enforce (default) | monitor (never rejects; forwards the verdict)
        strip_token_headers: true       # default true: the upstream never sees the raw tokens
        max_body_bytes: 1MiB
      - name: public
        match: {path_prefix: /}
        upstream: api
        verify: []
    """

    /// The reference example with `jwks_file` removed, so it is valid.
    static var fullExample: String {
        configReference.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.contains("jwks_file:") }
            .joined(separator: "\n")
    }

    /// One listener, one upstream, one route: everything else defaults.
    static let minimal = """
    version: 1
    listeners:
      - address: 127.0.0.1:8080
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - match: {path_prefix: /}
        upstream: api
    """
}

extension Fixtures {
    /// `minimal` with its catch-all route bound to a host, so routes appended after it are not shadowed by it (a
    /// catch-all above them would make them unreachable, which is an error of its own).
    static var minimalScoped: String {
        minimal.replacingOccurrences(of: "{path_prefix: /}", with: "{path_prefix: /, host: other.test}")
    }

    /// A file whose routes section is `routes` (one route per line, the first at line 8).
    static func withRoutes(_ routes: String) -> String {
        """
        version: 1
        listeners:
          - address: 127.0.0.1:8080
        upstreams:
          api:
            url: http://127.0.0.1:3000
        routes:

        """ + routes
    }
}

/// Loads `yaml` as `gateway.yml` from `/etc/gw` and returns the error lines (empty when it loads).
func errorLines(_ yaml: String) -> [String] {
    do {
        _ = try ConfigLoader.load(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw")
        return []
    } catch {
        return error.errors.map(\.description)
    }
}

/// The minimal config with `extra` appended (top-level sections) — for one-error tests.
func minimalPlus(_ extra: String) -> String { Fixtures.minimal + "\n" + extra }

/// `minimalScoped` with `extra` appended: routes added after it are `routes[1]…`, from line 10.
func scopedPlus(_ extra: String) -> String { Fixtures.minimalScoped + "\n" + extra }

/// Loads `yaml` as `gateway.yml` from `/etc/gw` and returns the warning lines and the error lines (errors empty
/// when it loads), each as `check-config` prints them.
func diagnosticLines(_ yaml: String) -> (warnings: [String], errors: [String]) {
    do {
        let loaded = try ConfigLoader.loadDetailed(yaml: yaml, fileName: "gateway.yml", baseDirectory: "/etc/gw")
        return (loaded.warnings.map(\.description), [])
    } catch {
        return (error.warnings.map(\.description), error.errors.map(\.description))
    }
}
