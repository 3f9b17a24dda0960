#!/usr/bin/env python3
"""Writes the fuzz seed corpora under Tests/Fuzz/Corpus/<target>/ from the repository's own test data, and the
libFuzzer dictionaries under Tests/Fuzz/Dictionaries/<target>.dict (tokens the mutator splices in).

Run from the repository root: python3 Tests/Fuzz/make_seeds.py [TARGET...]. It replaces the corpus directories it
writes and the dictionaries (the Regressions directories are never touched); with target names (e.g. play-integrity)
it writes only those targets' corpora and dictionaries, so the others (jose's RSA key is fresh each run) stay as
committed. Sources:
  http1-request   Tests/HTTP1Tests/Corpus/{valid,malformed} files up to 4 KiB, plus response heads written here
  jose            tokens, key sets and JSON documents written here (a fresh RSA key each run: only its public
                  half is written, and signatures are over fixed claims; nothing secret is committed)
  cbor-appattest  the attestations and assertions of Tests/CBORTests/Vectors (base64 decoded), the authenticator
                  data inside them, a slim attestation with tiny certificates, and a few small CBOR items
  config-yaml     gateway.yml, the GatewayConfigTests fixtures, the YAML examples in docs/, and short snippets
  http2-session   client frame sequences written here (the harness sends the preface itself)
  request-target  request targets written here: the spellings of CVE-2019-9901 and its relatives (dot segments,
                  merged slashes, %XX of unreserved bytes, escaped slashes, ;-parameters, control bytes, bad escapes)
  play-integrity  Play Integrity verdicts (JSON payloads) written here, the JWS an app's verdict travels in, and
                  five-part JWE shapes (A256KW + A256GCM under fresh throwaway keys, and refused variants)
Needs python3 with `cryptography` (for the RSA key, and play-integrity's EC key, key wrap and AES-GCM).
"""
import base64
import glob
import json
import os
import re
import shutil
import struct

ROOT = os.getcwd()
OUT = os.path.join(ROOT, "Tests", "Fuzz", "Corpus")


def target_dir(name):
    path = os.path.join(OUT, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write(directory, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


# --- http1-request -------------------------------------------------------------------------------------------------

def http1():
    d = target_dir("http1-request")
    for kind in ("valid", "malformed"):
        for path in sorted(glob.glob(os.path.join(ROOT, "Tests/HTTP1Tests/Corpus", kind, "*"))):
            if os.path.getsize(path) <= 4096:
                shutil.copy(path, os.path.join(d, f"{kind}-{os.path.basename(path)}"))
    responses = {
        "cl": "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
        "chunked-trailer": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
        "no-content": "HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
        "not-modified": "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
        "continue-then-ok": "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "switching": "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nraw bytes",
        "http10-until-close": "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until the server closes",
        "keep-alive-10": "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
        "pipelined": "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n",
        "close": "HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 3\r\n\r\nerr",
        "cl-and-te": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "duplicate-cl": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "bad-status": "HTTP/1.1 99 Too Low\r\n\r\n",
        "empty-reason": "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n",
    }
    for name, text in responses.items():
        write(d, f"response-{name}.http", text)


# --- jose ----------------------------------------------------------------------------------------------------------

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jose():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    d = target_dir("jose")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    n = numbers.n.to_bytes(256, "big")
    e = numbers.e.to_bytes(3, "big")

    def token(header, claims, sign=True):
        signing_input = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + \
            b64url(json.dumps(claims, separators=(",", ":")).encode())
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()) if sign else b"\x00" * 8
        return signing_input + "." + b64url(signature)

    claims = {"iss": "https://firebaseappcheck.googleapis.com/123456789012", "sub": "1:123456789012:ios:abc123",
              "aud": ["projects/123456789012", "projects/demo"], "iat": 1700000000, "exp": 1700003600,
              "jti": "nonce-\u00e9\u00e8"}
    write(d, "token-rs256.jws", token({"alg": "RS256", "kid": "k1", "typ": "JWT"}, claims))
    write(d, "token-hs256.jws", token({"alg": "HS256", "kid": "k1", "typ": "JWT"}, claims, sign=False))
    write(d, "token-none.jws", b64url(b'{"alg":"none"}') + "." + b64url(b'{"sub":"x"}') + ".")
    write(d, "token-four-parts.jws", "eyJhbGciOiJSUzI1NiJ9.e30.QQ.QQ")
    write(d, "token-padded.jws", "eyJhbGciOiJSUzI1NiJ9.e30=.QQ==")
    jwk = {"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": b64url(n), "e": b64url(e)}
    write(d, "jwks-one.json", json.dumps({"keys": [jwk]}))
    write(d, "jwks-mixed.json", json.dumps({"keys": [
        jwk, {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"},
        dict(jwk, kid="enc", use="enc"), dict(jwk, kid="k2", alg="RS512"), {"kty": "RSA", "n": b64url(n), "e": "AQAB"}]},
        indent=1))
    write(d, "jwks-bad-modulus.json", json.dumps({"keys": [dict(jwk, n="AQAB")]}))
    write(d, "json-escapes.json", r'{"a":"\u00e9\ud83d\ude00\n\t\"\\\/","b":[-0.5e+10,0,1E-3,true,false,null],"c":{}}')
    write(d, "json-nested.json", "[[[[[[[[[[{\"k\":[1,2,3]}]]]]]]]]]]")
    write(d, "json-whitespace.json", ' \t\r\n{ "x" : [ 1 , "y" ] }\n')
    write(d, "json-duplicate.json", '{"a":1,"a":2}')
    write(d, "base64url.txt", b64url(bytes(range(64))))
    write(d, "base64url-two.txt", "QQ")


# --- cbor-appattest ------------------------------------------------------------------------------------------------

def cbor_head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)


def cbor(v):
    if isinstance(v, bool):
        return bytes([0xF5 if v else 0xF4])
    if isinstance(v, int):
        return cbor_head(0, v) if v >= 0 else cbor_head(1, -1 - v)
    if isinstance(v, bytes):
        return cbor_head(2, len(v)) + v
    if isinstance(v, str):
        return cbor_head(3, len(v.encode())) + v.encode()
    if isinstance(v, list):
        return cbor_head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict):
        return cbor_head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(v)


def cbor_item_end(data, pos):
    """Offset just past the definite-length item starting at pos (enough to walk App Attest objects)."""
    head = data[pos]
    major, info = head >> 5, head & 31
    pos += 1
    if info < 24:
        n = info
    else:
        size = 1 << (info - 24)
        n = int.from_bytes(data[pos:pos + size], "big")
        pos += size
    if major in (2, 3):
        return pos + n
    if major == 4:
        for _ in range(n):
            pos = cbor_item_end(data, pos)
        return pos
    if major == 5:
        for _ in range(2 * n):
            pos = cbor_item_end(data, pos)
        return pos
    if major == 6:
        return cbor_item_end(data, pos)
    return pos


def bytes_field(data, name):
    """The byte string stored under text key `name` in the top-level map of `data`."""
    key = cbor(name)
    at = data.find(key)
    head = at + len(key)
    end = cbor_item_end(data, head)
    info = data[head] & 31
    start = head + 1 + (0 if info < 24 else 1 << (info - 24))
    return data[start:end]


def cbor_appattest():
    d = target_dir("cbor-appattest")
    auth_datas = []
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests/CBORTests/Vectors/*.json"))):
        vector = json.load(open(path))
        name = os.path.basename(path)[:-5]
        if vector.get("attestation"):
            attestation = base64.b64decode(vector["attestation"])
            write(d, f"attestation-{name}.cbor", attestation)
            auth_data = bytes_field(attestation, "authData")
            write(d, f"authdata-attestation-{name}.bin", auth_data)
            auth_datas.append(auth_data)
        for i, assertion in enumerate(vector.get("assertions", [])):
            raw = base64.b64decode(assertion["assertion"])
            write(d, f"assertion-{name}-{i}.cbor", raw)
            write(d, f"authdata-assertion-{name}-{i}.bin", bytes_field(raw, "authenticatorData"))
    # A slim attestation: real authenticator data, tiny certificates and receipt, so mutations hit structure.
    write(d, "attestation-slim.cbor", cbor({"fmt": "apple-appattest",
                                            "attStmt": {"x5c": [b"\x30\x00", b"\x30\x01\x00"], "receipt": b"r"},
                                            "authData": auth_datas[0]}))
    # Extensions appended to authenticator data that has none yet (the first vector, Apple's sample, already has them).
    write(d, "authdata-with-extensions.bin", auth_datas[1] + cbor(
        {"apple_validation_category_01": b"\x01\x00\x00\x00", "apple_bundle_version_01": "42"}))
    small = {
        "uint": bytes([0x1B]) + b"\xff" * 8, "negative": bytes([0x38, 0x63]), "half-float": bytes([0xF9, 0x7E, 0x00]),
        "tag": bytes([0xC1, 0x1A, 0, 0, 0, 1]), "nested": bytes([0x81] * 15 + [0x00]),
        "map": cbor({"a": [1, -1, b"", "t", True, False]}), "simple": bytes([0xF8, 0x20, 0xF7, 0xF6]),
        "indefinite": bytes([0x9F, 0x01, 0xFF]), "duplicate-key": bytes([0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02]),
    }
    for name, data in small.items():
        write(d, f"item-{name}.cbor", data)


# --- config-yaml ---------------------------------------------------------------------------------------------------

def config_yaml():
    d = target_dir("config-yaml")
    shutil.copy(os.path.join(ROOT, "gateway.yml"), os.path.join(d, "gateway.yml"))
    fixtures = open(os.path.join(ROOT, "Tests/GatewayConfigTests/ConfigFixtures.swift")).read()
    for name, body in re.findall(r'static let (\w+) = """\n(.*?)\n\s*"""', fixtures, re.S):
        write(d, f"fixture-{name}.yml", "\n".join(line[4:] for line in body.split("\n")) + "\n")
    for doc in sorted(glob.glob(os.path.join(ROOT, "docs/*.md"))):
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", open(doc).read(), re.S)):
            write(d, f"docs-{os.path.basename(doc)[:-3]}-{i}.yml", block)
    snippets = {
        "anchors": "version: 1\nlisteners: &l\n  - address: 127.0.0.1:8080\nupstreams: {api: {url: 'http://127.0.0.1:3000'}}\n"
                   "routes:\n  - {match: {path_prefix: /}, upstream: api}\nx: *l\n",
        "flow": "{version: 1, listeners: [{address: '[::1]:8080'}], upstreams: {a: {url: http://h:1/base}}, "
                "routes: [{match: {path_prefix: /}, upstream: a, verify: []}]}\n",
        "bad-types": "version: \"1\"\nlisteners: 3\nlimits: {max_body_bytes: -1KiB, header_timeout: 10x}\n",
        "two-documents": "version: 1\n---\nversion: 1\n",
        "tags-and-block-scalars": "version: !!int 1\nstate: !!map {backend: redis, url: \"redis://u:p@h:6379/2\"}\n"
                                  "limits:\n  max_headers: |\n    100\n",
    }
    for name, text in snippets.items():
        write(d, f"snippet-{name}.yml", text)


# --- dictionaries --------------------------------------------------------------------------------------------------

# The targets whose dictionaries are written (None: all), from the command line.
ONLY = None


def dict_file(name, tokens):
    if ONLY is not None and name not in ONLY:
        return
    d = os.path.join(ROOT, "Tests", "Fuzz", "Dictionaries")
    os.makedirs(d, exist_ok=True)
    escaped = []
    for t in sorted(set(tokens)):
        escaped.append('"' + "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "\\x%02X" % ord(c) for c in t) + '"')
    write(d, f"{name}.dict", "# Generated by Tests/Fuzz/make_seeds.py.\n" + "\n".join(escaped) + "\n")


def dictionaries():
    dict_file("http1-request", [
        "GET ", "HEAD ", "POST ", "OPTIONS ", "CONNECT ", " HTTP/1.1\r\n", " HTTP/1.0\r\n", "HTTP/1.1 200 OK\r\n",
        "HTTP/1.1 100 Continue\r\n", "HTTP/1.0 ", "\r\n", "\r\n\r\n", "\n", ": ", "Host: ", "Content-Length: ",
        "Transfer-Encoding: ", "chunked", "gzip, chunked", "Connection: ", "close", "keep-alive", "upgrade",
        "Expect: ", "100-continue", "0\r\n\r\n", ";ext=", "\t", "http://", "*", "%00", "?", "#"])
    config_words = set(re.findall(r'"([a-z][a-z_0-9]+)"', "".join(
        open(p).read() for p in glob.glob(os.path.join(ROOT, "Sources/GatewayConfig/*.swift")))))
    dict_file("config-yaml", [w + ":" for w in config_words] + list(config_words) + [
        "\n  - ", "\n    ", ": {", "}", "[", "]", "&a ", "*a", "!!str ", "!!int ", "---\n", "...\n", "|\n", ">-\n",
        "'", "\"", "# ", "? ", "<<: ", "127.0.0.1:8080", "[::1]:80", "http://127.0.0.1:3000/base", "10MiB", "32KiB",
        "250ms", "5m", "6h", "24h", "redis://127.0.0.1:6379/0", "~", "null", "true", "0x1F", "1e3",
        # paths:, trusted_proxies and match paths / hosts (the enforcement boundary)
        "10.0.0.0/8", "127.0.0.1/32", "::1/128", "10.0.0.1/8", "/api/", "/api/./x", "//", "%2F", "%61", ";v=1", "?q=1",
        "API.example.com.", "api.example.com.:8443", "64MiB"])
    dict_file("jose", [
        '{"', '":', '"}', "[", "]", "true", "false", "null", "-0.5e+10", "\\u0000", "\\ud83d\\ude00", "\\\"",
        '"alg"', '"RS256"', '"kid"', '"typ"', '"JWT"', '"keys"', '"kty"', '"RSA"', '"use"', '"sig"', '"n"', '"e"',
        '"AQAB"', ".", "eyJ", "QQ", "-_", "=="])
    dict_file("cbor-appattest", [
        "fmt", "apple-appattest", "attStmt", "x5c", "receipt", "authData", "signature", "authenticatorData",
        "apple_validation_category_01", "apple_bundle_version_01", "appattestdevelop", "appattest\x00\x00\x00\x00\x00\x00\x00",
        "\xa5\x01\x02\x03\x26\x20\x01\x21\x58\x20", "\x22\x58\x20", "\x58\x20", "\x59\x01\x00", "\x9f", "\xbf",
        "\xff", "\xf9\x7e\x00", "\xfb", "\xc1", "\x1b\xff\xff\xff\xff\xff\xff\xff\xff"])
    dict_file("http2-session", [
        "\x00\x00\x00\x04\x00\x00\x00\x00\x00", "\x00\x00\x08\x06\x00\x00\x00\x00\x00", "\x00\x00\x04\x03\x00\x00\x00\x00\x01",
        "\x00\x00\x04\x08\x00\x00\x00\x00\x01", "\x01\x05\x00\x00\x00\x01", "\x09\x04\x00\x00\x00\x01", "\x00\x01\x00\x00\x00\x01",
        "\x82\x84\x86", "\x83", "\x41\x0cexample.test", "\x5c\x0210", "\x40\x01a\x01b", "\x3f\xe1\x1f"])
    dict_file("request-target", [
        "/", "//", ".", "..", "/./", "/../", "/.", "/..", "%2e", "%2E", "%2e%2e", "%2f", "%2F", "%5c", "%5C", "\\",
        ";", ";jsessionid=", "..;", ".;", "%3b", "%3B", "%25", "%61", "%41", "%7e", "%7E", "%00", "%0a", "%0D", "%1f",
        "%7F", "%20", "%C3%A9", "%c3%a9", "%", "%4", "%zz", "#", "?", "&", "=", "api", "users"])


def request_target():
    d = target_dir("request-target")
    targets = {
        "root": "/", "plain": "/api/users", "query": "/api/users?a=1&b=%2F&c=../x", "encoded-a": "/%61pi/users",
        "double-slash": "//api/users", "inner-double-slash": "/api//payments/charge", "dot": "/./api/users",
        "dot-dot": "/x/../api/users", "encoded-dot": "/%2e/api/users", "encoded-dot-dot": "/api/%2e%2E/api/users",
        "escaped-slash": "/API%2fusers", "escaped-backslash": "/api%5Cusers", "backslash": "/api\\users",
        "parameter": "/api;x/users", "dot-dot-parameter": "/..;/api/users", "jsessionid": "/api/users;jsessionid=1",
        "nul": "/%00api", "del": "/a%7F", "lf": "/a%0a", "truncated": "/a%4", "not-hex": "/a%zz", "hash": "/a#b",
        "non-ascii": "/%c3%a9", "percent-25": "/%2541", "above-root": "/../api/users", "trailing-dot-dot": "/api/users/..",
        "trailing-dot": "/a/.", "three-dots": "/a/.../b", "well-known": "/.well-known/x", "asterisk": "*",
        "absolute": "http://127.0.0.1/%61pi", "mixed": "/a/./b//../%2E%2e/c;d/%7e?x=/../%2f#",
    }
    for name, text in targets.items():
        write(d, f"{name}.txt", text)


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def http2():
    d = target_dir("http2-session")
    get = bytes([0x82, 0x84, 0x86, 0x41, 12]) + b"example.test"          # GET / http, :authority (HPACK static)
    post = bytes([0x83, 0x84, 0x86, 0x41, 12]) + b"example.test" + bytes([0x5c, 2]) + b"10"   # + content-length: 10
    settings = h2_frame(4, 0, 0, struct.pack(">HI", 3, 100) + struct.pack(">HI", 4, 65535))
    write(d, "settings.bin", settings)
    write(d, "get.bin", settings + h2_frame(1, 0x5, 1, get))
    write(d, "post-with-body.bin", settings + h2_frame(1, 0x4, 1, post) + h2_frame(0, 0, 1, b"01234") + h2_frame(0, 1, 1, b"56789"))
    write(d, "continuation.bin", h2_frame(1, 0x1, 3, get[:3]) + h2_frame(9, 0, 3, get[3:8]) + h2_frame(9, 0x4, 3, get[8:]))
    write(d, "ping-and-ack.bin", h2_frame(6, 0, 0, b"12345678") + h2_frame(4, 1, 0))
    write(d, "reset.bin", h2_frame(1, 0x5, 1, get) + h2_frame(3, 0, 1, struct.pack(">I", 8)))
    write(d, "window-update.bin", h2_frame(8, 0, 0, struct.pack(">I", 1 << 20)) + h2_frame(1, 0x5, 1, get) + h2_frame(8, 0, 1, struct.pack(">I", 100)))
    write(d, "many-streams.bin", b"".join(h2_frame(1, 0x5, 1 + 2 * i, get) for i in range(12)))
    write(d, "trailers.bin", h2_frame(1, 0x4, 1, bytes([0x83, 0x84, 0x86, 0x41, 1]) + b"x") + h2_frame(0, 0, 1, b"abc")
          + h2_frame(1, 0x5, 1, bytes([0x40, 1]) + b"t" + bytes([1]) + b"v"))
    write(d, "priority-goaway.bin", h2_frame(2, 0, 1, struct.pack(">IB", 0, 15)) + h2_frame(7, 0, 0, struct.pack(">II", 0, 0)))


# --- play-integrity ------------------------------------------------------------------------------------------------

# The harness's fixed policies (Sources/FuzzHarness/PlayIntegrityHarness.swift): packages, the allowed signing
# certificate digest (base64url of the bytes 0..31) and the time verdicts are judged at.
PI_STRICT_PACKAGE = "com.example.Kiosk"
PI_PACKAGE = "com.example.app"
PI_DIGEST = b64url(bytes(range(32)))
PI_NOW_MILLIS = 1750000000000


def pi_verdict(package=PI_PACKAGE, timestamp=str(PI_NOW_MILLIS), binding=("nonce", "bm9uY2UtZnJvbS10aGUtc2VydmVy"),
               recognition="PLAY_RECOGNIZED", digests=(PI_DIGEST,), labels=("MEETS_DEVICE_INTEGRITY",), activity="LEVEL_1",
               licensing="LICENSED", play_protect="NO_ISSUES"):
    request = {"requestPackageName": package, "timestampMillis": timestamp}
    if binding:
        request[binding[0]] = binding[1]
    app = {"appRecognitionVerdict": recognition, "packageName": package, "certificateSha256Digest": list(digests),
           "versionCode": "42"}
    device = {"deviceRecognitionVerdict": list(labels)}
    if activity:
        device["recentDeviceActivity"] = {"deviceActivityLevel": activity}
    verdict = {"requestDetails": request, "appIntegrity": app, "deviceIntegrity": device}
    if licensing:
        verdict["accountDetails"] = {"appLicensingVerdict": licensing}
    if play_protect:
        verdict["environmentDetails"] = {"playProtectVerdict": play_protect, "appAccessRiskVerdict": {"appsDetected": []}}
    return verdict


def play_integrity():
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.keywrap import aes_key_wrap

    d = target_dir("play-integrity")
    compact = lambda v: json.dumps(v, separators=(",", ":"))
    verdicts = {
        # Passes the strict policy: every field, the strongest label, padded digest, activity and Play Protect.
        "strict-pass": pi_verdict(PI_STRICT_PACKAGE, digests=(PI_DIGEST + "=",),
                                  labels=("MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY")),
        # Passes the lenient policy: a standard request's requestHash, timestampMillis as a JSON number.
        "standard-request-hash": pi_verdict(timestamp=PI_NOW_MILLIS + 1500, binding=("requestHash", "aGFzaC1vZi10aGUtcmVxdWVzdA"),
                                            activity=None, play_protect=None),
        # UNEVALUATED without certificates (the one case without a digest), basic integrity, no account details.
        "unevaluated-basic": pi_verdict(recognition="UNEVALUATED", digests=(), labels=("MEETS_BASIC_INTEGRITY",),
                                        activity="UNEVALUATED", licensing=None, play_protect="NO_DATA"),
        # Refused by policy: stale, unlicensed, another package's app, no labels, a high activity level.
        "stale": pi_verdict(timestamp=str(PI_NOW_MILLIS - 3600_000)),
        "unlicensed-high-risk": pi_verdict(PI_STRICT_PACKAGE, licensing="UNLICENSED", play_protect="HIGH_RISK", activity="LEVEL_4",
                                           labels=("MEETS_STRONG_INTEGRITY",)),
        "no-labels-unrecognized": pi_verdict(recognition="UNRECOGNIZED_VERSION", labels=(), digests=("other", PI_DIGEST)),
        # Both bindings: a verdict the policy passes (the verifier refuses it when it binds the request).
        "both-bindings": dict(pi_verdict(), requestDetails={"requestPackageName": PI_PACKAGE, "timestampMillis": str(PI_NOW_MILLIS),
                                                            "nonce": "bg", "requestHash": "aA"}),
        # Unreadable as a verdict: a timestamp object, a label that is not a string (and, below, no deviceIntegrity).
        "timestamp-object": pi_verdict(timestamp={"seconds": 1750000000}),
        "label-number": pi_verdict(labels=("MEETS_DEVICE_INTEGRITY", 3)),
    }
    for name, verdict in verdicts.items():
        write(d, f"verdict-{name}.json", compact(verdict))
    write(d, "verdict-pretty.json", json.dumps(pi_verdict(PI_STRICT_PACKAGE, labels=("MEETS_STRONG_INTEGRITY",)), indent=2))
    write(d, "verdict-missing-device.json", compact({k: v for k, v in pi_verdict().items() if k != "deviceIntegrity"}))

    # The JWS a classic verdict travels in (signed by a throwaway key: the harness's own key is made per process),
    # and JWE shapes around it under a throwaway key-encryption key.
    signer = ec.generate_private_key(ec.SECP256R1())

    def jws(payload, header=None):
        signing_input = b64url(compact(header or {"alg": "ES256"}).encode()) + "." + b64url(payload.encode())
        r, s_ = decode_dss_signature(signer.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s_.to_bytes(32, "big"))

    signed = jws(compact(verdicts["strict-pass"]))
    write(d, "jws-es256-verdict.jws", signed)
    write(d, "jws-rs256-verdict.jws", jws(compact(verdicts["standard-request-hash"]), {"alg": "RS256", "kid": "k"}))
    write(d, "jws-crit.jws", jws(compact(verdicts["strict-pass"]), {"alg": "ES256", "crit": ["exp"], "exp": 1}))

    kek = os.urandom(32)

    def jwe(plaintext, header=None, cek_size=32, iv_size=12, tag_size=16):
        header_part = b64url(compact(header or {"alg": "A256KW", "enc": "A256GCM"}).encode())
        cek, iv = os.urandom(cek_size), os.urandom(iv_size)
        sealed = AESGCM(cek).encrypt(iv, plaintext.encode(), header_part.encode()) if cek_size == 32 and iv_size == 12 \
            else os.urandom(len(plaintext) + 16)
        ciphertext, tag = sealed[:-16], sealed[-16:][:tag_size]
        return ".".join([header_part, b64url(aes_key_wrap(kek, cek)), b64url(iv), b64url(ciphertext), b64url(tag)])

    write(d, "jwe-classic-token.jwe", jwe(signed))
    write(d, "jwe-kid-cty.jwe", jwe(signed, {"alg": "A256KW", "enc": "A256GCM", "kid": "play", "cty": "JWT"}))
    write(d, "jwe-zip.jwe", jwe(signed, {"alg": "A256KW", "enc": "A256GCM", "zip": "DEF"}))
    write(d, "jwe-rsa-oaep.jwe", jwe(signed, {"alg": "RSA-OAEP-256", "enc": "A256GCM"}))
    write(d, "jwe-a128gcm.jwe", jwe("x", {"alg": "A256KW", "enc": "A128GCM"}))
    write(d, "jwe-short-tag.jwe", jwe("short", tag_size=12))
    write(d, "jwe-short-key.jwe", jwe("short", cek_size=16))
    write(d, "jwe-four-parts.jwe", jwe("four").rsplit(".", 1)[0])
    write(d, "jwe-empty-parts.jwe", "eyJhbGciOiJBMjU2S1ciLCJlbmMiOiJBMjU2R0NNIn0....")

    dict_file("play-integrity", [
        '{"', '":', '"}', '":{', '":["', '"]', ",", "true", "null", ".", "eyJ", "=",
        '"requestDetails"', '"requestPackageName"', '"timestampMillis"', '"nonce"', '"requestHash"', '"appIntegrity"',
        '"appRecognitionVerdict"', '"packageName"', '"certificateSha256Digest"', '"versionCode"', '"deviceIntegrity"',
        '"deviceRecognitionVerdict"', '"recentDeviceActivity"', '"deviceActivityLevel"', '"accountDetails"',
        '"appLicensingVerdict"', '"environmentDetails"', '"playProtectVerdict"',
        '"PLAY_RECOGNIZED"', '"UNRECOGNIZED_VERSION"', '"UNEVALUATED"', '"MEETS_BASIC_INTEGRITY"', '"MEETS_DEVICE_INTEGRITY"',
        '"MEETS_STRONG_INTEGRITY"', '"MEETS_VIRTUAL_INTEGRITY"', '"LEVEL_1"', '"LEVEL_2"', '"LEVEL_3"', '"LEVEL_4"',
        '"LICENSED"', '"UNLICENSED"', '"NO_ISSUES"', '"NO_DATA"', '"HIGH_RISK"',
        f'"{PI_PACKAGE}"', f'"{PI_STRICT_PACKAGE}"', f'"{PI_DIGEST}"', f'"{PI_NOW_MILLIS}"', str(PI_NOW_MILLIS),
        '"alg"', '"enc"', '"zip"', '"crit"', '"kid"', '"A256KW"', '"A256GCM"', '"ES256"', '"DEF"',
        b64url(b'{"alg":"A256KW","enc":"A256GCM"}'), b64url(b'{"alg":"ES256"}'), b64url(b'{"requestDetails":')])


WRITERS = {
    "http1-request": http1, "jose": jose, "cbor-appattest": cbor_appattest, "config-yaml": config_yaml,
    "http2-session": http2, "request-target": request_target, "play-integrity": play_integrity,
}

if __name__ == "__main__":
    import sys
    names = sys.argv[1:]
    unknown = [n for n in names if n not in WRITERS]
    if unknown:
        sys.exit(f"make_seeds.py: no writer for {' '.join(unknown)} (known: {' '.join(WRITERS)})")
    ONLY = set(names) if names else None
    dictionaries()
    for name in names or WRITERS:
        WRITERS[name]()
