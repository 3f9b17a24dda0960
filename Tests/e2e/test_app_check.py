"""Firebase App Check verification end to end: real gateway, real `attest-gateway-dev issuer` processes (JWKS over
loopback http), a recording upstream. Every rejection also asserts that nothing reached the upstream, every 401
that it carries WWW-Authenticate, and the access log is checked for token leaks at the end of the module."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import (app_check_verifier, assert_json_error, b64url, b64url_decode, free_port, gateway_config, http_get, jwt_encode_segment,
                     jwt_parts, wait_gateway_accepts)

try:  # optional: only for the self-signed tokens (wrong audience, future iat, ...); everything else is stdlib
    from cryptography.hazmat.primitives import hashes as _hashes
    from cryptography.hazmat.primitives.asymmetric import padding as _padding
    from cryptography.hazmat.primitives.asymmetric import rsa as _rsa
except ImportError:  # pragma: no cover
    _rsa = None

H = "X-Firebase-AppCheck"
H2 = "X-Other-AppCheck"
APP = "1:123456789012:ios:0123456789abcdef"
ALLOWED_APP = "1:123456789012:ios:allowed00000001"
OWN_KID = "e2e-own-key"


def _int_b64(n: int) -> str:
    return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))


def _sign_own(key, header: dict, claims: dict) -> str:
    signing_input = jwt_encode_segment(header) + "." + jwt_encode_segment(claims)
    sig = key.sign(signing_input.encode(), _padding.PKCS1v15(), _hashes.SHA256())
    return signing_input + "." + b64url(sig)


# ----------------------------------------------------------------------------------------------------------------
# Module environment: issuer A (the configured project), issuer B (project 999), one gateway with many routes.


@pytest.fixture(scope="module")
def ac(module_factory):
    A = module_factory.dev_issuer()
    B = module_factory.dev_issuer(project_number="999", project_id="other-project",
                                  app_id="1:999:ios:0123456789abcdef")
    up = module_factory.upstream("echo", name="ac")
    own_key = None
    verifiers = {
        "fb": app_check_verifier(A.jwks_url),
        "fb_apps": app_check_verifier(A.jwks_url, app_ids=[ALLOWED_APP]),
        # keys of project 999's issuer, but the verifier is configured for 123456789012: tokens are verifiable
        # (the key is known, as Google's one key set serves every project) and must fail on iss.
        "fb_b": app_check_verifier(B.jwks_url),
        "fb_other": app_check_verifier(A.jwks_url, header=H2),
    }
    routes = [
        {"name": "enforce", "match": {"path_prefix": "/enforce"}, "upstream": "ac", "verify": ["fb"]},
        {"name": "apps", "match": {"path_prefix": "/apps"}, "upstream": "ac", "verify": ["fb_apps"]},
        {"name": "wrongproj", "match": {"path_prefix": "/wrongproj"}, "upstream": "ac", "verify": ["fb_b"]},
        {"name": "monitor", "match": {"path_prefix": "/monitor"}, "upstream": "ac", "verify": ["fb"], "mode": "monitor"},
        {"name": "keep", "match": {"path_prefix": "/keep"}, "upstream": "ac", "verify": ["fb"],
         "strip_token_headers": False},
        {"name": "all", "match": {"path_prefix": "/all"}, "upstream": "ac", "verify": ["fb", "fb_other"],
         "require_all": True},
        {"name": "any", "match": {"path_prefix": "/any"}, "upstream": "ac", "verify": ["fb", "fb_other"],
         "require_all": False},
        {"name": "limited", "match": {"path_prefix": "/limited"}, "upstream": "ac", "verify": ["fb"],
         "limited_use": True},
        {"name": "open", "match": {"path_prefix": "/open"}, "upstream": "ac", "verify": []},
    ]
    if _rsa is not None:
        own_key = _rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = own_key.public_key().public_numbers()
        jwks = {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": OWN_KID, "n": _int_b64(pub.n),
                          "e": _int_b64(pub.e)}]}
        path = module_factory.tmp / "own-jwks.json"
        path.write_text(json.dumps(jwks))
        verifiers["fb_file"] = {"type": "app_check", "project_number": "123456789012", "project_id": "demo-project",
                                "jwks_file": str(path), "clock_skew": "60s"}
        routes.insert(0, {"name": "file", "match": {"path_prefix": "/file"}, "upstream": "ac", "verify": ["fb_file"]})
    port = free_port()
    gw = module_factory.gateway(gateway_config(port, {"ac": up.url}, routes=routes, verifiers=verifiers))
    good = A.token()
    wait_gateway_accepts(gw.port, "/enforce/ready", H, good)
    return SimpleNamespace(gw=gw, up=up, A=A, B=B, good=good, own_key=own_key, used_tokens=[good])


def _send(ac, path: str, headers=()) -> U.Resp:
    for _, v in headers:
        if v.count(".") == 2:
            ac.used_tokens.append(v.strip())
    r = U.one_shot(ac.gw.port, http_get(path, list(headers)))
    assert r is not None, "gateway closed the connection without a response"
    return r


def reject(ac, path: str, headers, status: int, reason: str) -> dict:
    """Asserts the exact rejection and that the upstream received nothing at all."""
    before = ac.up.snapshot()
    r = _send(ac, path, headers)
    doc = assert_json_error(r, status)
    error = {403: "forbidden", 503: "unavailable"}.get(status, "unauthorized")   # PROTOCOL.md: error by status
    assert doc == {"error": error, "reason": reason}, f"expected {status} {reason}, got {r.status} {doc}"
    if status == 401:
        assert r.get("www-authenticate") == [f'AppCheck realm="attest-gateway", error="{reason}"'], r.headers
    time.sleep(0.02)
    after = ac.up.snapshot()
    assert (after[0], after[2]) == (before[0], before[2]), f"rejected request ({reason}) reached the upstream"
    return doc


def forwarded(ac, path: str, headers) -> U.Req:
    """Asserts 200 from the upstream and returns what the upstream received for exactly this target."""
    r = _send(ac, path, headers)
    assert r.status == 200, f"expected 200, got {r.status} {r.body[:300]!r}"
    assert r.one("x-upstream") == "ac"
    with ac.up.lock:
        got = [q for q in ac.up.requests if q.target == path]
    assert len(got) == 1, f"upstream saw {len(got)} requests for {path}"
    return got[0]


def assert_verified(req: U.Req, verifier: str = "fb", app: str = APP, token_headers=(H, H2)) -> None:
    assert req.get("x-attest-verdict") == ["verified"], req.headers
    assert req.get("x-attest-verifier") == [verifier], req.headers
    assert req.get("x-attest-app-id") == [app], req.headers
    assert req.get("x-attest-reason") == [], req.headers
    for h in token_headers:
        assert req.get(h) == [], f"token header {h} reached the upstream"


def _uniq(prefix: str) -> str:
    _uniq.n = getattr(_uniq, "n", 0) + 1
    return f"{prefix}/{_uniq.n}"


# ----------------------------------------------------------------------------------------------------------------
# 1. Accept / reject


def test_valid_token_forwarded_with_verdict_and_without_token(ac):
    req = forwarded(ac, "/enforce/valid", [(H, ac.good)])
    assert_verified(req)
    # OWS around the value is trimmed
    req = forwarded(ac, "/enforce/valid-ows", [(H, "  " + ac.A.token() + "\t")])
    assert_verified(req)


def test_missing_token(ac):
    reject(ac, "/enforce/missing", [], 401, "missing_token")


# What Firebase SDKs send when the device could not attest: base64 of {"error":"UNKNOWN_ERROR"}. Refused like any
# invalid token, under its own reason (PROTOCOL.md Additions), in every base64 spelling an SDK might use.
PLACEHOLDER = "eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ=="


@pytest.mark.parametrize("token", [PLACEHOLDER, PLACEHOLDER.rstrip("="),
                                   __import__("base64").b64encode(b'{"error":"DEVICE_CHECK_FAILED"}').decode()])
def test_sdk_placeholder_token_is_client_attestation_failed(ac, token):
    reject(ac, "/enforce/placeholder", [(H, token)], 401, "client_attestation_failed")


@pytest.mark.parametrize("near", [
    __import__("base64").b64encode(b'{"error":"unknown"}').decode(),            # not an SDK error name
    __import__("base64").b64encode(b'{"error":"UNKNOWN_ERROR","x":1}').decode(),  # more than the placeholder
    __import__("base64").b64encode(b' {"error":"UNKNOWN_ERROR"}').decode(),
    PLACEHOLDER + "=",                                                         # padding too long
    PLACEHOLDER[:-2] + "==" + "AA",                                            # padding in the middle
])
def test_near_placeholders_are_malformed_tokens(ac, near):
    reject(ac, "/enforce/near-placeholder", [(H, near)], 401, "malformed_token")


def test_placeholder_on_monitor_route_is_forwarded_unverified(ac):
    req = forwarded(ac, "/monitor/placeholder", [(H, PLACEHOLDER)])
    assert req.one("x-attest-verdict") != "verified"


def test_expired_token(ac):
    reject(ac, "/enforce/expired", [(H, ac.A.token(expired=True))], 401, "expired")


def test_forged_signature_from_other_key_same_kid(ac):
    good = ac.A.token()
    h, p, _ = good.split(".")
    other_sig = ac.B.token().split(".")[2]
    reject(ac, "/enforce/forged-splice", [(H, f"{h}.{p}.{other_sig}")], 401, "bad_signature")


def test_signature_of_another_token_same_key(ac):
    """A genuine signature by the right key, but over a different payload."""
    t1, t2 = ac.A.token(), ac.A.token(app_id="1:123456789012:ios:fffffffffffffff0")
    h, p, _ = t2.split(".")
    reject(ac, "/enforce/forged-swap", [(H, f"{h}.{p}.{t1.split('.')[2]}")], 401, "bad_signature")


def test_forged_signature_own_key_with_known_kid(ac):
    if ac.own_key is None:
        pytest.skip("cryptography not importable")
    header, claims, _ = jwt_parts(ac.A.token())
    forged = _sign_own(ac.own_key, header, claims)          # kid is issuer A's: known key, wrong signature
    reject(ac, "/enforce/forged-own", [(H, forged)], 401, "bad_signature")


@pytest.mark.parametrize("alg", ["none", "None", "NONE"])
def test_alg_none_junk_signature(ac, alg):
    header, claims, _ = jwt_parts(ac.A.token())
    t = jwt_encode_segment({"alg": alg, "typ": "JWT", "kid": header["kid"]}) + "." + jwt_encode_segment(claims)
    reject(ac, "/enforce/none-junk", [(H, t + "." + b64url(b"junk-signature"))], 401, "unsupported_algorithm")


def test_alg_none_empty_signature(ac):
    header, claims, _ = jwt_parts(ac.A.token())
    t = jwt_encode_segment({"alg": "none", "typ": "JWT", "kid": header["kid"]}) + "." + jwt_encode_segment(claims) + "."
    before = ac.up.snapshot()
    r = _send(ac, "/enforce/none-empty", [(H, t)])
    doc = assert_json_error(r, 401)
    # The brief allows an empty signature segment to be either; it must never pass.
    assert doc["reason"] in ("unsupported_algorithm", "malformed_token"), doc
    assert ac.up.snapshot()[2] == before[2]


def test_hs256_with_public_key_as_secret(ac):
    header, claims, _ = jwt_parts(ac.A.token())
    jwk = next(k for k in ac.A.jwks()["keys"] if k["kid"] == header["kid"])
    signing_input = jwt_encode_segment({"alg": "HS256", "typ": "JWT", "kid": header["kid"]}) + "." + \
        jwt_encode_segment(claims)
    for secret in (jwk["n"].encode(), b64url_decode(jwk["n"])):
        sig = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        reject(ac, "/enforce/hs256", [(H, signing_input + "." + b64url(sig))], 401, "unsupported_algorithm")


def test_wrong_project_issuer(ac):
    # B's key is known to fb_b (wait until the set is loaded: its first requests may be 503)
    t = ac.B.token()
    deadline = time.monotonic() + 10
    while True:
        r = _send(ac, "/wrongproj/poll", [(H, t)])
        if r.status != 503 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    reject(ac, "/wrongproj/x", [(H, t)], 401, "wrong_issuer")
    # the same project-999 token against A's key set: its kid is unknown there
    reject(ac, "/enforce/other-project", [(H, t)], 401, "unknown_key")


def test_app_ids_allow_list(ac):
    reject(ac, "/apps/default", [(H, ac.A.token())], 403, "app_not_allowed")
    req = forwarded(ac, "/apps/allowed", [(H, ac.A.token(app_id=ALLOWED_APP))])
    assert_verified(req, verifier="fb_apps", app=ALLOWED_APP)


@pytest.mark.parametrize("names", [(H, H), (H, H.lower()), (H.upper(), H)])
def test_repeated_token_header(ac, names):
    t = ac.A.token()
    reject(ac, "/enforce/repeated", [(names[0], t), (names[1], t)], 401, "malformed_token")


def _malformed_cases(good: str) -> dict:
    h, p, s = good.split(".")
    return {
        "empty": "",
        "two_parts": f"{h}.{p}",
        "four_parts": f"{h}.{p}.{s}.{s}",
        "padding": f"{h}.{p}.{s}==" if len(s) % 4 else f"{h}.{p}=.{s}",
        "std_alphabet": f"{h}.{p}.{s.replace('-', '+').replace('_', '/')}" if ("-" in s or "_" in s) else f"{h}.{p}.{s}+",
        "junk_char": f"{h}.{p}.{s[:-1]}*",
        "header_not_json": f"{b64url(b'not json')}.{p}.{s}",
        "oversize": f"{h}.{p}.{s}" + "A" * (8 * 1024),
    }


@pytest.mark.parametrize("case", ["empty", "two_parts", "four_parts", "padding", "std_alphabet", "junk_char",
                                  "header_not_json", "oversize"])
def test_malformed_tokens(ac, case):
    t = _malformed_cases(ac.A.token())[case]
    reject(ac, f"/enforce/malformed-{case}", [(H, t)], 401, "malformed_token")


def test_self_signed_claim_checks(ac):
    """Checks the dev issuer cannot produce: audience, future iat/nbf, typ, skew (own key in a jwks_file)."""
    if ac.own_key is None:
        pytest.skip("cryptography not importable")
    now = int(time.time())
    hdr = {"alg": "RS256", "typ": "JWT", "kid": OWN_KID}
    base = {"sub": APP, "aud": ["projects/123456789012", "projects/demo-project"],
            "iss": "https://firebaseappcheck.googleapis.com/123456789012", "exp": now + 600, "iat": now}

    def tok(header=hdr, **claims):
        c = dict(base)
        c.update(claims)
        return _sign_own(ac.own_key, header, {k: v for k, v in c.items() if v is not None})

    req = forwarded(ac, "/file/ok", [(H, tok())])
    assert_verified(req, verifier="fb_file")
    assert_verified(forwarded(ac, "/file/aud-id", [(H, tok(aud=["projects/demo-project"]))]), verifier="fb_file")
    assert_verified(forwarded(ac, "/file/exp-in-skew", [(H, tok(exp=now - 20))]), verifier="fb_file")
    reject(ac, "/file/aud", [(H, tok(aud=["projects/999"]))], 403, "wrong_audience")
    reject(ac, "/file/aud-string", [(H, tok(aud="projects/123456789012"))], 403, "wrong_audience")
    reject(ac, "/file/iss", [(H, tok(iss="https://firebaseappcheck.googleapis.com/999"))], 401, "wrong_issuer")
    reject(ac, "/file/exp", [(H, tok(exp=now - 300))], 401, "expired")
    reject(ac, "/file/iat", [(H, tok(iat=now + 600))], 401, "not_yet_valid")
    reject(ac, "/file/nbf", [(H, tok(nbf=now + 600))], 401, "not_yet_valid")
    reject(ac, "/file/typ", [(H, tok(header={"alg": "RS256", "typ": "JOSE", "kid": OWN_KID}))], 401, "malformed_token")
    reject(ac, "/file/notyp", [(H, tok(header={"alg": "RS256", "kid": OWN_KID}))], 401, "malformed_token")
    reject(ac, "/file/unknown-kid", [(H, tok(header={"alg": "RS256", "typ": "JWT", "kid": "nope"}))], 401, "unknown_key")


# ----------------------------------------------------------------------------------------------------------------
# 2. Client-sent X-Attest-* never reaches the upstream as trusted


def test_client_sent_verdict_no_token_enforce(ac):
    reject(ac, "/enforce/spoof", [("X-Attest-Verdict", "verified"), ("X-Attest-App-Id", "evil")], 401, "missing_token")


def test_client_sent_verdict_monitor_bad_token(ac):
    good = ac.A.token()
    h, p, s = good.split(".")
    bad = f"{h}.{p}.{ac.B.token().split('.')[2]}"
    req = forwarded(ac, "/monitor/spoof-bad", [("X-Attest-Verdict", "verified"), ("x-attest-verdict", "verified"),
                                              ("X-Attest-App-Id", "evil"), ("X-Attest-Reason", "none"), (H, bad)])
    assert req.get("x-attest-verdict") == ["failed"], req.headers
    assert req.get("x-attest-reason") == ["bad_signature"], req.headers
    assert "evil" not in req.get("x-attest-app-id"), req.headers
    req = forwarded(ac, "/monitor/spoof-none", [("X-Attest-Verdict", "verified"), ("X-Attest-Verifier", "fb")])
    assert req.get("x-attest-verdict") == ["absent"], req.headers
    assert req.get("x-attest-reason") == ["missing_token"], req.headers
    # valid token: the gateway's own values only
    req = forwarded(ac, "/enforce/spoof-good", [("X-Attest-App-Id", "evil"), ("X-Attest-Reason", "x"), (H, good)])
    assert_verified(req)


# ----------------------------------------------------------------------------------------------------------------
# 7. / 8. / 9. / 10. Route options


def test_monitor_mode(ac):
    expired = ac.A.token(expired=True)
    req = forwarded(ac, "/monitor/expired", [(H, expired)])
    assert req.get("x-attest-verdict") == ["failed"], req.headers
    assert req.get("x-attest-reason") == ["expired"], req.headers
    assert req.get("x-attest-verifier") == ["fb"], req.headers
    assert req.get(H) == [], "token header reached the upstream in monitor mode (strip_token_headers defaults to true)"
    req = forwarded(ac, "/monitor/absent", [])
    assert req.get("x-attest-verdict") == ["absent"], req.headers
    assert req.get("x-attest-reason") == ["missing_token"], req.headers
    assert_verified(forwarded(ac, "/monitor/valid", [(H, ac.A.token())]))


def test_strip_token_headers_false(ac):
    t = ac.A.token()
    req = forwarded(ac, "/keep/x", [(H, t)])
    assert req.get(H) == [t], req.headers
    assert req.get("x-attest-verdict") == ["verified"]


def test_require_all(ac):
    t1, t2 = ac.A.token(), ac.A.token(app_id=ALLOWED_APP)
    req = forwarded(ac, "/all/both", [(H, t1), (H2, t2)])
    assert req.get("x-attest-verdict") == ["verified"], req.headers
    assert req.get(H) == [] and req.get(H2) == [], "token headers reached the upstream"
    reject(ac, "/all/first-only", [(H, t1)], 401, "missing_token")
    reject(ac, "/all/second-only", [(H2, t2)], 401, "missing_token")
    reject(ac, "/all/second-expired", [(H, t1), (H2, ac.A.token(expired=True))], 401, "expired")
    reject(ac, "/all/first-expired", [(H, ac.A.token(expired=True)), (H2, t2)], 401, "expired")


def test_any_of(ac):
    t1, t2 = ac.A.token(), ac.A.token(app_id=ALLOWED_APP)
    assert_verified(forwarded(ac, "/any/first", [(H, t1)]), verifier="fb")
    assert_verified(forwarded(ac, "/any/second", [(H2, t2)]), verifier="fb_other", app=ALLOWED_APP)
    assert_verified(forwarded(ac, "/any/second-after-bad-first", [(H, ac.A.token(expired=True)), (H2, t2)]),
                    verifier="fb_other", app=ALLOWED_APP)
    before = ac.up.snapshot()
    r = _send(ac, "/any/neither", [])
    assert_json_error(r, 401)
    assert ac.up.snapshot()[2] == before[2]


def test_limited_use_route_accepts_each_token_once(ac):
    # The gateway's state here is the memory backend (the module config); test_limited_use.py covers SQLite and
    # Redis, concurrency and restarts.
    token = ac.A.token(limited_use=True)
    before = ac.up.snapshot()
    r = _send(ac, "/limited/first", [(H, token)])
    assert r.status == 200, f"first use: {r.status} {r.body[:200]!r}"
    assert ac.up.snapshot()[2] == before[2] + 1
    reject(ac, "/limited/again", [(H, token)], 401, "token_replayed")
    reject(ac, "/limited/plain", [(H, ac.A.token())], 401, "missing_jti")
    reject(ac, "/limited/none", [], 401, "missing_token")


# ----------------------------------------------------------------------------------------------------------------
# 6. Concurrency


@pytest.mark.timeout_s(60)
def test_concurrent_keepalive_clients(ac):
    tokens = [ac.A.token(app_id=f"1:123456789012:ios:load{i:012d}") for i in range(4)] + [ac.A.token()]
    ac.used_tokens.extend(tokens)
    before = ac.up.snapshot()[2]
    results: list[tuple[int, int]] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        ok = 0
        try:
            with U.Conn(ac.gw.port, timeout=20) as c:
                for j in range(20):
                    r = c.request(http_get(f"/enforce/load/{i}/{j}", [(H, tokens[(i + j) % len(tokens)])]))
                    if r is None or r.status != 200:
                        with lock:
                            errors.append(f"client {i} req {j}: {r and r.status} {r and r.body[:100]!r}")
                        return
                    ok += 1
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")
        with lock:
            results.append((i, ok))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=40)
    assert not errors, errors[:5]
    assert sum(ok for _, ok in results) == 1000
    assert ac.up.wait_requests(before + 1000, 5)
    time.sleep(0.1)
    with ac.up.lock:
        got = [q for q in ac.up.requests if q.target.startswith("/enforce/load/")]
    assert len(got) == 1000, f"upstream saw {len(got)} load requests, expected exactly 1000"
    assert ac.up.snapshot()[2] == before + 1000
    for q in got:
        assert q.get("x-attest-verdict") == ["verified"] and q.get(H) == [], q.headers
        i, j = (int(x) for x in q.target.split("/")[3:5])
        want = jwt_parts(tokens[(i + j) % len(tokens)])[1]["sub"]
        assert q.get("x-attest-app-id") == [want], f"{q.target}: app id {q.get('x-attest-app-id')} != {want}"


# ----------------------------------------------------------------------------------------------------------------
# 11. Access log (runs last in the module: every token used above must be absent)


def _wait_log(gw, path: str, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        lines = [l for l in gw.log_lines() if l.get("path") == path]
        if lines or time.monotonic() > deadline:
            assert lines, f"no access log line for {path}"
            return lines[-1]
        time.sleep(0.05)


def test_access_log_verdicts_and_no_tokens(ac):
    gw = ac.gw
    forwarded(ac, "/enforce/log-ok", [(H, ac.A.token())])
    reject(ac, "/enforce/log-expired", [(H, ac.A.token(expired=True))], 401, "expired")
    reject(ac, "/enforce/log-missing", [], 401, "missing_token")
    forwarded(ac, "/monitor/log-failed", [(H, ac.A.token(expired=True))])
    forwarded(ac, "/open/log-none", [])
    ok = _wait_log(gw, "/enforce/log-ok")
    assert ok.get("verdict") == "verified" and "reason" not in ok, ok
    line = _wait_log(gw, "/enforce/log-expired")
    assert (line.get("verdict"), line.get("reason"), line.get("status")) == ("failed", "expired", 401), line
    line = _wait_log(gw, "/enforce/log-missing")
    assert (line.get("verdict"), line.get("reason"), line.get("status")) == ("absent", "missing_token", 401), line
    line = _wait_log(gw, "/monitor/log-failed")
    assert (line.get("verdict"), line.get("reason"), line.get("status")) == ("failed", "expired", 200), line
    line = _wait_log(gw, "/open/log-none")
    assert line.get("verdict") == "none" and "reason" not in line, line

    out, err = gw.stdout(), gw.stderr()
    leaks = []
    for t in set(ac.used_tokens):
        parts = t.split(".")
        for seg in parts[1:3]:
            if len(seg) >= 16 and (seg in out or seg in err):
                leaks.append(seg[:24] + "...")
    assert not leaks, f"token parts found in the gateway's output: {leaks[:5]}"


# ----------------------------------------------------------------------------------------------------------------
# 3. / 4. / 5. Key set lifecycle (own gateway and issuer each)


def _lifecycle_gateway(start_gateway, upstream, jwks_url: str):
    port = free_port()
    cfg = gateway_config(port, {"lc": upstream.url}, verifiers={"fb": app_check_verifier(jwks_url)}, routes=[
        {"name": "lc", "match": {"path_prefix": "/"}, "upstream": "lc", "verify": ["fb"]}])
    return start_gateway(cfg)


def _status(gw, path, token) -> tuple[int, str | None]:
    r = U.one_shot(gw.port, http_get(path, [(H, token)]))
    assert r is not None
    reason = None
    if r.status != 200:
        doc = assert_json_error(r, r.status)
        reason = doc["reason"]
    return r.status, reason


@pytest.mark.timeout_s(40)
def test_key_rotation_with_retire(start_gateway, start_upstream, start_dev_issuer):
    iss = start_dev_issuer()
    up = start_upstream("echo", name="lc")
    gw = _lifecycle_gateway(start_gateway, up, iss.jwks_url)
    old = iss.token()
    wait_gateway_accepts(gw.port, "/ready", H, old)
    new_kid = iss.rotate(retire=True)
    new = iss.token()
    assert jwt_parts(new)[0]["kid"] == new_kid
    n0 = up.snapshot()[2]
    first = _status(gw, "/rot/0", new)
    assert first in ((401, "unknown_key"), (200, None)), f"first request with the new key: {first}"
    seen = [first]
    deadline = time.monotonic() + 8
    t0 = time.monotonic()
    while seen[-1] != (200, None):
        assert time.monotonic() < deadline, f"new key never accepted within 8 s: {seen[-5:]}"
        time.sleep(0.1)
        seen.append(_status(gw, f"/rot/{len(seen)}", new))
        assert seen[-1] in ((401, "unknown_key"), (200, None)), seen[-1]
    print(f"new key accepted after {time.monotonic() - t0:.2f}s, {len(seen)} requests")
    assert up.snapshot()[2] == n0 + 1, "only the accepted request may reach the upstream"
    # the retired key left the set: a token it signed (verified and cached before) is no longer accepted
    assert _status(gw, "/rot/old", old) == (401, "unknown_key")
    assert up.snapshot()[2] == n0 + 1


@pytest.mark.timeout_s(40)
def test_jwks_outage_keeps_cached_keys_and_fails_closed(start_gateway, start_upstream, start_dev_issuer):
    iss = start_dev_issuer()
    foreign = start_dev_issuer()
    up = start_upstream("echo", name="lc")
    gw = _lifecycle_gateway(start_gateway, up, iss.jwks_url)
    seen_before = iss.token()
    wait_gateway_accepts(gw.port, "/ready", H, seen_before)
    fresh = iss.token()                # minted before the kill, never shown to the gateway
    stranger = foreign.token()         # a kid the gateway never saw
    iss.kill()
    assert iss.proc.poll() is not None
    n0 = up.snapshot()[2]
    assert _status(gw, "/out/1", seen_before) == (200, None)
    assert _status(gw, "/out/2", fresh) == (200, None)
    assert _status(gw, "/out/3", stranger) == (401, "unknown_key")   # triggers a refresh that fails
    time.sleep(1.0)
    assert _status(gw, "/out/4", stranger) == (401, "unknown_key")
    assert _status(gw, "/out/6", fresh) == (200, None)
    assert _status(gw, "/out/7", seen_before) == (200, None)
    assert up.snapshot()[2] == n0 + 4, "exactly the four accepted requests reach the upstream"


@pytest.mark.timeout_s(30)
def test_issuer_down_from_start_is_503(start_gateway, start_upstream, start_dev_issuer):
    other = start_dev_issuer()              # only to have valid-looking tokens
    up = start_upstream("echo", name="lc")
    dead_port = free_port()                 # nothing listens there
    gw = _lifecycle_gateway(start_gateway, up, f"http://127.0.0.1:{dead_port}/jwks")
    tok = other.token()
    for i in range(4):
        r = U.one_shot(gw.port, http_get(f"/down/{i}", [(H, tok)]))
        doc = assert_json_error(r, 503)
        assert doc == {"error": "unavailable", "reason": "jwks_unavailable"}, doc
        time.sleep(0.3)
    assert up.snapshot()[2] == 0, "a request reached the upstream without a key set"
    assert gw.proc.poll() is None
