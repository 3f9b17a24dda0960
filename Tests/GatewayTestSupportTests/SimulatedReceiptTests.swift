import Testing
import Attestation
import CBOR
import GatewayCore
import GatewayCrypto
import GatewayTestSupport

/// Receipts minted by the simulated Apple pass the gateway's real receipt verifier, field for field.
@Suite struct SimulatedReceiptTests {
    @Test func theAttestationCarriesAVerifiableAttestReceipt() throws {
        let ca = try SimulatedAppAttestCA.generate()
        let issuer = try #require(ca.receipts)
        let device = try SimulatedAppAttestDevice(teamID: "TEAMID1234", bundleID: "com.example.app", environment: .development)
        let attestation = try device.attest(clientDataHash: SHA256Hasher.hash(Array("c".utf8)), ca: ca)
        let receipt = try AppAttestAttestationObject.parse(attestation).get().receipt
        let verifier = AppAttestReceiptVerifier(root: issuer.rootCertificate)
        let r = try verifier.verify(receipt, appID: device.appID, keyID: device.keyIDBytes, environment: .development).get()
        #expect(r.kind == .attest && r.environment == "sandbox" && r.riskMetric == nil)
        #expect(r.clientHash == SHA256Hasher.hash(Array("c".utf8)))
        // Apple's real root does not sign it.
        #expect(throws: AppAttestReceiptFailure.untrusted) {
            try AppAttestReceiptVerifier(root: AppAttestRoots.appleRootG3).verify(receipt, appID: device.appID, keyID: device.keyIDBytes).get()
        }
    }

    @Test func aRefreshedReceiptCarriesTheRiskMetric() throws {
        let ca = try SimulatedAppAttestCA.generate()
        let issuer = try #require(ca.receipts)
        let device = try SimulatedAppAttestDevice(teamID: "TEAMID1234", bundleID: "com.example.app")
        let attestation = try device.attest(clientDataHash: [UInt8](repeating: 1, count: 32), ca: ca)
        let leaf = try AppAttestAttestationObject.parse(attestation).get().certificateChain[0]
        let now = WallClock.unixSeconds()
        let cms = try issuer.receipt(.init(appID: device.appID, attestedCertificate: leaf, clientHash: [1, 2], token: "t",
                                           kind: "RECEIPT", environment: "production", createdAt: now, riskMetric: 7,
                                           notBefore: now + 86_400, expiresAt: now + 90 * 86_400))
        let r = try AppAttestReceiptVerifier(root: issuer.rootCertificate).verify(cms, appID: device.appID, keyID: device.keyIDBytes,
                                                                                   environment: .production).get()
        #expect(r.kind == .receipt && r.riskMetric == 7 && r.notBefore == now + 86_400 && r.createdAt == now)
    }
}
