import JOSE

/// The `jose` target: strict base64url, strict JSON, compact JWS splitting and JWKS parsing over the same bytes.
///
/// The input is tried as base64url text, as a JSON document, as a compact token, and — so JSON mutations reach the
/// token path too — as the header and payload of a token built around it. Invariants: base64url round trips both
/// ways and accepts only the canonical spelling; what the JSON parser accepts re-encodes to a document that parses
/// to the same value and encodes to the same bytes again; a parsed token's parts are the input's; a parsed key set
/// is non-empty and within its entry bound.
enum JOSEHarness {
    static func run(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        checkBase64URL(data, bytes)
        let document = checkJSON(bytes)
        checkJWS(data)
        let part = Base64URL.encode(bytes)
        var token = part + "." + part + ".c2ln"
        token.withUTF8 { checkJWS(UnsafeRawBufferPointer($0)) }
        // JWKS.parse starts with the same JSON parse: only documents the parser accepted get further than that.
        if document != nil { checkJWKS(bytes) }
    }

    static func checkBase64URL(_ data: UnsafeRawBufferPointer, _ bytes: [UInt8]) {
        if let decoded = Base64URL.decode(data) {
            // Strict means canonical: the one spelling of these bytes is the input itself.
            fuzzCheck(Base64URL.encode(decoded).utf8.elementsEqual(bytes), "base64url accepted a non-canonical spelling")
        }
        let encoded = Base64URL.encode(bytes)
        fuzzCheck(encoded.utf8.count == (bytes.count * 4 + 2) / 3, "base64url encoding of \(bytes.count) bytes has \(encoded.utf8.count)")
        fuzzCheck(Base64URL.decode(encoded) == bytes, "base64url decode(encode(x)) != x")
    }

    /// The parsed document, after checking the encoder round trip.
    static func checkJSON(_ bytes: [UInt8]) -> JSONValue? {
        guard let value = try? StrictJSON.parse(bytes) else { return nil }
        let encoded = JSONEncoding.encode(value)
        let reparsed: JSONValue
        do { reparsed = try StrictJSON.parse(Array(encoded.utf8)) } catch {
            fuzzCheck(false, "the encoding of a parsed document does not parse: \(error)")
            return nil
        }
        fuzzCheck(reparsed == value, "parse(encode(v)) != v")
        fuzzCheck(JSONEncoding.encode(reparsed) == encoded, "encode(parse(encode(v))) != encode(v)")
        return value
    }

    static func checkJWS(_ token: UnsafeRawBufferPointer) {
        guard case .success(let jws) = UnverifiedJWS.parse(token) else { return }
        let dots = token.indices.filter { token[$0] == UInt8(ascii: ".") }
        fuzzCheck(dots.count == 2, "a token with \(dots.count) dots parsed")
        fuzzCheck(jws.signingInput.elementsEqual(token[0..<dots[1]]), "signing input is not the token's first two parts")
        fuzzCheck(Base64URL.encode(jws.signature).utf8.elementsEqual(token[(dots[1] + 1)...]), "signature is not the third part")
        let header = Base64URL.decode(UnsafeRawBufferPointer(rebasing: token[0..<dots[0]])).flatMap { try? StrictJSON.parse($0) }
        fuzzCheck(header == .object(jws.header), "header is not the first part's JSON")
        _ = (jws.algorithm, jws.keyID, jws.type)
    }

    static func checkJWKS(_ bytes: [UInt8]) {
        guard let set = try? JWKS.parse(bytes) else { return }
        fuzzCheck(!set.keys.isEmpty && set.keys.count <= JWKS.maxEntries, "a key set of \(set.keys.count) keys parsed")
        fuzzCheck(set.keyIDs.allSatisfy { !$0.isEmpty }, "an empty kid was taken")
    }
}
