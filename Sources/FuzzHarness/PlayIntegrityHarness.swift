import Attestation
import GatewayCrypto
import JOSE

/// The `play-integrity` target: Play Integrity classic tokens (`CompactJWE`, A256KW + A256GCM, around a JWS ES256
/// verdict) with developer-managed keys, generated once per process, and the verdict policy.
///
/// The input is tried three ways. As a token: `CompactJWE.decrypt` and `PlayIntegrityVerifier.decodeClassic`;
/// invariants: only a five-part token decrypts, and `decodeClassic` refuses what does not decrypt, for the reason the
/// decryption failure maps to. As a JWE plaintext: encrypted under the fixed key; invariants: the token decrypts to
/// the input (an empty input excepted: its empty ciphertext part is refused as `malformed`), not under another key,
/// not with one character changed, and `decodeClassic` refuses it (nothing here signs it; the reason follows from
/// the input as a JWS). As a verdict payload, when it is a JSON object: signed ES256 and encrypted; invariants:
/// `decodeClassic` succeeds iff `PlayIntegrityVerdict.parse` of the object does, with the same verdict (a refusal
/// is `malformed_token` after a payload that decoded to the object itself), then under two fixed policies a passing
/// verdict's labels and fields are what the policy asked for, and a `requestPackageName` that differs from the
/// policy's by one edit (including a canonically equivalent spelling) is always `wrong_package`.
enum PlayIntegrityHarness {
    static let decryptionKey = SecureRandom.bytes(32)
    static let otherKey = SecureRandom.bytes(32)
    static let signingKey: ECPrivateKey = {
        do { return try ECPrivateKey.generate(.p256) } catch { fatalError("fuzz harness: generating a P-256 key: \(error)") }
    }()
    static let keys: PlayIntegrityClassicKeys = {
        guard let point = try? signingKey.uncompressedPublicPoint(), let publicKey = ECPublicKey(uncompressedP256: point),
              let keys = PlayIntegrityClassicKeys(decryptionKey: decryptionKey, verificationKey: publicKey) else {
            fatalError("fuzz harness: building the classic keys")
        }
        return keys
    }()

    /// The time every verdict is judged at; the seeds' `timestampMillis` are near it.
    static let nowMillis: Int64 = 1_750_000_000_000
    /// base64url of the bytes 0…31: the signing-certificate digest both policies allow (the seeds carry it).
    static let certificateDigest = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
    /// A policy with every check switched on (an upper-case `K` in the package: a Kelvin sign is canonically
    /// equivalent to it), and one that accepts as much as a configuration can.
    static let policies = [
        PlayIntegrityPolicy(packageName: "com.example.Kiosk", certificateDigests: [certificateDigest + "="],
                            minDeviceIntegrity: "MEETS_STRONG_INTEGRITY", requireLicensed: true, playProtect: ["NO_ISSUES", "NO_DATA"],
                            maxDeviceActivity: 2, maxSkewMillis: 60_000),
        PlayIntegrityPolicy(packageName: "com.example.app", certificateDigests: [certificateDigest],
                            appRecognition: ["PLAY_RECOGNIZED", "UNRECOGNIZED_VERSION", "UNEVALUATED"],
                            minDeviceIntegrity: "MEETS_BASIC_INTEGRITY"),
    ]
    /// Per policy, the package names one edit away from its own (see ``mutations(of:)``).
    static let mutatedPackages = policies.map { mutations(of: $0.packageName) }

    static func run(_ data: UnsafeRawBufferPointer) {
        let bytes = Array(data)
        checkToken(data, bytes)
        checkPlaintext(bytes)
        if case .object(let payload)? = try? StrictJSON.parse(bytes) { checkVerdict(bytes, payload) }
    }

    static func dotCount(_ bytes: some Sequence<UInt8>) -> Int {
        bytes.reduce(0) { $1 == UInt8(ascii: ".") ? $0 + 1 : $0 }
    }

    /// The status `decodeClassic` gives for a token `CompactJWE.decrypt` refused.
    static func status(for failure: CompactJWE.Failure) -> VerificationStatus {
        switch failure {
        case .unsupportedAlgorithm: .unsupportedAlgorithm
        case .keyUnwrapFailed: .badSignature
        case .malformed, .decryptionFailed: .malformedToken
        }
    }

    // MARK: the input as a token

    static func checkToken(_ data: UnsafeRawBufferPointer, _ bytes: [UInt8]) {
        let decrypted = CompactJWE.decrypt(data, kek: decryptionKey)
        if case .success = decrypted {
            fuzzCheck(dotCount(data) == 4, "a token with \(dotCount(data)) dots decrypted")
        }
        let classic = PlayIntegrityVerifier.decodeClassic(bytes, keys: keys)
        if case .failure(let failure) = decrypted {
            switch classic {
            case .success: fuzzCheck(false, "decodeClassic accepted a token that does not decrypt (\(failure))")
            case .failure(let status):
                fuzzCheck(status == Self.status(for: failure), "decodeClassic said \(status) for a \(failure) token")
            }
        }
    }

    // MARK: the input as a JWE plaintext

    static func checkPlaintext(_ bytes: [UInt8]) {
        guard let token = CompactJWE.encrypt(bytes, kek: decryptionKey) else {
            fuzzCheck(false, "encrypt refused \(bytes.count) bytes")
            return
        }
        var tokenBytes = Array(token.utf8)
        fuzzCheck(dotCount(tokenBytes) == 4, "encrypt wrote a token with \(dotCount(tokenBytes)) dots")
        let decrypted = CompactJWE.decrypt(token, kek: decryptionKey)
        if bytes.isEmpty {
            // A256GCM of nothing is an empty ciphertext part, which decrypt refuses.
            fuzzCheck(decrypted == .failure(.malformed), "the token of an empty plaintext gave \(decrypted)")
        } else {
            fuzzCheck(decrypted == .success(bytes), "decrypt(encrypt(x)) != x for \(bytes.count) bytes: \(decrypted)")
        }
        let wrongKey = CompactJWE.decrypt(token, kek: otherKey)
        fuzzCheck(wrongKey == .failure(bytes.isEmpty ? .malformed : .keyUnwrapFailed), "another key gave \(wrongKey)")

        let classic = PlayIntegrityVerifier.decodeClassic(tokenBytes, keys: keys)
        let jws = bytes.withUnsafeBytes { UnverifiedJWS.parse($0) }
        switch (classic, jws) {
        case (.success, _):
            fuzzCheck(false, "decodeClassic accepted a token whose JWS nobody signed")
        case (.failure(let status), .failure):
            fuzzCheck(status == .malformedToken, "a plaintext that is not a JWS gave \(status)")
        case (.failure(let status), .success(let parsed)):
            if parsed.algorithm.map({ $0.utf8.elementsEqual("ES256".utf8) }) ?? false {
                fuzzCheck(status == .badSignature || status == .malformedToken, "an unsigned ES256 JWS gave \(status)")
            } else {
                fuzzCheck(status == .unsupportedAlgorithm, "a JWS with alg \(parsed.algorithm ?? "(none)") gave \(status)")
            }
        }

        // One character changed (at a place derived from the input): never decrypts.
        let at = bytes.reduce(bytes.count) { ($0 &* 31 &+ Int($1)) & 0xFFFF } % tokenBytes.count
        tokenBytes[at] = tokenBytes[at] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let tampered = tokenBytes.withUnsafeBytes { CompactJWE.decrypt($0, kek: decryptionKey) }
        if case .success = tampered { fuzzCheck(false, "a token with byte \(at) changed decrypted") }
    }

    // MARK: the input as a verdict payload

    static func checkVerdict(_ bytes: [UInt8], _ payload: JSONObject) {
        let jws: String
        do { jws = try JWSSigner.signES256(header: ["alg": "ES256"], payload: bytes, key: signingKey) } catch {
            fuzzCheck(false, "signing \(bytes.count) bytes failed: \(error)")
            return
        }
        guard let token = CompactJWE.encrypt(Array(jws.utf8), kek: decryptionKey) else {
            fuzzCheck(false, "encrypt refused a \(jws.utf8.count)-byte JWS")
            return
        }
        let tokenBytes = Array(token.utf8)
        let expected = PlayIntegrityVerdict.parse(payload)
        switch PlayIntegrityVerifier.decodeClassic(tokenBytes, keys: keys) {
        case .success(let verdict):
            fuzzCheck(expected != nil, "decodeClassic read a verdict parse refuses")
            fuzzCheck(verdict == expected, "decodeClassic's verdict is not parse's")
        case .failure(let status):
            fuzzCheck(expected == nil, "decodeClassic refused (\(status)) a signed verdict parse reads")
            fuzzCheck(status == .malformedToken, "an unreadable verdict gave \(status)")
            // The refusal must be the verdict's, not the envelope's: the payload itself decodes.
            switch PlayIntegrityVerifier.decodeClassicPayload(tokenBytes, keys: keys) {
            case .success(let claims): fuzzCheck(claims == payload, "the verified payload is not the signed object")
            case .failure(let status): fuzzCheck(false, "a signed, encrypted payload gave \(status)")
            }
        }
        guard let verdict = expected else { return }
        for (policy, names) in zip(policies, mutatedPackages) {
            if case .success(let judged) = policy.judge(verdict, nowMillis: nowMillis) {
                checkPassed(judged, verdict, policy)
            }
            for name in names {
                guard let mutated = PlayIntegrityVerdict.parse(replacingPackage(in: payload, with: name)) else {
                    fuzzCheck(false, "a verdict with requestPackageName \(name.debugDescription) does not parse")
                    continue
                }
                let judged = policy.judge(mutated, nowMillis: nowMillis)
                fuzzCheck(judged == .failure(.wrongPackage),
                          "requestPackageName \(name.debugDescription) under policy \(policy.packageName) gave \(judged)")
            }
        }
    }

    /// What a passing verdict must have given `policy`, compared byte for byte.
    static func checkPassed(_ judged: PlayIntegrityPolicy.Judged, _ v: PlayIntegrityVerdict, _ policy: PlayIntegrityPolicy) {
        func same(_ a: String?, _ b: String) -> Bool { a.map { $0.utf8.elementsEqual(b.utf8) } ?? false }
        guard let index = PlayIntegrityPolicy.deviceLabels.firstIndex(where: { same($0, judged.deviceIntegrity) }) else {
            fuzzCheck(false, "passed with device integrity \(judged.deviceIntegrity.debugDescription), not a known label")
            return
        }
        fuzzCheck(index >= policy.minDeviceIntegrity, "passed with \(judged.deviceIntegrity) below the policy's minimum")
        fuzzCheck(v.deviceLabels.contains { same($0, judged.deviceIntegrity) }, "passed with a label the verdict does not carry")
        fuzzCheck(same(v.requestPackageName, policy.packageName), "passed a verdict for \(v.requestPackageName.debugDescription)")
        fuzzCheck(v.appPackageName == nil || same(v.appPackageName, policy.packageName), "passed an app package of another name")
        fuzzCheck(same(judged.appRecognition, v.appRecognition), "the judged app recognition is not the verdict's")
        fuzzCheck(policy.appRecognition.contains { same($0, v.appRecognition) }, "passed app recognition \(v.appRecognition.debugDescription)")
        fuzzCheck(abs(nowMillis - v.timestampMillis) <= policy.maxSkewMillis, "passed a verdict from \(v.timestampMillis)")
        if !v.certificateDigests.isEmpty || !same(v.appRecognition, "UNEVALUATED") {
            // The policy's digests are stored without padding; a verdict's may carry it.
            let unpadded = v.certificateDigests.map { digest in
                var bytes = Array(digest.utf8)
                while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
                return String(decoding: bytes, as: UTF8.self)
            }
            fuzzCheck(unpadded.contains { d in policy.certificateDigests.contains { same(d, $0) } },
                      "passed without an allowed signing certificate")
        }
        if policy.requireLicensed { fuzzCheck(same(v.licensing, "LICENSED"), "passed unlicensed: \(v.licensing ?? "(none)")") }
        if let allowed = policy.playProtect {
            fuzzCheck(allowed.contains { same(v.playProtect, $0) }, "passed Play Protect \(v.playProtect ?? "(none)")")
        }
        if let ceiling = policy.maxDeviceActivity {
            let level = PlayIntegrityPolicy.activityLevels.firstIndex { same(v.deviceActivity, $0) }
            fuzzCheck(level.map { $0 + 1 <= ceiling } ?? false, "passed device activity \(v.deviceActivity ?? "(none)")")
        }
    }

    /// Package names one edit away from `name`, none byte-equal to it.
    static func mutations(of name: String) -> [String] {
        var out = [String(name.dropLast()), name + "x", name + ".", " " + name, name + "\u{0}", name.uppercased(),
                   name.replacingFirst(".", with: "_"), name + "\u{301}"]
        // U+212A KELVIN SIGN: canonically equivalent to "K", so equal as a Swift String, never as bytes.
        if name.contains("K") { out.append(name.replacingFirst("K", with: "\u{212A}")) }
        return out.filter { !$0.utf8.elementsEqual(name.utf8) }
    }

    /// `payload` with `requestDetails.requestPackageName` set to `name` (the verdict parsed, so both are there).
    static func replacingPackage(in payload: JSONObject, with name: String) -> JSONObject {
        JSONObject(payload.members.map { key, value in
            guard key == "requestDetails", let request = value.objectValue else { return (key, value) }
            return (key, .object(JSONObject(request.members.map { $0.0 == "requestPackageName" ? ($0.0, .string(name)) : $0 })))
        })
    }
}

extension String {
    /// `self` with the first `target` replaced; unchanged when there is none.
    fileprivate func replacingFirst(_ target: Character, with replacement: String) -> String {
        guard let at = firstIndex(of: target) else { return self }
        return String(self[..<at]) + replacement + String(self[index(after: at)...])
    }
}
