public import Attestation
import CBOR
public import GatewayCore
import GatewayCrypto

/// A simulated iPhone running one app with App Attest: a real P-256 key (as the Secure Enclave would hold),
/// attestation objects and assertions built byte for byte as a device builds them, and a sign counter.
///
/// `attest` plays both the device and Apple's attestation server (whose part is `SimulatedAppAttestCA`);
/// `assert` is the device alone. Not thread-safe: one device is used from one place at a time.
public final class SimulatedAppAttestDevice {
    public let teamID: String
    public let bundleID: String
    /// Decides the aaguid: `appattest` + 7 zero bytes (production) or `appattestdevelop` (development).
    public let environment: AppAttestEnvironment
    /// Appended to authenticator data (attestation and assertions) when not `.none`; changes with app updates.
    public var extensions: SimulatedAppAttestExtensions
    /// The last counter used in an assertion (0 after attestation).
    public private(set) var counter: UInt32
    /// The key's uncompressed P-256 point `04 ‖ X ‖ Y`.
    public let publicKey: [UInt8]
    let key: ECPrivateKey

    /// A device with a freshly generated key, as after `generateKey` on a new install.
    public convenience init(
        teamID: String, bundleID: String, environment: AppAttestEnvironment = .production, extensions: SimulatedAppAttestExtensions = .none
    ) throws {
        try self.init(key: try ECPrivateKey.generate(.p256), teamID: teamID, bundleID: bundleID, environment: environment,
                      extensions: extensions, counter: 0)
    }

    init(key: ECPrivateKey, teamID: String, bundleID: String, environment: AppAttestEnvironment,
         extensions: SimulatedAppAttestExtensions, counter: UInt32) throws {
        self.key = key
        self.publicKey = try key.uncompressedPublicPoint()
        guard publicKey.count == 65 else { throw CryptoError(policy: "device key is not a P-256 key") }
        self.teamID = teamID
        self.bundleID = bundleID
        self.environment = environment
        self.extensions = extensions
        self.counter = counter
    }

    /// `TEAMID.bundle.id`, whose SHA-256 is the rpIdHash.
    public var appID: String { teamID + "." + bundleID }

    /// SHA-256 of `publicKey`: the credential ID and, base64-encoded, the key ID.
    public var keyIDBytes: [UInt8] { SHA256Hasher.hash(publicKey) }

    /// The key ID as `DCAppAttestService.generateKey` returns it: standard padded base64.
    public var keyID: String { StandardBase64.encode(keyIDBytes) }

    /// An attestation object for `clientDataHash` (normally SHA-256 of the server's challenge), its leaf issued by
    /// `ca` at `unixTime`: `{fmt: "apple-appattest", attStmt: {x5c: [leaf, intermediate], receipt}, authData}`.
    /// authData = rpIdHash ‖ flags 0x40 (AT) ‖ counter 0 ‖ aaguid ‖ 00 20 ‖ key ID ‖ COSE key ‖ [extensions].
    public func attest(clientDataHash: [UInt8], ca: SimulatedAppAttestCA, at unixTime: Int64 = WallClock.unixSeconds()) throws -> [UInt8] {
        var authData = fixedAuthenticatorData(counter: 0)
        authData += environment.aaguid
        authData += [UInt8(keyIDBytes.count >> 8), UInt8(keyIDBytes.count & 0xFF)]
        authData += keyIDBytes
        authData += try CBOREncoding.encode(coseKey)
        if let map = extensions.cborMap { authData += try CBOREncoding.encode(map) }

        let leaf = try ca.issueLeaf(publicKey: publicKey, nonce: SHA256Hasher.hash(authData + clientDataHash), at: unixTime)
        // An ATTEST receipt signed by the CA's receipt issuer, as Apple's server adds it (opaque bytes for an old CA).
        var receipt = Array("attest-gateway simulated receipt for \(keyID)".utf8)
        if let issuer = ca.receipts {
            receipt = try issuer.receipt(.init(
                appID: appID, attestedCertificate: leaf, clientHash: clientDataHash, token: "simulated-token-" + keyID, kind: "ATTEST",
                environment: environment == .development ? "sandbox" : "production", createdAt: unixTime,
                expiresAt: unixTime + 90 * 86_400))
        }
        return try CBOREncoding.encode(.map([
            (.text("fmt"), .text("apple-appattest")),
            (.text("attStmt"), .map([
                (.text("x5c"), .array([.bytes(leaf), .bytes(ca.intermediateCertificate.der)])),
                (.text("receipt"), .bytes(receipt)),
            ])),
            (.text("authData"), .bytes(authData)),
        ]))
    }

    /// An assertion over `clientData`: the counter advances by one (or becomes `explicitCounter`, which may go
    /// backwards to build replays), authData = rpIdHash ‖ flags 0x40 ‖ counter ‖ [extensions], and the key signs
    /// nonce = SHA-256(authData ‖ SHA-256(clientData)) as an ECDSA-SHA256 *message* (so SHA-256(nonce) is the
    /// signed digest, as on a device). Returns `{signature, authenticatorData}` as CBOR.
    public func assert(clientData: [UInt8], counter explicitCounter: UInt32? = nil) throws -> [UInt8] {
        let next: UInt32
        if let explicitCounter {
            next = explicitCounter
        } else {
            guard counter < UInt32.max else { throw CryptoError(policy: "sign counter exhausted") }
            next = counter + 1
        }
        var authData = fixedAuthenticatorData(counter: next)
        if let map = extensions.cborMap { authData += try CBOREncoding.encode(map) }
        let nonce = SHA256Hasher.hash(authData + SHA256Hasher.hash(clientData))
        let signature = try key.signSHA256(nonce)
        counter = next
        return try CBOREncoding.encode(.map([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authData))]))
    }

    /// rpIdHash ‖ flags ‖ counter (big-endian). Flags are 0x40 (AT) in attestations *and* assertions, as real
    /// devices write them; ED (0x80) stays off even when extensions follow.
    private func fixedAuthenticatorData(counter: UInt32) -> [UInt8] {
        SHA256Hasher.hash(Array(appID.utf8)) + [0x40] + withUnsafeBytes(of: counter.bigEndian) { Array($0) }
    }

    /// The COSE_Key `{1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}`, labels in that order.
    private var coseKey: CBORValue {
        .map([
            (.unsigned(1), .unsigned(2)),
            (.unsigned(3), .negative(6)),
            (.negative(0), .unsigned(1)),
            (.negative(1), .bytes(Array(publicKey[1..<33]))),
            (.negative(2), .bytes(Array(publicKey[33..<65]))),
        ])
    }
}
