/// Why an App Attest attestation, assertion or authenticator data could not be parsed.
///
/// Parsing failures are expected (attackers send garbage), so the parsers return them in a `Result`.
/// `field` names where the problem was found, e.g. `attStmt.x5c[1]` or `authData.credentialPublicKey`.
public struct AppAttestParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed list of parse failures.
    public enum Code: Sendable, Equatable {
        /// The input is not a single well-formed CBOR item within the decoder limits.
        case notCBOR(CBORError.Code)
        /// The CBOR is well-formed but not the expected shape (not a map, or `fmt` is not `apple-appattest`).
        case wrongFormat
        /// A required field is absent.
        case missingField(String)
        /// A field has the wrong CBOR type or size.
        case wrongType(String)
        /// Authenticator data ends before a fixed-size field or the credential ID.
        case truncated
        /// The COSE_Key is not an EC2 P-256 ES256 key with 32-byte coordinates.
        case badCOSEKey
        /// Bytes after the fixed fields / COSE key are not one CBOR map with text keys.
        case badExtensions
        /// Bytes after the extensions map.
        case trailingGarbage
        /// Attestation authenticator data without attested credential data (AT flag off).
        case missingAttestedCredentialData
    }

    public let code: Code
    /// Where in the object the problem was found.
    public let field: String

    public init(_ code: Code, field: String) {
        self.code = code
        self.field = field
    }

    public var description: String { "AppAttestParseError(\(code) in \(field))" }
}
