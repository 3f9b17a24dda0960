/// An App Attest assertion, parsed but **not verified**: `{signature: DER ECDSA bytes, authenticatorData: bytes}`.
/// The authenticator data is 37 bytes plus an optional extensions map; its AT flag is set on real devices
/// but no attested credential data follows, so the flag is ignored. An optional
/// extensions map may follow. Unknown keys are ignored; duplicate keys are rejected by the decoder.
public struct AppAttestAssertionObject: Sendable, Equatable {
    /// The DER-encoded ECDSA P-256 signature over SHA-256(authenticatorData ‖ clientDataHash).
    public let signature: [UInt8]
    /// The parsed authenticator data.
    public let authenticatorData: AuthenticatorData

    /// Parses an assertion (the CBOR bytes the app sends, already base64-decoded).
    public static func parse(_ cbor: [UInt8], decoder: CBORDecoder = CBORDecoder()) -> Result<AppAttestAssertionObject, AppAttestParseError> {
        do throws(AppAttestParseError) {
            let root = try AppAttestCBOR.decodeMap(cbor, decoder: decoder)
            let signature = try AppAttestCBOR.field("signature", in: root, path: "signature", \.bytesValue)
            guard !signature.isEmpty else { throw AppAttestParseError(.wrongType("signature"), field: "signature") }
            let authBytes = try AppAttestCBOR.field("authenticatorData", in: root, path: "authenticatorData", \.bytesValue)
            let authData = try AuthenticatorData.parseOrThrow(authBytes, kind: .assertion, field: "authenticatorData", decoder: decoder)
            return .success(AppAttestAssertionObject(signature: signature, authenticatorData: authData))
        } catch {
            return .failure(error)
        }
    }
}
