import Testing
@testable import GatewayConfig

/// The positions the loader records, which `check-config` uses for problems found after loading (a file a key
/// names cannot be read).
@Suite struct PositionsTests {
    let loaded: LoadedConfiguration

    init() throws {
        loaded = try ConfigLoader.loadDetailed(yaml: Fixtures.fullExample, fileName: "gateway.yml", baseDirectory: "/etc/gw")
    }

    @Test func keysAreFoundAtTheirValues() {
        #expect(loaded.positions.position(of: "listeners[0].tls.certificate") == (8, 20))
        #expect(loaded.positions.position(of: "verifiers.ios.root_ca") == (55, 14))
        #expect(loaded.positions.position(of: "verifiers.ios.fraud_metric.private_key") == (66, 20))
        #expect(loaded.positions.position(of: "verifiers.dc.private_key") == (76, 18))
    }

    @Test func listItemsAreFoundAtTheItem() {
        #expect(loaded.positions.position(of: "listeners[0]") == (4, 5))
        #expect(loaded.positions.position(of: "routes[1]") == (99, 5))
    }

    @Test func anUnwrittenKeyFallsBackToItsNearestWrittenAncestor() {
        // receipt_root_ca is written; a key left to its default is reported at the mapping that holds it.
        #expect(!loaded.positions.contains("verifiers.dc.replay_window"))
        #expect(loaded.positions.position(of: "verifiers.dc.replay_window") == loaded.positions.position(of: "verifiers.dc"))
        #expect(loaded.positions.position(of: "nowhere.at.all") == (1, 1))
    }

    @Test func errorsAfterLoadingCarryTheFileAndPosition() {
        #expect(loaded.error(at: "verifiers.dc.private_key", "cannot read it").description
            == "gateway.yml:76:18: verifiers.dc.private_key: cannot read it")
    }
}
