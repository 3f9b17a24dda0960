extension AuthenticatorData {
    /// Which object the authenticator data came from; it decides whether attested credential data follows.
    public enum Kind: Sendable {
        /// From an attestation: the AT flag must be set and the attested credential data is parsed.
        case attestation
        /// From an assertion: never any attested credential data. The AT flag is ignored because real
        /// App Attest assertions set it (flags 0x40) while carrying only the 37 fixed bytes.
        case assertion
    }

    /// Parses authenticator data. `field` prefixes error locations (e.g. `authData`).
    public static func parse(
        _ bytes: [UInt8], kind: Kind, field: String = "authData", decoder: CBORDecoder = CBORDecoder()
    ) -> Result<AuthenticatorData, AppAttestParseError> {
        do throws(AppAttestParseError) {
            return .success(try parseOrThrow(bytes, kind: kind, field: field, decoder: decoder))
        } catch {
            return .failure(error)
        }
    }

    static func parseOrThrow(_ bytes: [UInt8], kind: Kind, field: String, decoder: CBORDecoder) throws(AppAttestParseError) -> AuthenticatorData {
        guard bytes.count >= fixedLength else { throw AppAttestParseError(.truncated, field: field) }
        let flags = Flags(rawValue: bytes[32])
        let signCount = bytes[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        var offset = fixedLength
        var credential: AttestedCredentialData?
        if kind == .attestation {
            guard flags.contains(.attestedCredentialData) else {
                throw AppAttestParseError(.missingAttestedCredentialData, field: field)
            }
            credential = try parseAttestedCredentialData(bytes, offset: &offset, field: field, decoder: decoder)
        }
        let extensions = try parseExtensions(Array(bytes[offset...]), flags: flags, field: field + ".extensions", decoder: decoder)
        let category = try typedExtension("apple_validation_category_01", in: extensions, field: field, \.bytesValue)
        let bundleVersion = try typedExtension("apple_bundle_version_01", in: extensions, field: field, \.textValue)
        return AuthenticatorData(
            bytes: bytes, rpIdHash: Array(bytes[0..<32]), flags: flags, signCount: signCount,
            attestedCredentialData: credential, extensions: extensions,
            appleValidationCategory: category, appleBundleVersion: bundleVersion)
    }

    private static func parseAttestedCredentialData(
        _ bytes: [UInt8], offset: inout Int, field: String, decoder: CBORDecoder
    ) throws(AppAttestParseError) -> AttestedCredentialData {
        guard bytes.count >= offset + 18 else { throw AppAttestParseError(.truncated, field: field + ".attestedCredentialData") }
        let aaguid = Array(bytes[offset..<offset + 16])
        let idLength = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
        offset += 18
        guard bytes.count >= offset + idLength else { throw AppAttestParseError(.truncated, field: field + ".credentialId") }
        let credentialId = Array(bytes[offset..<offset + idLength])
        offset += idLength
        let keyField = field + ".credentialPublicKey"
        guard offset < bytes.count else { throw AppAttestParseError(.truncated, field: keyField) }
        let decoded: CBORDecodedPrefix
        switch decoder.decodePrefix(Array(bytes[offset...])) {
        case .success(let d): decoded = d
        case .failure: throw AppAttestParseError(.badCOSEKey, field: keyField)
        }
        offset += decoded.bytesConsumed
        let publicKey = try uncompressedP256Point(fromCOSEKey: decoded.value, field: keyField)
        return AttestedCredentialData(aaguid: aaguid, credentialId: credentialId, publicKey: publicKey)
    }

    /// Accepts only what App Attest produces: kty 2 (EC2), alg -7 (ES256), crv 1 (P-256), 32-byte x and y.
    /// Other labels are ignored. Whether the point is on the curve is the verifier's job (OpenSSL checks it).
    static func uncompressedP256Point(fromCOSEKey key: CBORValue, field: String) throws(AppAttestParseError) -> [UInt8] {
        guard key.mapValue != nil,
              key[intKey: 1]?.int64Value == 2,
              key[intKey: 3]?.int64Value == -7,
              key[intKey: -1]?.int64Value == 1,
              let x = key[intKey: -2]?.bytesValue, x.count == 32,
              let y = key[intKey: -3]?.bytesValue, y.count == 32
        else { throw AppAttestParseError(.badCOSEKey, field: field) }
        return [0x04] + x + y
    }

    private static func parseExtensions(
        _ rest: [UInt8], flags: Flags, field: String, decoder: CBORDecoder
    ) throws(AppAttestParseError) -> [String: CBORValue] {
        guard !rest.isEmpty else {
            // ED promises extensions; claiming them and sending none is malformed.
            if flags.contains(.extensionData) { throw AppAttestParseError(.badExtensions, field: field) }
            return [:]
        }
        let decoded: CBORDecodedPrefix
        switch decoder.decodePrefix(rest) {
        case .success(let d): decoded = d
        case .failure: throw AppAttestParseError(.badExtensions, field: field)
        }
        guard let entries = decoded.value.mapValue else { throw AppAttestParseError(.badExtensions, field: field) }
        guard decoded.bytesConsumed == rest.count else { throw AppAttestParseError(.trailingGarbage, field: field) }
        var extensions: [String: CBORValue] = [:]
        for (key, value) in entries {
            guard let name = key.textValue else { throw AppAttestParseError(.badExtensions, field: field) }
            extensions[name] = value  // keys are unique: the decoder rejects duplicate map keys
        }
        return extensions
    }

    private static func typedExtension<T>(
        _ name: String, in extensions: [String: CBORValue], field: String, _ extract: (CBORValue) -> T?
    ) throws(AppAttestParseError) -> T? {
        guard let value = extensions[name] else { return nil }
        guard let typed = extract(value) else { throw AppAttestParseError(.wrongType(name), field: field + ".extensions") }
        return typed
    }
}
