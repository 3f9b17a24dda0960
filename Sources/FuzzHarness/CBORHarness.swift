import CBOR

/// The `cbor-appattest` target: the CBOR decoder, the App Attest attestation and assertion objects, and
/// authenticator data of both kinds, all over the same bytes.
///
/// Invariants: a decoded prefix lies within the input, decodes the same on its own, and is what whole-input
/// decoding returns when it covers the input; whatever decodes under tight limits decodes the same under the
/// default ones; a parsed object's fields are consistent with its bytes (see ``checkAuthenticatorData``).
enum CBORHarness {
    static let decoder = CBORDecoder()
    static let tightDecoder = CBORDecoder(limits: CBORDecoderLimits(maxInputBytes: 1024, maxDepth: 4, maxItems: 32))

    static func run(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        checkDecoder(bytes)
        checkAttestation(bytes)
        checkAssertion(bytes)
        for kind in [AuthenticatorData.Kind.attestation, .assertion] {
            if case .success(let authData) = AuthenticatorData.parse(bytes, kind: kind) {
                checkAuthenticatorData(authData, of: bytes, kind: kind)
            }
        }
    }

    static func checkDecoder(_ bytes: [UInt8]) {
        let whole = decoder.decode(bytes)
        guard case .success(let prefix) = decoder.decodePrefix(bytes) else {
            fuzzCheck((try? whole.get()) == nil, "decode succeeded where decodePrefix failed")
            return
        }
        let consumed = prefix.bytesConsumed
        fuzzCheck(consumed > 0 && consumed <= bytes.count, "prefix of \(consumed) bytes in \(bytes.count)")
        switch whole {
        case .success(let value):
            fuzzCheck(consumed == bytes.count && value.isIdentical(to: prefix.value), "decode and decodePrefix disagree")
        case .failure(let error):
            fuzzCheck(consumed < bytes.count && error.code == .trailingBytes, "decode failed with \(error) on a whole item")
        }
        let alone = decoder.decodePrefix(Array(bytes[..<consumed]))
        fuzzCheck((try? alone.get()).map { $0.bytesConsumed == consumed && $0.value.isIdentical(to: prefix.value) } == true,
                  "the item's own \(consumed) bytes decode differently")
        if case .success(let tight) = tightDecoder.decodePrefix(bytes) {
            fuzzCheck(tight.bytesConsumed == consumed && tight.value.isIdentical(to: prefix.value),
                      "tight limits decode differently")
        }
    }

    static func checkAttestation(_ bytes: [UInt8]) {
        guard case .success(let object) = AppAttestAttestationObject.parse(bytes) else { return }
        fuzzCheck(object.format == "apple-appattest", "format \(object.format)")
        fuzzCheck(object.certificateChain.count >= 2 && object.certificateChain.allSatisfy { !$0.isEmpty },
                  "a chain of \(object.certificateChain.count) certificates")
        let credential = object.attestedCredentialData  // traps if absent
        fuzzCheck(credential.aaguid.count == 16, "aaguid of \(credential.aaguid.count) bytes")
        checkAuthenticatorData(object.authenticatorData, of: object.authenticatorData.bytes, kind: .attestation)
    }

    static func checkAssertion(_ bytes: [UInt8]) {
        guard case .success(let object) = AppAttestAssertionObject.parse(bytes) else { return }
        fuzzCheck(!object.signature.isEmpty, "an empty signature")
        checkAuthenticatorData(object.authenticatorData, of: object.authenticatorData.bytes, kind: .assertion)
    }

    /// The parsed fields are the bytes': hash, flags and counter at their offsets, credential data exactly for
    /// attestations, a 65-byte uncompressed point, and the typed Apple extensions taken from the extensions map.
    static func checkAuthenticatorData(_ authData: AuthenticatorData, of bytes: [UInt8], kind: AuthenticatorData.Kind) {
        fuzzCheck(authData.bytes == bytes && bytes.count >= 37, "authenticator data is not its input")
        fuzzCheck(authData.rpIdHash.elementsEqual(bytes[0..<32]), "rpIdHash is not bytes 0..<32")
        fuzzCheck(authData.flags.rawValue == bytes[32], "flags are not byte 32")
        fuzzCheck(authData.signCount == bytes[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }, "signCount is not bytes 33..<37")
        switch kind {
        case .attestation:
            guard let credential = authData.attestedCredentialData else {
                fuzzCheck(false, "attestation authenticator data without credential data")
                return
            }
            fuzzCheck(authData.flags.contains(.attestedCredentialData), "credential data without the AT flag")
            fuzzCheck(credential.publicKey.count == 65 && credential.publicKey[0] == 0x04, "not an uncompressed P-256 point")
            fuzzCheck(37 + 18 + credential.credentialId.count < bytes.count, "credential ID beyond the data")
        case .assertion:
            fuzzCheck(authData.attestedCredentialData == nil, "assertion authenticator data with credential data")
        }
        let category = authData.extensions["apple_validation_category_01"]
        fuzzCheck(authData.appleValidationCategory == category?.bytesValue, "validation category is not the extension's")
        let bundleVersion = authData.extensions["apple_bundle_version_01"]
        fuzzCheck(authData.appleBundleVersion == bundleVersion?.textValue, "bundle version is not the extension's")
    }
}
