import Testing
@testable import GatewayConfig

/// `state.username`, `state.password_file` and `state.wait_replicas` (CONFIG.md Additions).
@Suite struct StateCredentialsTests {
    func state(_ body: String) throws -> StateConfig {
        try ConfigLoader.load(yaml: minimalPlus("state:\n" + body), fileName: "gateway.yml", baseDirectory: "/etc/gw").state
    }

    @Test func defaultsAndValues() throws {
        let d = try state("  backend: redis\n  url: redis://127.0.0.1:6379/0\n")
        #expect(d.username == nil && d.passwordFile == nil && d.waitReplicas == 0)
        let s = try state("  backend: redis\n  url: redis://127.0.0.1:6379/0\n  username: gateway\n  password_file: secrets/pw\n  wait_replicas: 2\n")
        #expect(s.username == "gateway" && s.passwordFile == "/etc/gw/secrets/pw" && s.waitReplicas == 2)
    }

    @Test func aPasswordInTheURLAndAFileIsRefusedWithoutQuotingIt() {
        let lines = errorLines(minimalPlus("state:\n  backend: redis\n  url: redis://u:hunter2@127.0.0.1:6379/0\n  password_file: pw\n"))
        #expect(lines == ["gateway.yml:13:18: state.password_file: the password is in url and in password_file: keep one "
                          + "(password_file keeps it out of gateway.yml)"])
        // The user named apart and the password from the file: nothing to choose between.
        #expect(errorLines(minimalPlus("state:\n  backend: redis\n  url: redis://127.0.0.1:6379/0\n  username: u\n  password_file: pw\n")) == [])
    }

    @Test func waitReplicasIsBounded() {
        #expect(errorLines(minimalPlus("state:\n  wait_replicas: -1\n")) == ["gateway.yml:11:18: state.wait_replicas: must be at least 0"])
        #expect(errorLines(minimalPlus("state:\n  wait_replicas: 101\n")) == ["gateway.yml:11:18: state.wait_replicas: must be at most 100"])
    }
}
