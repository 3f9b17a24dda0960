/// A compact JWS (RFC 7515 §7.1) split and decoded, NOT verified: nothing in it is trustworthy until a verifier
/// has checked the signature over `signingInput` with a pinned algorithm and a known key.
public struct UnverifiedJWS: Sendable {
    /// The protected header.
    public let header: JSONObject
    /// The payload, which for a JWT is the claims set.
    public let claims: JSONObject
    /// The exact ASCII bytes `<b64 header>.<b64 payload>` as received. The signature is checked over these bytes,
    /// never over a re-encoding of the decoded header and claims.
    public let signingInput: [UInt8]
    /// The decoded signature.
    public let signature: [UInt8]

    /// Header `alg` when it is a string.
    public var algorithm: String? { header["alg"]?.stringValue }
    /// Header `kid` when it is a string.
    public var keyID: String? { header["kid"]?.stringValue }
    /// Header `typ` when it is a string.
    public var type: String? { header["typ"]?.stringValue }

    /// Splits and decodes a compact JWS: exactly three non-empty parts separated by '.', each strict base64url,
    /// header and payload strict JSON objects. An empty signature part (as in `alg: none`) is refused here.
    public static func parse(_ token: UnsafeRawBufferPointer) -> Result<UnverifiedJWS, JWSParseError> {
        var dots = (first: -1, second: -1)
        var dotCount = 0
        for (k, byte) in token.enumerated() where byte == UInt8(ascii: ".") {
            dotCount += 1
            if dotCount == 1 { dots.first = k } else if dotCount == 2 { dots.second = k }
        }
        guard dotCount == 2 else { return .failure(JWSParseError(.wrongPartCount)) }
        let headerPart = UnsafeRawBufferPointer(rebasing: token[0..<dots.first])
        let payloadPart = UnsafeRawBufferPointer(rebasing: token[(dots.first + 1)..<dots.second])
        let signaturePart = UnsafeRawBufferPointer(rebasing: token[(dots.second + 1)...])
        guard !headerPart.isEmpty, !payloadPart.isEmpty, !signaturePart.isEmpty else {
            return .failure(JWSParseError(.emptyPart))
        }
        guard let headerBytes = Base64URL.decode(headerPart), let payloadBytes = Base64URL.decode(payloadPart),
              let signature = Base64URL.decode(signaturePart) else {
            return .failure(JWSParseError(.badBase64))
        }
        let header: JSONValue, payload: JSONValue
        do throws(JSONError) {
            header = try StrictJSON.parse(headerBytes)
            payload = try StrictJSON.parse(payloadBytes)
        } catch {
            return .failure(JWSParseError(.badJSON))
        }
        guard let headerObject = header.objectValue, let claims = payload.objectValue else {
            return .failure(JWSParseError(.notAnObject))
        }
        return .success(UnverifiedJWS(header: headerObject, claims: claims,
                                      signingInput: Array(token[0..<dots.second]), signature: signature))
    }

    /// String convenience for `parse(_: UnsafeRawBufferPointer)`.
    public static func parse(_ token: String) -> Result<UnverifiedJWS, JWSParseError> {
        var token = token
        return token.withUTF8 { parse(UnsafeRawBufferPointer($0)) }
    }
}

/// Why a token is not a well-formed compact JWS.
public struct JWSParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The closed list of reasons.
    public enum Reason: String, Sendable {
        case wrongPartCount, emptyPart, badBase64, badJSON, notAnObject
    }

    public let reason: Reason

    public init(_ reason: Reason) { self.reason = reason }

    public var description: String { "malformed JWS: \(reason.rawValue)" }
}
