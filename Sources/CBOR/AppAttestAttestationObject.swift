/// An App Attest attestation object, parsed but **not verified**: the certificates are raw DER, nothing has
/// been checked against the Apple root, the nonce, the App ID or the key ID.
///
/// Shape: `{fmt: "apple-appattest", attStmt: {x5c: [leaf, intermediate, …], receipt: bytes}, authData: bytes}`.
/// Unknown keys are ignored at both levels; duplicate keys are rejected by the decoder.
public struct AppAttestAttestationObject: Sendable, Equatable {
    /// Always `apple-appattest`.
    public let format: String
    /// DER certificates, leaf first; at least two.
    public let certificateChain: [[UInt8]]
    /// The App Store receipt (a CMS blob), opaque here.
    public let receipt: [UInt8]
    /// The parsed authenticator data; it always carries attested credential data.
    public let authenticatorData: AuthenticatorData

    /// The attested credential data (never nil for a parsed attestation).
    public var attestedCredentialData: AttestedCredentialData { authenticatorData.attestedCredentialData! }

    /// Parses an attestation object (the CBOR bytes the app sends, already base64-decoded).
    public static func parse(_ cbor: [UInt8], decoder: CBORDecoder = CBORDecoder()) -> Result<AppAttestAttestationObject, AppAttestParseError> {
        do throws(AppAttestParseError) {
            let root = try AppAttestCBOR.decodeMap(cbor, decoder: decoder)
            guard let fmt = root[textKey: "fmt"] else { throw AppAttestParseError(.missingField("fmt"), field: "fmt") }
            guard fmt == .text("apple-appattest") else { throw AppAttestParseError(.wrongFormat, field: "fmt") }
            let statement = try AppAttestCBOR.field("attStmt", in: root, path: "attStmt", \.mapValue)
            let x5c = try AppAttestCBOR.field("x5c", in: .map(statement), path: "attStmt.x5c", \.arrayValue)
            guard x5c.count >= 2 else { throw AppAttestParseError(.wrongType("x5c"), field: "attStmt.x5c") }
            var chain: [[UInt8]] = []
            for (i, certificate) in x5c.enumerated() {
                guard let der = certificate.bytesValue, !der.isEmpty else {
                    throw AppAttestParseError(.wrongType("x5c"), field: "attStmt.x5c[\(i)]")
                }
                chain.append(der)
            }
            let receipt = try AppAttestCBOR.field("receipt", in: .map(statement), path: "attStmt.receipt", \.bytesValue)
            let authBytes = try AppAttestCBOR.field("authData", in: root, path: "authData", \.bytesValue)
            let authData = try AuthenticatorData.parseOrThrow(authBytes, kind: .attestation, field: "authData", decoder: decoder)
            return .success(AppAttestAttestationObject(
                format: "apple-appattest", certificateChain: chain, receipt: receipt, authenticatorData: authData))
        } catch {
            return .failure(error)
        }
    }
}

/// Shared helpers for the two App Attest envelopes.
enum AppAttestCBOR {
    /// Decodes `cbor` as exactly one CBOR map.
    static func decodeMap(_ cbor: [UInt8], decoder: CBORDecoder) throws(AppAttestParseError) -> CBORValue {
        switch decoder.decodePrefix(cbor) {
        case .failure(let error):
            throw AppAttestParseError(.notCBOR(error.code), field: "$")
        case .success(let decoded):
            guard decoded.value.mapValue != nil else { throw AppAttestParseError(.wrongFormat, field: "$") }
            guard decoded.bytesConsumed == cbor.count else { throw AppAttestParseError(.trailingGarbage, field: "$") }
            return decoded.value
        }
    }

    /// The value under text key `name` of `map`, converted by `extract`; missing → missingField, else wrongType.
    static func field<T>(_ name: String, in map: CBORValue, path: String, _ extract: (CBORValue) -> T?) throws(AppAttestParseError) -> T {
        guard let value = map[textKey: name] else { throw AppAttestParseError(.missingField(name), field: path) }
        guard let typed = extract(value) else { throw AppAttestParseError(.wrongType(name), field: path) }
        return typed
    }
}
