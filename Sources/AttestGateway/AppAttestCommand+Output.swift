import Attestation
import CBOR
import GatewayCLI
import GatewayCore
import GatewayCrypto
import JOSE

/// The one JSON object the `appattest` commands print.
extension AppAttestCommand {
    /// Prints `{"verified":…, ["reason","detail",] fields…}` on standard output; the exit code says the same.
    static func emit(_ failure: AppAttestFailure?, _ fields: [(String, JSONValue)]) -> Int32 {
        var members: [(String, JSONValue)] = [("verified", .bool(failure == nil))]
        if let failure {
            // `reason` is what the gateway would have answered; `detail` names the check for the operator.
            members.append(("reason", .string(failure.status.code)))
            members.append(("detail", .string(failure.code)))
            if case .malformed(let why) = failure { members.append(("parse_error", .string(why))) }
        }
        print(JSONEncoding.encode(.object(JSONObject(members + fields))))
        return failure == nil ? ExitCode.ok : ExitCode.failure
    }

    /// What the attestation says about its key (from the authenticator data and the leaf certificate).
    static func attestationFields(_ claims: AppAttestAttestationClaims) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [("key_id", .string(encodeBase64(claims.credentialID)))]
        if let environment = claims.environment { fields.append(("environment", .string(environment.rawValue))) }
        fields.append(("counter", .number(JSONNumber(Int64(claims.counter)))))
        // The certified key; the COSE copy in authData only when it differs (then detail is public_key_mismatch).
        fields.append(("public_key", .string(hexString(claims.certifiedPublicKey ?? claims.credentialPublicKey))))
        if let certified = claims.certifiedPublicKey, certified != claims.credentialPublicKey {
            fields.append(("credential_public_key", .string(hexString(claims.credentialPublicKey))))
        }
        fields.append(("extensions", extensions(claims.validationCategory, claims.bundleVersion)))
        if let notBefore = claims.leafNotBefore, let notAfter = claims.leafNotAfter {
            fields.append(("certificate", .object(JSONObject([
                ("not_before", .string(RFC3339.format(notBefore))), ("not_after", .string(RFC3339.format(notAfter))),
            ]))))
        }
        if let acl = claims.keyAccessControl { fields.append(("key_access_control", .string(hexString(acl)))) }
        return fields
    }

    /// The key the assertion was checked against (with its environment when it came from an attestation) and what
    /// the authenticator data says (nil when it did not parse).
    static func assertionFields(
        _ authData: AuthenticatorData?, publicKey: [UInt8], environment: AppAttestEnvironment?, previousCounter: UInt32
    ) -> [(String, JSONValue)] {
        var fields: [(String, JSONValue)] = [("key_id", .string(encodeBase64(SHA256Hasher.hash(publicKey))))]
        if let environment { fields.append(("environment", .string(environment.rawValue))) }
        if let authData { fields.append(("counter", .number(JSONNumber(Int64(authData.signCount))))) }
        fields.append(("previous_counter", .number(JSONNumber(Int64(previousCounter)))))
        fields.append(("public_key", .string(hexString(publicKey))))
        if let authData { fields.append(("extensions", extensions(authData.appleValidationCategory, authData.appleBundleVersion))) }
        return fields
    }

    /// The Apple authenticator-data extensions that are present.
    private static func extensions(_ validationCategory: [UInt8]?, _ bundleVersion: String?) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let validationCategory { members.append(("validation_category", .string(hexString(validationCategory)))) }
        if let bundleVersion { members.append(("bundle_version", .string(bundleVersion))) }
        return .object(JSONObject(members))
    }
}
