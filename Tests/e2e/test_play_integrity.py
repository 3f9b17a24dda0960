"""Google Play Integrity (`type: play_integrity`) end to end: the real gateway, a recording upstream, a local HTTPS
stand-in for Google's OAuth token endpoint and `decodeIntegrityToken` (google_fakes.py; test CA via `ca_file`,
`api_base_url`, the account file's `token_uri` / `token_url`), classic tokens minted with `cryptography`
(play_tokens.py) under developer-managed keys written as Play Console gives them.

Covers: standard tokens (decoded by the stand-in) and classic tokens (decoded locally) passing with the verdict
headers and without the credential headers; every certificate_sha256 spelling; the policy and its order; freshness
of `timestampMillis` (to the millisecond) and of `X-Play-Integrity-Timestamp`, `max_skew`; the request hash over
method, target as sent, timestamp and (also chunked) body; `binding: nonce` with challenges redeemed once; limited
use (also across two gateways on one Redis) and `replay_window`; JWE / JWS failures and which tokens go to Google;
Google down, retries (429 / 5xx / transport / timeout), the verdict cache (its binding and expiry) and the access
token's reuse, `token_url` and renewal after a 401; `require_licensed`, `play_protect`, `max_device_activity`, a
custom header, `min_device_integrity`, `app_recognition`; monitor mode; `WWW-Authenticate`; the Android registration
endpoints; `check-config` (and `serve`) on a decryption key file that is not 32 bytes and on a bad service account.

Every target is unique, so what the upstream received for it is exact; a rejected request must not reach it."""

from __future__ import annotations

import itertools
import json
import re
import secrets
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from apple_fakes import make_tls
from google_fakes import FakeGoogle, write_service_account
from harness import assert_json_error, free_port, gateway_config, run_cli
from play_tokens import (APP_CERT_DIGEST, PACKAGE, ClassicKeys, b64url, cert_digest, cert_hex, challenge_hash,
                         jws_der_signature, jws_es256, mint_classic, request_hash, tamper, verdict,
                         write_decryption_key_file)

H = "X-Play-Integrity"
TS = "X-Play-Integrity-Timestamp"
REG = "/.attest/android"
REG_NONCE = "/.attest/android-nonce"
SECOND_CERT = b"attest-gateway e2e: the app's second signing certificate (configured as hex)"
THIRD_CERT = b"attest-gateway e2e: the app's third signing certificate (configured as bare lower-case hex)"
OTHER_CERT = b"attest-gateway e2e: somebody else's signing certificate"
ERROR_BY_STATUS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 503: "unavailable"}
_counter = itertools.count(1)


# ----------------------------------------------------------------------------------------------------------------
# The module's gateway


def classic_verifier(dec, ver, **extra) -> dict:
    v = {"type": "play_integrity", "package_name": PACKAGE,
         "certificate_sha256": [APP_CERT_DIGEST, cert_hex(SECOND_CERT), cert_hex(THIRD_CERT, colons=False).lower()],
         "decryption_key_file": str(dec), "verification_key_file": str(ver)}
    v.update(extra)
    return v


def google_keys(google: FakeGoogle, account, tls) -> dict:
    return {"service_account_file": str(account.path), "api_base_url": google.url, "ca_file": str(tls.ca),
            "timeout": "2s"}


@pytest.fixture(scope="module")
def env(module_factory):
    tmp = module_factory.tmp
    tls = make_tls(tmp / "tls")
    google = FakeGoogle(tls, PACKAGE)
    module_factory.items.append(google)
    sa = write_service_account(tmp / "secrets" / "play-sa.json", token_uri=google.url + "/token")
    sa_nonce = write_service_account(tmp / "secrets" / "play-sa-nonce.json", token_uri=google.url + "/token",
                                     client_email="nonce-binding@test-project.iam.gserviceaccount.com")
    sa_g = write_service_account(tmp / "secrets" / "play-sa-g.json", token_uri=google.url + "/token",
                                 client_email="google-only@test-project.iam.gserviceaccount.com")
    for account in (sa, sa_nonce, sa_g):
        google.trust(account)
    keys = ClassicKeys()
    dec, ver = keys.write(tmp / "secrets")
    up = module_factory.upstream(name="pi-up")
    g = google_keys(google, sa, tls)
    verifiers = {
        # The registration endpoints' default limit (10/s, burst 20 per client) is test_rate_limits.py's subject;
        # this module registers far more than 20 times from 127.0.0.1.
        "android": classic_verifier(dec, ver, **g, registration_path=REG, registration_rate_limit={"rate": 0}),
        "android_nonce": classic_verifier(dec, ver, **dict(g, service_account_file=str(sa_nonce.path)),
                                          binding="nonce", registration_path=REG_NONCE, registration_rate_limit={"rate": 0}),
        "android_tu": classic_verifier(dec, ver, **g, token_url=google.url + "/oauth2/token"),
        "android_lic": classic_verifier(dec, ver, require_licensed=True),
        "android_pp": classic_verifier(dec, ver, play_protect=["NO_ISSUES", "NO_DATA"], min_device_integrity="MEETS_BASIC_INTEGRITY"),
        "android_rw": classic_verifier(dec, ver, replay_window="2s"),
        # Google only (no classic keys), a short timeout.
        "android_g": {"type": "play_integrity", "package_name": PACKAGE, "certificate_sha256": [APP_CERT_DIGEST],
                      **dict(g, service_account_file=str(sa_g.path), timeout="700ms")},
        "android_act": classic_verifier(dec, ver, max_device_activity="LEVEL_2", max_skew="60s"),
        "android_strong": classic_verifier(dec, ver, header="X-Integrity-Token", min_device_integrity="MEETS_STRONG_INTEGRITY",
                                           app_recognition=["PLAY_RECOGNIZED", "UNRECOGNIZED_VERSION"]),
    }
    routes = [{"name": name, "match": {"path_prefix": prefix}, "upstream": "up", "verify": [verifier], **extra}
              for name, prefix, verifier, extra in [
                  ("std", "/std/", "android", {}),
                  ("lu", "/lu/", "android", {"limited_use": True}),
                  ("mon", "/mon/", "android", {"mode": "monitor"}),
                  ("nonce", "/nonce/", "android_nonce", {}),
                  ("tu", "/tu/", "android_tu", {}),
                  ("lic", "/lic/", "android_lic", {}),
                  ("pp", "/pp/", "android_pp", {}),
                  ("act", "/act/", "android_act", {}),
                  ("strong", "/strong/", "android_strong", {}),
                  ("rw", "/rw/", "android_rw", {"limited_use": True}),
                  ("g", "/g/", "android_g", {}),
              ]]
    port = free_port()
    gw = module_factory.gateway(gateway_config(port, {"up": up.url}, routes=routes, verifiers=verifiers))
    return SimpleNamespace(gw=gw, up=up, google=google, sa=sa, sa_nonce=sa_nonce, keys=keys, tls=tls, dec=dec, ver=ver)


# ----------------------------------------------------------------------------------------------------------------
# Helpers


def unique(prefix: str, query: str = "?q=1") -> str:
    return f"{prefix}r{next(_counter)}-{secrets.token_hex(3)}{query}"


def outcome(r: U.Resp | None, challenge: bool = True) -> tuple:
    """(status, reason), reason None for 2xx. For every error: the JSON shape, `error` named by the status, and on a
    401 of a route (challenge=True) `WWW-Authenticate: PlayIntegrity …, error="<reason>"`."""
    assert r is not None, "the gateway closed the connection without a response"
    if r.status in (200, 201):
        return (r.status, None)
    doc = assert_json_error(r, r.status)
    reason = doc["reason"]
    if doc["error"] != ERROR_BY_STATUS.get(r.status, doc["error"]):
        return (r.status, f"error={doc['error']}/{reason}")
    if r.status == 401 and challenge:
        www = r.get("www-authenticate")
        ok = len(www) == 1 and www[0].split(" ", 1)[0] == "PlayIntegrity" and f'error="{reason}"' in www[0]
        if not ok:
            return (r.status, f"www-authenticate={www}/{reason}")
    return (r.status, reason)


def forwarded(env, target: str) -> list:
    with env.up.lock:
        return [q for q in env.up.requests if q.target == target]


def raw_request(method: str, target: str, headers: list, body: bytes = b"", chunked: bool = False) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: gw.test", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + U.chunk_encode(body, 7)
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def send(env, target: str, token: str | None, ts=None, method: str = "GET", body: bytes = b"", header: str = H,
         extra: list = (), port: int | None = None, upstream_target: str | None = None,
         chunked: bool = False) -> SimpleNamespace:
    """One request; the result has status, reason, resp and what the upstream received for this (unique) target
    (`upstream_target`: the canonical target when it was sent in another spelling). A rejection must not reach it."""
    headers = []
    if token is not None:
        headers.append((header, token))
    if ts is not None:
        headers.append((TS, str(ts)))
    headers += list(extra)
    before = len(forwarded(env, upstream_target or target))
    r = U.one_shot(port or env.gw.port, raw_request(method, target, headers, body, chunked), timeout=20)
    status, reason = outcome(r)
    seen = forwarded(env, upstream_target or target)
    if status != 200:
        assert len(seen) == before, f"a rejected request ({status} {reason}) reached the upstream"
    return SimpleNamespace(status=status, reason=reason, result=(status, reason), resp=r, target=target, seen=seen)


def mint(env, form: str, value: str, keys: ClassicKeys | None = None, google: FakeGoogle | None = None, **vkw) -> str:
    """A classic token with nonce `value`, or a standard token (registered with the stand-in) with requestHash `value`."""
    if form == "classic":
        return mint_classic(verdict(nonce=value, **vkw), keys or env.keys)
    assert form == "standard"
    return (google or env.google).add(verdict(request_hash=value, **vkw))


def call(env, form: str, prefix: str, method: str = "GET", body: bytes = b"", ts_offset: int = 0, hash_for: dict | None = None,
         header: str = H, target: str | None = None, **vkw) -> SimpleNamespace:
    """A request to a fresh target under `prefix` with a token of `form` bound to it (or, with `hash_for`, to the
    request it describes: keys method / target / ts / body)."""
    target = target or unique(prefix)
    ts = str(int(time.time()) + ts_offset)
    h = {"method": method, "target": target, "ts": ts, "body": body, **(hash_for or {})}
    token = mint(env, form, request_hash(h["method"], h["target"], str(h["ts"]), h["body"]), **vkw)
    out = send(env, target, token, ts, method, body, header)
    out.token, out.ts = token, ts
    return out


def assert_verified(q, verifier: str = "android", device: str = "MEETS_DEVICE_INTEGRITY",
                    recognition: str = "PLAY_RECOGNIZED", token_header: str = H) -> None:
    got = {n: q.get(n) for n in ("x-attest-verdict", "x-attest-verifier", "x-attest-app-id", "x-attest-device-integrity",
                                 "x-attest-app-recognition", token_header.lower(), TS.lower(), "x-attest-reason")}
    assert got == {"x-attest-verdict": ["verified"], "x-attest-verifier": [verifier], "x-attest-app-id": [PACKAGE],
                   "x-attest-device-integrity": [device], "x-attest-app-recognition": [recognition],
                   token_header.lower(): [], TS.lower(): [], "x-attest-reason": []}, q.headers


FORMS = ["classic", "standard"]


# ----------------------------------------------------------------------------------------------------------------
# Passing tokens


@pytest.mark.parametrize("form", FORMS)
def test_a_valid_token_reaches_the_upstream_with_the_verdict_headers(env, form):
    body = b'{"amount":42,"note":"\xe2\x9c\x93"}'
    calls_before = len(env.google.decode_calls)
    r = call(env, form, "/std/", method="POST", body=body)
    assert r.result == (200, None), env.gw.stderr()[-3000:]
    assert len(r.seen) == 1
    q = r.seen[0]
    assert_verified(q)
    assert (q.method, q.body) == ("POST", body)                     # the held body is forwarded unchanged
    if form == "standard":
        assert env.google.decode_count(r.token) == 1
    else:
        assert len(env.google.decode_calls) == calls_before, "a classic token was sent to Google"
    assert env.google.problems == []


@pytest.mark.parametrize("form", FORMS)
def test_strongest_label_and_every_configured_certificate_form(env, form):
    r = call(env, form, "/std/", device=["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"])
    assert r.result == (200, None)
    assert r.seen[0].one("x-attest-device-integrity") == "MEETS_STRONG_INTEGRITY"
    # The second certificate is configured as colon-separated hex; the verdict carries base64url.
    assert call(env, form, "/std/", digests=[cert_digest(OTHER_CERT), cert_digest(SECOND_CERT)]).result == (200, None)
    assert call(env, form, "/std/", digests=[cert_digest(THIRD_CERT)]).result == (200, None)
    # Padding on the verdict's digest is optional.
    assert call(env, form, "/std/", digests=[APP_CERT_DIGEST + "="]).result == (200, None)


@pytest.mark.parametrize("form", FORMS)
def test_timestamps_within_the_default_five_minutes_pass(env, form):
    now = int(time.time() * 1000)
    for offset in (-240_000, 240_000):
        assert call(env, form, "/std/", timestamp_ms=now + offset).result == (200, None), offset
    for offset in (-240, 240):
        assert call(env, form, "/std/", ts_offset=offset).result == (200, None), offset


# ----------------------------------------------------------------------------------------------------------------
# The policy


POLICY_CASES = {
    "wrong_request_package": ({"package": "com.example.evil"}, (403, "wrong_package")),
    "wrong_app_package": ({"app_package": "com.example.evil"}, (403, "wrong_package")),
    "unknown_certificate_digest": ({"digests": [cert_digest(OTHER_CERT)]}, (403, "app_not_recognized")),
    "no_certificate_digest": ({"digests": []}, (403, "app_not_recognized")),
    "unrecognized_version": ({"app_recognition": "UNRECOGNIZED_VERSION"}, (403, "app_not_recognized")),
    "unevaluated_app": ({"app_recognition": "UNEVALUATED", "digests": []}, (403, "app_not_recognized")),
    "basic_integrity_only": ({"device": ["MEETS_BASIC_INTEGRITY"]}, (403, "device_integrity_too_low")),
    "no_device_label": ({"device": []}, (403, "device_integrity_too_low")),
    "virtual_integrity": ({"device": ["MEETS_VIRTUAL_INTEGRITY"]}, (403, "device_integrity_too_low")),
    "stale_timestamp_millis": ({"ts_ms": -400_000}, (401, "stale_timestamp")),
    "future_timestamp_millis": ({"ts_ms": 400_000}, (401, "stale_timestamp")),
    # The order: the first failing check decides.
    "order_package_before_stale": ({"package": "com.example.evil", "ts_ms": -400_000}, (403, "wrong_package")),
    "order_stale_before_recognition": ({"ts_ms": -400_000, "app_recognition": "UNRECOGNIZED_VERSION"},
                                       (401, "stale_timestamp")),
    "order_recognition_before_app_package": ({"app_recognition": "UNRECOGNIZED_VERSION", "app_package": "com.example.evil"},
                                             (403, "app_not_recognized")),
    "order_app_package_before_digest": ({"app_package": "com.example.evil", "digests": [cert_digest(OTHER_CERT)]},
                                        (403, "wrong_package")),
    "order_digest_before_device": ({"digests": [cert_digest(OTHER_CERT)], "device": ["MEETS_BASIC_INTEGRITY"]},
                                   (403, "app_not_recognized")),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", list(POLICY_CASES))
def test_policy_refusals(env, form, case):
    kw, expected = POLICY_CASES[case]
    kw = dict(kw)
    if "ts_ms" in kw:
        kw["timestamp_ms"] = int(time.time() * 1000) + kw.pop("ts_ms")
    assert call(env, form, "/std/", **kw).result == expected


def wait_for_phase(low: float, high: float) -> None:
    """Sleeps until the wall clock's fraction of a second is in [low, high) (bounded: at most ~1.1 s)."""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        frac = time.time() % 1
        if low <= frac < high:
            return
        time.sleep(0.005)
    raise AssertionError("could not reach the requested sub-second phase")


@pytest.mark.parametrize("phase", [(0.05, 0.15), (0.75, 0.85)], ids=["early-in-the-second", "late-in-the-second"])
def test_timestamp_millis_freshness_is_judged_to_the_millisecond(env, phase):
    """|now − timestampMillis| > max_skew (5 min) is stale: 0.4 s too old is refused and 0.4 s inside the window
    (ahead) passes, wherever in the second the request arrives."""
    wait_for_phase(*phase)
    now_ms = int(time.time() * 1000)
    old = call(env, "classic", "/std/", timestamp_ms=now_ms - 300_000 - 400).result
    wait_for_phase(*phase)
    now_ms = int(time.time() * 1000)
    ahead = call(env, "classic", "/std/", timestamp_ms=now_ms + 300_000 - 400).result
    assert (old, ahead) == ((401, "stale_timestamp"), (200, None)), \
        f"0.4 s past / inside max_skew at sub-second phase {phase}: (old, ahead) = {(old, ahead)}"


@pytest.mark.parametrize("form", FORMS)
def test_the_timestamp_header_is_fresh_and_required(env, form):
    assert call(env, form, "/std/", ts_offset=-400).result == (401, "stale_timestamp")
    assert call(env, form, "/std/", ts_offset=400).result == (401, "stale_timestamp")
    # binding: request needs the header.
    target = unique("/std/")
    ts = str(int(time.time()))
    token = mint(env, form, request_hash("GET", target, ts, b""))
    assert send(env, target, token, ts=None).result == (401, "malformed_token")
    assert send(env, target, token, ts=ts).result == (200, None)          # the same token with it


# ----------------------------------------------------------------------------------------------------------------
# The request hash


@pytest.mark.parametrize("form", FORMS)
def test_the_request_hash_binds_method_target_timestamp_and_body(env, form):
    body = b'{"amount":1}'
    ts_before = str(int(time.time()) - 5)
    cases = {
        "another body": dict(body=b'{"amount":2}'),
        "another path": dict(target="/std/somewhere-else?q=1"),
        "another query": None,                                 # filled in below (needs the target)
        "another method": dict(method="PUT"),
        "another timestamp": dict(ts=ts_before),
    }
    for name, hash_for in cases.items():
        target = unique("/std/")
        if hash_for is None:
            hash_for = dict(target=target.replace("?q=1", "?q=2"))
        r = call(env, form, "/std/", method="POST", body=body, hash_for=hash_for, target=target)
        assert r.result == (401, "bad_assertion"), name
    # The same request hashed right passes; a trailing "=" on the token's value is ignored.
    assert call(env, form, "/std/", method="POST", body=body).result == (200, None)
    target = unique("/std/")
    ts = str(int(time.time()))
    token = mint(env, form, request_hash("POST", target, ts, body) + "=")
    assert send(env, target, token, ts, "POST", body).result == (200, None)


@pytest.mark.parametrize("form", FORMS)
def test_the_request_hash_covers_the_target_as_sent(env, form):
    n = next(_counter)
    sent, canonical = f"/std/%61bc-{n}?x=%61", f"/std/abc-{n}?x=%61"
    ts = str(int(time.time()))
    token = mint(env, form, request_hash("GET", sent, ts, b""))
    r = send(env, sent, token, ts, upstream_target=canonical)
    assert r.result == (200, None)
    assert len(r.seen) == 1                                         # routed and forwarded in the canonical form
    n = next(_counter)
    sent, canonical = f"/std/%61bc-{n}", f"/std/abc-{n}"
    token = mint(env, form, request_hash("GET", canonical, ts, b""))
    assert send(env, sent, token, ts, upstream_target=canonical).result == (401, "bad_assertion")


@pytest.mark.parametrize("form", FORMS)
def test_the_request_hash_covers_a_chunked_body(env, form):
    body = b"".join(b"line %d of a chunked body\n" % i for i in range(40))
    for hashed, expected in ((body, (200, None)), (body[:-1], (401, "bad_assertion"))):
        target = unique("/std/")
        ts = str(int(time.time()))
        token = mint(env, form, request_hash("POST", target, ts, hashed))
        r = send(env, target, token, ts, "POST", body, chunked=True)
        assert r.result == expected
        if expected[0] == 200:
            assert r.seen[0].body == body


def test_max_skew_is_configurable(env):
    # android_act has max_skew: 60s.
    now_ms = int(time.time() * 1000)
    assert call(env, "classic", "/act/", timestamp_ms=now_ms - 90_000).result == (401, "stale_timestamp")
    assert call(env, "classic", "/act/", ts_offset=-90).result == (401, "stale_timestamp")
    assert call(env, "classic", "/act/", ts_offset=90).result == (401, "stale_timestamp")
    assert call(env, "classic", "/act/", timestamp_ms=now_ms - 30_000, ts_offset=-30).result == (200, None)


# ----------------------------------------------------------------------------------------------------------------
# binding: nonce


def post(port: int, target: str, body: bytes = b"", headers: dict | None = None) -> U.Resp:
    lines = [f"POST {target} HTTP/1.1", "Host: gw.test", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    r = U.one_shot(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body, timeout=20)
    assert r is not None, "the gateway closed the connection without a response"
    return r


def get_challenge(port: int, path: str = REG) -> str:
    r = post(port, path + "/challenge")
    assert r.status == 200, (r.status, r.body)
    doc = json.loads(r.body)
    assert set(doc) == {"challenge", "expires_in"} and doc["expires_in"] == 300, doc
    assert isinstance(doc["challenge"], str) and len(doc["challenge"]) >= 16, doc
    return doc["challenge"]


def test_nonce_binding_accepts_each_challenge_once(env):
    c = get_challenge(env.gw.port, REG_NONCE)
    t1 = mint_classic(verdict(nonce=c), env.keys)
    r = send(env, unique("/nonce/"), t1)                             # no timestamp header needed
    assert r.result == (200, None)
    assert_verified(r.seen[0], verifier="android_nonce")
    t2 = mint_classic(verdict(nonce=c), env.keys)                   # another token, the same (used) challenge
    assert send(env, unique("/nonce/"), t2).result == (401, "challenge_unknown")
    never = b64url(secrets.token_bytes(32))
    assert send(env, unique("/nonce/"), mint_classic(verdict(nonce=never), env.keys)).result == (401, "challenge_unknown")
    # A challenge of the other verifier's registration endpoint is not this verifier's.
    other = get_challenge(env.gw.port, REG)
    assert send(env, unique("/nonce/"), mint_classic(verdict(nonce=other), env.keys)).result == (401, "challenge_unknown")
    # A policy failure, or a stale timestamp header (checked when present), does not burn the challenge.
    c2 = get_challenge(env.gw.port, REG_NONCE)
    assert send(env, unique("/nonce/"), mint_classic(verdict(nonce=c2), env.keys), ts=int(time.time()) - 400).result == \
        (401, "stale_timestamp")
    bad = mint_classic(verdict(nonce=c2, device=["MEETS_BASIC_INTEGRITY"]), env.keys)
    assert send(env, unique("/nonce/"), bad).result == (403, "device_integrity_too_low")
    assert send(env, unique("/nonce/"), mint_classic(verdict(nonce=c2), env.keys)).result == (200, None)


def test_nonce_binding_still_binds_a_standard_token_to_the_request(env):
    assert call(env, "standard", "/nonce/").result == (200, None)
    assert call(env, "standard", "/nonce/", hash_for={"target": "/nonce/elsewhere"}).result == (401, "bad_assertion")
    # A challenge in a standard token's requestHash is not accepted in place of the request hash.
    c = get_challenge(env.gw.port, REG_NONCE)
    target = unique("/nonce/")
    token = env.google.add(verdict(request_hash=c))
    assert send(env, target, token, ts=int(time.time())).result == (401, "bad_assertion")
    # With binding request, a challenge as a classic nonce is no request hash either.
    c = get_challenge(env.gw.port, REG)
    assert send(env, unique("/std/"), mint_classic(verdict(nonce=c), env.keys), ts=int(time.time())).result == \
        (401, "bad_assertion")


# ----------------------------------------------------------------------------------------------------------------
# Limited use


@pytest.mark.parametrize("form", FORMS)
def test_limited_use_consumes_each_token_once(env, form):
    body = b"pay=1"
    first = call(env, form, "/lu/", method="POST", body=body)
    assert first.result == (200, None)
    again = send(env, first.target, first.token, first.ts, "POST", body)
    assert again.result == (401, "token_replayed")
    assert len(again.seen) == 1, "the replay reached the upstream"
    # The same token on a route without limited_use is not consumed there (the hash binds /lu/…: bad_assertion
    # shows it was judged, not refused as replayed).
    assert send(env, first.target.replace("/lu/", "/std/"), first.token, first.ts, "POST", body).result == \
        (401, "bad_assertion")
    # A rejected token is not consumed: fixed, it still passes once.
    target = unique("/lu/")
    ts = str(int(time.time()))
    h = request_hash("GET", target, ts, b"")
    bad = mint(env, form, h, device=["MEETS_BASIC_INTEGRITY"])
    assert send(env, target, bad, ts).result == (403, "device_integrity_too_low")
    good = mint(env, form, h)
    assert send(env, target, good, ts).result == (200, None)
    assert send(env, target, good, ts).result == (401, "token_replayed")


def test_limited_use_replicas_on_one_redis_agree(module_factory, start_gateway, start_upstream, redis_server, env, tmp_path):
    google = FakeGoogle(env.tls, PACKAGE)                    # its own stand-in: the module's counts stay the module's
    module_factory.items.append(google)
    sa = write_service_account(tmp_path / "sa.json", token_uri=google.url + "/token")
    google.trust(sa)
    up = start_upstream(name="pi-redis-up")
    state = {"backend": "redis", "url": redis_server.url, "key_prefix": f"pi{secrets.token_hex(4)}:", "timeout": "500ms"}
    verifiers = {"android": classic_verifier(env.dec, env.ver, **google_keys(google, sa, env.tls))}
    routes = [{"name": "lu", "match": {"path_prefix": "/lu/"}, "upstream": "up", "verify": ["android"], "limited_use": True}]
    gws = [start_gateway(gateway_config(free_port(), {"up": up.url}, routes=routes, verifiers=verifiers, state=state))
           for _ in range(2)]
    view = SimpleNamespace(up=up, gw=gws[0])

    def one(form, first, second):
        target = unique("/lu/")
        ts = str(int(time.time()))
        token = mint(env, form, request_hash("GET", target, ts, b""), google=google)
        a = send(view, target, token, ts, port=gws[first].port)
        b = send(view, target, token, ts, port=gws[second].port)
        return a.result, b.result, len(forwarded(view, target))

    for form, first, second in (("classic", 0, 1), ("classic", 1, 0), ("standard", 0, 1), ("standard", 1, 0)):
        assert one(form, first, second) == ((200, None), (401, "token_replayed"), 1), (form, first, second)

    # The same token at both replicas at once: accepted exactly once.
    for i in range(4):
        form = FORMS[i % 2]
        target = unique("/lu/")
        ts = str(int(time.time()))
        token = mint(env, form, request_hash("GET", target, ts, b""), google=google)
        results: list = [None, None]
        barrier = threading.Barrier(2, timeout=10)

        def go(k):
            barrier.wait()
            r = U.one_shot(gws[k].port, raw_request("GET", target, [(H, token), (TS, ts)]), timeout=20)
            results[k] = outcome(r)

        threads = [threading.Thread(target=go, args=(k,), daemon=True) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a client thread hung"
        assert sorted(results, key=str) == sorted([(200, None), (401, "token_replayed")], key=str), (form, results)
        assert len(forwarded(view, target)) == 1
    assert google.problems == []


@pytest.mark.timeout_s(30)
def test_a_short_replay_window_never_lets_a_still_acceptable_token_through_twice(env):
    # android_rw: replay_window 2s on a limited_use route, max_skew the default 5m. A consumed token is kept for
    # replay_window, and at least until timestampMillis + max_skew: past the 2 s it is still refused, since the policy
    # would still accept it (a shorter record would let it through a second time).
    first = call(env, "classic", "/rw/")
    assert first.result == (200, None)
    assert send(env, first.target, first.token, first.ts).result == (401, "token_replayed")
    time.sleep(3.5)
    assert send(env, first.target, first.token, first.ts).result == (401, "token_replayed")


# ----------------------------------------------------------------------------------------------------------------
# Classic tokens that do not decode


def test_classic_token_decoding_failures(env):
    def try_token(token) -> tuple:
        target = unique("/std/")
        ts = str(int(time.time()))
        return send(env, target, token(request_hash("GET", target, ts, b"")), ts).result

    other = ClassicKeys()
    assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys)) == (200, None)             # the control
    assert try_token(lambda h: tamper(mint_classic(verdict(nonce=h), env.keys), part=3)) == (401, "malformed_token")
    assert try_token(lambda h: tamper(mint_classic(verdict(nonce=h), env.keys), part=4)) == (401, "malformed_token")
    assert try_token(lambda h: tamper(mint_classic(verdict(nonce=h), env.keys), part=2)) == (401, "malformed_token")
    assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, kek=other.aes)) == (401, "bad_signature")
    assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, signing=other.signing)) == (401, "bad_signature")
    for header in ({"alg": "A128KW", "enc": "A256GCM"}, {"alg": "RSA-OAEP-256", "enc": "A256GCM"}, {"alg": "dir", "enc": "A256GCM"},
                   {"alg": "A256KW", "enc": "A128GCM"}, {"alg": "A256KW", "enc": "A256CBC-HS512"}):
        assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, jwe_header=header)) == \
            (401, "unsupported_algorithm"), header
    for header in ({"alg": "A256KW", "enc": "A256GCM", "zip": "DEF"}, {"alg": "A256KW", "enc": "A256GCM", "crit": ["exp"], "exp": 1}):
        assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, jwe_header=header)) == \
            (401, "malformed_token"), header
    # The sizes A256KW and A256GCM fix (a genuine encryption with a 16-byte IV, a tag cut to 12 bytes); empty
    # parts; non-canonical base64url (padding on the 40-byte wrapped key).
    assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, iv_len=16)) == (401, "malformed_token")
    assert try_token(lambda h: mint_classic(verdict(nonce=h), env.keys, tag_len=12)) == (401, "malformed_token")
    assert try_token(lambda h: "....") == (401, "malformed_token")

    def padded(h):
        parts = mint_classic(verdict(nonce=h), env.keys).split(".")
        parts[1] += "=="
        return ".".join(parts)

    assert try_token(padded) == (401, "malformed_token")
    # The inner JWS: ES256 with R ‖ S only.
    payload = lambda h: json.dumps(verdict(nonce=h)).encode()          # noqa: E731
    refused = {"bad_signature", "malformed_token", "unsupported_algorithm"}
    for name, inner in {
        "DER signature": lambda h: jws_der_signature(payload(h), env.keys.signing),
        "alg none": lambda h: jws_es256(payload(h), env.keys.signing, {"alg": "none"}).rsplit(".", 1)[0] + ".",
        "alg HS256": lambda h: jws_es256(payload(h), env.keys.signing, {"alg": "HS256"}),
        "not a JWS": lambda h: b64url(payload(h)),
    }.items():
        status, reason = try_token(lambda h: mint_classic({}, env.keys, inner=inner(h)))
        assert status == 401 and reason in refused, (name, status, reason)


def test_which_tokens_go_to_google(env):
    g = env.google
    # With classic keys, a token of four or six parts is not a classic token: Google decodes it.
    for parts in (4, 6):
        target = unique("/std/")
        ts = str(int(time.time()))
        token = g.register(".".join(b64url(secrets.token_bytes(30)) for _ in range(parts)),
                           verdict(request_hash=request_hash("GET", target, ts, b"")))
        assert send(env, target, token, ts).result == (200, None), parts
        assert g.decode_count(token) == 1, parts
    # Without classic keys (android_g), a five-part token goes to Google too (Google-managed classic keys).
    target = unique("/g/")
    ts = str(int(time.time()))
    token = g.register(".".join(b64url(secrets.token_bytes(30)) for _ in range(5)),
                       verdict(nonce=request_hash("GET", target, ts, b"")))
    r = send(env, target, token, ts)
    assert r.result == (200, None)
    assert_verified(r.seen[0], verifier="android_g")
    assert g.decode_count(token) == 1
    # And a classic token minted with keys the gateway does not hold is, to Google, a token it cannot decode.
    h = request_hash("GET", target, ts, b"")
    classic = mint_classic(verdict(nonce=h), env.keys)
    assert send(env, unique("/g/"), classic, ts).result == (401, "malformed_token")
    assert g.decode_count(classic) == 1


def test_a_standard_token_without_a_service_account_is_malformed(env):
    # android_lic has classic keys only: a token that is not a five-part JWE has nowhere to go.
    calls = len(env.google.decode_calls)
    assert call(env, "standard", "/lic/").result == (401, "malformed_token")
    assert len(env.google.decode_calls) == calls


# ----------------------------------------------------------------------------------------------------------------
# Google: outages, retries, the verdict cache, the access token


def test_google_down_a_cached_verdict_keeps_serving_an_uncached_token_gets_503(env):
    g = env.google
    cached = call(env, "standard", "/std/")
    assert cached.result == (200, None)
    assert g.decode_count(cached.token) == 1
    try:
        for mode in (503, "drop"):
            g.down = mode
            again = send(env, cached.target, cached.token, cached.ts)
            assert again.result == (200, None), mode
            assert len(again.seen) >= 2
            assert g.decode_count(cached.token) == 1, f"{mode}: a cached verdict was decoded again"
            fresh = call(env, "standard", "/std/")
            assert fresh.result == (503, "play_integrity_unavailable"), mode
            assert g.decode_count(fresh.token) == 2, f"{mode}: expected one call and one retry"
        g.down = None
        # Nothing about the outage was cached: the same kind of token passes now.
        after = call(env, "standard", "/std/")
        assert after.result == (200, None)
    finally:
        g.down = None
    # An unavailable verdict is not cached either: the token that got 503 passes once Google is back.
    assert send(env, fresh.target, fresh.token, fresh.ts).result == (200, None)


def test_monitor_mode_forwards_an_unavailable_verdict(env):
    try:
        env.google.down = 503
        r = call(env, "standard", "/mon/")
    finally:
        env.google.down = None
    assert r.result == (200, None)
    q = r.seen[0]
    assert (q.get("x-attest-verdict"), q.get("x-attest-reason")) == (["failed"], ["play_integrity_unavailable"]), q.headers


def test_a_cached_verdict_is_still_bound_to_its_request(env):
    first = call(env, "standard", "/std/")
    assert first.result == (200, None)
    other = unique("/std/")
    assert send(env, other, first.token, first.ts).result == (401, "bad_assertion")
    assert send(env, first.target, first.token, first.ts, "POST", b"x").result == (401, "bad_assertion")
    assert env.google.decode_count(first.token) == 1                      # both judged on the cached verdict


@pytest.mark.timeout_s(30)
def test_a_cached_verdict_expires_at_timestamp_plus_max_skew(env):
    ts_ms = int(time.time() * 1000) - 300_000 + 2_500                    # 2.5 s left of the default 5 minutes
    first = call(env, "standard", "/std/", timestamp_ms=ts_ms)
    assert first.result == (200, None)
    assert env.google.decode_count(first.token) == 1
    deadline = time.monotonic() + 10
    # (+1.2 s: past the boundary even for a gateway clock read in whole seconds)
    while time.time() * 1000 < ts_ms + 300_000 + 1_200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert send(env, first.target, first.token, first.ts).result == (401, "stale_timestamp")
    assert env.google.decode_count(first.token) == 2, "the verdict was served from the cache after it expired"


@pytest.mark.parametrize("failures,expected,calls", [
    ([503], (200, None), 2),
    ([429], (200, None), 2),
    ([500], (200, None), 2),
    (["drop"], (200, None), 2),
    ([503, 503], (503, "play_integrity_unavailable"), 2),
    ([429, 500], (503, "play_integrity_unavailable"), 2),
], ids=["503", "429", "500", "transport", "503-twice", "429-then-500"])
def test_one_retry_on_429_5xx_and_transport_failures(env, failures, expected, calls):
    target = unique("/std/")
    ts = str(int(time.time()))
    token = env.google.add(verdict(request_hash=request_hash("GET", target, ts, b"")))
    env.google.fail_next[token] = list(failures)
    assert send(env, target, token, ts).result == expected
    assert env.google.decode_count(token) == calls


@pytest.mark.timeout_s(30)
def test_a_slow_google_times_out_and_is_retried_once(env):
    # android_g: timeout 700ms. The stand-in holds each of the two calls for 2 s.
    target = unique("/g/")
    ts = str(int(time.time()))
    token = env.google.add(verdict(request_hash=request_hash("GET", target, ts, b"")))
    env.google.fail_next[token] = [("sleep", 2.0), ("sleep", 2.0)]
    t0 = time.monotonic()
    assert send(env, target, token, ts).result == (503, "play_integrity_unavailable")
    elapsed = time.monotonic() - t0
    assert env.google.decode_count(token) == 2
    assert elapsed < 3.5, f"two 700 ms calls took {elapsed:.1f}s"
    # Slow once, then answered in time: the retry passes.
    target = unique("/g/")
    token = env.google.add(verdict(request_hash=request_hash("GET", target, ts, b"")))
    env.google.fail_next[token] = [("sleep", 2.0)]
    assert send(env, target, token, ts).result == (200, None)
    assert env.google.decode_count(token) == 2


def test_a_token_google_cannot_decode_is_malformed_and_not_retried(env):
    token = "std" + secrets.token_urlsafe(120)                      # never registered: the stand-in answers 400
    assert send(env, unique("/std/"), token, ts=int(time.time())).result == (401, "malformed_token")
    assert env.google.decode_count(token) == 1


def test_the_access_token_is_fetched_once_and_reused(env):
    tokens = [call(env, "standard", "/std/") for _ in range(8)]
    assert [t.result for t in tokens] == [(200, None)] * 8
    g = env.google
    # Every decode of this verifier so far, across the whole module, used one access token.
    assert g.token_fetches("/token", env.sa.client_email) == 1, g.token_calls
    assert len(g.bearers_used([t.token for t in tokens])) == 1
    assert g.problems == []                      # the RS256 assertion: header, signature, iss, scope, aud, iat/exp


def test_token_url_wins_and_concurrent_requests_share_one_fetch(env):
    g = env.google
    main_fetches = g.token_fetches("/token", env.sa.client_email)
    results: list = [None] * 6

    def go(i):
        results[i] = call(env, "standard", "/tu/").result

    threads = [threading.Thread(target=go, args=(i,), daemon=True) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    assert results == [(200, None)] * 6
    for _ in range(3):
        assert call(env, "standard", "/tu/").result == (200, None)
    assert g.token_fetches("/oauth2/token") == 1, g.token_calls          # token_url, not the file's token_uri
    assert g.token_fetches("/token", env.sa.client_email) == main_fetches
    assert g.problems == []


def test_an_access_token_google_refuses_is_renewed_once(env):
    g = env.google
    assert call(env, "standard", "/tu/").result == (200, None)            # has an access token
    before = g.token_fetches("/oauth2/token")
    g.revoke("/oauth2/token")
    r = call(env, "standard", "/tu/")
    assert r.result == (200, None)
    assert g.token_fetches("/oauth2/token") == before + 1
    assert g.decode_count(r.token) == 2                                   # refused (401), then with the new token
    assert call(env, "standard", "/tu/").result == (200, None)
    assert g.token_fetches("/oauth2/token") == before + 1


# ----------------------------------------------------------------------------------------------------------------
# Optional policy keys, the header, min_device_integrity


@pytest.mark.parametrize("route,verifier,field,passing,refused,reason", [
    ("/lic/", "android_lic", "licensing", ["LICENSED"], ["UNLICENSED", "UNEVALUATED", None], "not_licensed"),
    ("/pp/", "android_pp", "play_protect", ["NO_ISSUES", "NO_DATA"], ["HIGH_RISK", "POSSIBLE_RISK", "MEDIUM_RISK", None],
     "environment_risk"),
    ("/act/", "android_act", "activity", ["LEVEL_1", "LEVEL_2"], ["LEVEL_3", "LEVEL_4", "UNEVALUATED", None],
     "device_activity_too_high"),
], ids=["require_licensed", "play_protect", "max_device_activity"])
def test_optional_policy_keys(env, route, verifier, field, passing, refused, reason):
    for value in passing:
        r = call(env, "classic", route, **{field: value})
        assert r.result == (200, None), value
        assert_verified(r.seen[0], verifier=verifier)
    for value in refused:
        assert call(env, "classic", route, **{field: value}).result == (403, reason), value
    # Without the key (the android verifier), the worst value passes.
    assert call(env, "classic", "/std/", **{field: refused[0]}).result == (200, None)


def test_min_device_integrity_basic(env):
    # android_pp has min_device_integrity: MEETS_BASIC_INTEGRITY.
    r = call(env, "classic", "/pp/", device=["MEETS_BASIC_INTEGRITY"])
    assert r.result == (200, None)
    assert_verified(r.seen[0], verifier="android_pp", device="MEETS_BASIC_INTEGRITY")
    assert call(env, "classic", "/pp/", device=[]).result == (403, "device_integrity_too_low")
    assert call(env, "classic", "/pp/", device=["MEETS_VIRTUAL_INTEGRITY"]).result == (403, "device_integrity_too_low")


def test_custom_header_min_strong_and_app_recognition_list(env):
    r = call(env, "classic", "/strong/", header="X-Integrity-Token", device=["MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"],
             app_recognition="UNRECOGNIZED_VERSION")
    assert r.result == (200, None)
    assert_verified(r.seen[0], verifier="android_strong", device="MEETS_STRONG_INTEGRITY",
                    recognition="UNRECOGNIZED_VERSION", token_header="X-Integrity-Token")
    assert call(env, "classic", "/strong/", header="X-Integrity-Token").result == (403, "device_integrity_too_low")
    assert call(env, "classic", "/strong/", header="X-Integrity-Token", app_recognition="UNEVALUATED", digests=[]).result == \
        (403, "app_not_recognized")
    # The default header is not this verifier's.
    assert call(env, "classic", "/strong/", device=["MEETS_STRONG_INTEGRITY"]).result == (401, "missing_token")


# ----------------------------------------------------------------------------------------------------------------
# Monitor mode, WWW-Authenticate


def test_monitor_mode_forwards_failures_with_the_reason(env):
    spoof = [("X-Attest-Verdict", "verified"), ("X-Attest-Device-Integrity", "MEETS_STRONG_INTEGRITY"),
             ("X-Attest-App-Id", PACKAGE)]
    for kw, reason in (({"package": "com.example.evil"}, "wrong_package"),
                       ({"device": ["MEETS_BASIC_INTEGRITY"]}, "device_integrity_too_low"),
                       ({"timestamp_ms": int(time.time() * 1000) - 400_000}, "stale_timestamp")):
        target = unique("/mon/")
        ts = str(int(time.time()))
        token = mint_classic(verdict(nonce=request_hash("GET", target, ts, b""), **kw), env.keys)
        r = send(env, target, token, ts, extra=spoof)
        assert r.result == (200, None), reason
        q = r.seen[0]
        assert (q.get("x-attest-verdict"), q.get("x-attest-reason")) == (["failed"], [reason]), q.headers
        assert q.get("x-attest-device-integrity") == [] and q.get("x-attest-app-id") == [], q.headers
        assert q.get(H.lower()) == [] and q.get(TS.lower()) == [], q.headers        # strip_token_headers
    r = call(env, "classic", "/mon/", method="POST", body=b"a", hash_for={"body": b"b"})
    assert r.result == (200, None)
    assert (r.seen[0].get("x-attest-verdict"), r.seen[0].get("x-attest-reason")) == (["failed"], ["bad_assertion"])
    assert r.seen[0].body == b"a"
    r = call(env, "standard", "/mon/")
    assert r.result == (200, None)
    assert_verified(r.seen[0])


def test_a_401_names_the_play_integrity_scheme(env):
    r = send(env, unique("/std/"), None)
    assert r.result == (401, "missing_token")
    www = r.resp.get("www-authenticate")
    assert len(www) == 1 and re.match(r'^PlayIntegrity realm="[^"]*", error="missing_token"$', www[0]), www
    r = call(env, "classic", "/std/", timestamp_ms=int(time.time() * 1000) - 400_000)
    assert r.result == (401, "stale_timestamp")
    assert r.resp.get("www-authenticate")[0].startswith("PlayIntegrity ")
    # A 403 is not a challenge.
    r = call(env, "classic", "/std/", package="com.example.evil")
    assert r.result == (403, "wrong_package")


# ----------------------------------------------------------------------------------------------------------------
# Registration (the attestation plugins' Android half)


def attest_body(challenge: str, token: str, /, **over) -> bytes:
    body = {"platform": "android", "format": "google-play-integrity-standard", "keyId": "provider-handle-1",
            "challenge": challenge, "token": token}
    body.update(over)
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def register(env, body: bytes) -> tuple:
    r = post(env.gw.port, REG + "/attest", body, {"Content-Type": "application/json"})
    out = outcome(r, challenge=False)
    if out[0] == 201:
        assert json.loads(r.body) == {"platform": "android", "appId": PACKAGE}, r.body
    return out


def test_registration_with_a_standard_token(env):
    c = get_challenge(env.gw.port)
    token = env.google.add(verdict(request_hash=challenge_hash(c)))
    assert register(env, attest_body(c, token)) == (201, None)
    # The challenge is redeemed: another valid token for it is refused.
    token2 = env.google.add(verdict(request_hash=challenge_hash(c)))
    assert register(env, attest_body(c, token2)) == (401, "challenge_unknown")
    # A challenge the gateway never issued, and a redeemed one: refused before Google is asked (its quota is not
    # spent on made-up challenges).
    never = b64url(secrets.token_bytes(32))
    token3 = env.google.add(verdict(request_hash=challenge_hash(never)))
    assert register(env, attest_body(never, token3)) == (401, "challenge_unknown")
    assert env.google.decode_count(token3) == 0 and env.google.decode_count(token2) == 0


def test_registration_with_a_classic_token(env):
    c = get_challenge(env.gw.port)
    assert register(env, attest_body(c, mint_classic(verdict(nonce=challenge_hash(c)), env.keys))) == (201, None)
    assert register(env, attest_body(c, mint_classic(verdict(nonce=challenge_hash(c)), env.keys))) == \
        (401, "challenge_unknown")


def test_registration_wrong_hash_and_policy_failures_do_not_burn_the_challenge(env):
    c = get_challenge(env.gw.port)
    wrong = env.google.add(verdict(request_hash=challenge_hash(c + "x")))
    assert register(env, attest_body(c, wrong)) == (401, "bad_assertion")
    raw = env.google.add(verdict(request_hash=c))                          # the challenge itself, not its hash
    assert register(env, attest_body(c, raw)) == (401, "bad_assertion")
    evil = env.google.add(verdict(request_hash=challenge_hash(c), package="com.example.evil"))
    assert register(env, attest_body(c, evil)) == (403, "wrong_package")
    low = mint_classic(verdict(nonce=challenge_hash(c), device=["MEETS_BASIC_INTEGRITY"]), env.keys)
    assert register(env, attest_body(c, low)) == (403, "device_integrity_too_low")
    good = env.google.add(verdict(request_hash=challenge_hash(c)))
    assert register(env, attest_body(c, good)) == (201, None)


def test_registration_while_google_is_down(env):
    c = get_challenge(env.gw.port)
    token = env.google.add(verdict(request_hash=challenge_hash(c)))
    try:
        env.google.down = 503
        assert register(env, attest_body(c, token)) == (503, "play_integrity_unavailable")
    finally:
        env.google.down = None
    assert register(env, attest_body(c, token)) == (201, None)


def test_registration_malformed_bodies_are_400(env):
    c = get_challenge(env.gw.port)
    token = env.google.add(verdict(request_hash=challenge_hash(c)))
    for name, body in {
        "not json": b"not json",
        "an array": b"[]",
        "no token": attest_body(c, token, token=None),
        "no challenge": attest_body(c, token, challenge=None),
        "token not a string": attest_body(c, token, token=42),
        "another platform": attest_body(c, token, platform="ios"),
        "another format": attest_body(c, token, format="android-key"),
        "no platform": attest_body(c, token, platform=None),
    }.items():
        status, _ = register(env, body)
        assert status == 400, name
    # None of that used the challenge.
    assert register(env, attest_body(c, token)) == (201, None)


# ----------------------------------------------------------------------------------------------------------------
# check-config


@pytest.mark.parametrize("size", [16, 31, 33, 64])
def test_check_config_names_a_decryption_key_file_that_is_not_32_bytes(gateway_bin, tmp_path, size):
    keys = ClassicKeys()
    dec, ver = keys.write(tmp_path / "secrets")
    short = write_decryption_key_file(tmp_path / "secrets" / f"play-aes-{size}.txt", (keys.aes * 2)[:size])
    routes = [{"name": "api", "match": {"path_prefix": "/api/"}, "upstream": "up", "verify": ["android"]}]

    def check(dec_file, name):
        f = tmp_path / name
        f.write_text(gateway_config(18099, {"up": "http://127.0.0.1:9"}, routes=routes,
                                    verifiers={"android": classic_verifier(dec_file, ver)}))
        p = run_cli(gateway_bin, "check-config", "--config", str(f))
        return p, f, (p.stdout + p.stderr).decode("utf-8", "replace")

    p, f, text = check(dec, "good.yml")
    assert p.returncode == 0 and p.stdout.decode().strip() == "ok", text
    p, f, text = check(short, "short.yml")
    assert p.returncode == 1, text
    lines = [l for l in p.stderr.decode().splitlines() if l.strip()]
    assert len(lines) == 1, text
    assert re.match(rf"^{re.escape(str(f))}:\d+:\d+: verifiers\.android\.decryption_key_file: ", lines[0]), text
    assert str(short) in lines[0] and "32" in lines[0], text
    # serve reads the same file at start-up and refuses to start.
    f.write_text(f.read_text().replace("127.0.0.1:18099", f"127.0.0.1:{free_port()}"))
    try:
        p = run_cli(gateway_bin, "serve", "--config", str(f), timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("serve started with a decryption key that is not 32 bytes")
    assert p.returncode != 0 and "decryption_key_file" in p.stderr.decode(), (p.returncode, p.stderr[-2000:])


def test_check_config_reads_the_service_account_file(gateway_bin, tmp_path):
    keys = ClassicKeys()
    dec, ver = keys.write(tmp_path / "secrets")
    routes = [{"name": "api", "match": {"path_prefix": "/api/"}, "upstream": "up", "verify": ["android"]}]
    good = write_service_account(tmp_path / "secrets" / "sa.json", token_uri="https://127.0.0.1:9/token")
    bad = tmp_path / "secrets" / "user.json"
    bad.write_text(json.dumps(dict(json.loads(good.path.read_text()), type="authorized_user")))
    results = {}
    for name, sa_file in (("good", good.path), ("bad", bad), ("missing", tmp_path / "secrets" / "nope.json")):
        f = tmp_path / f"{name}.yml"
        f.write_text(gateway_config(18098, {"up": "http://127.0.0.1:9"}, routes=routes, verifiers={
            "android": classic_verifier(dec, ver, service_account_file=str(sa_file))}))
        p = run_cli(gateway_bin, "check-config", "--config", str(f))
        results[name] = (p.returncode, p.stdout.decode().strip(), p.stderr.decode())
    plain = write_service_account(tmp_path / "secrets" / "plain.json", token_uri="http://oauth.example.com/token")
    for name, extra in (("plain-token-uri", {}), ("plain-but-token-url", {"token_url": "https://127.0.0.1:9/token"})):
        f = tmp_path / f"{name}.yml"
        f.write_text(gateway_config(18098, {"up": "http://127.0.0.1:9"}, routes=routes, verifiers={
            "android": classic_verifier(dec, ver, service_account_file=str(plain.path), **extra)}))
        p = run_cli(gateway_bin, "check-config", "--config", str(f))
        results[name] = (p.returncode, p.stdout.decode().strip(), p.stderr.decode())
    # The signed assertion never goes to a plain-http token_uri; token_url, when set, is the one used (and checked).
    assert results["plain-token-uri"][0] == 1 and "token_uri http://oauth.example.com/token must use https" in \
        results["plain-token-uri"][2], results["plain-token-uri"]
    assert results["plain-but-token-url"][:2] == (0, "ok"), results["plain-but-token-url"]
    assert results["good"][:2] == (0, "ok"), results["good"]
    for name in ("bad", "missing"):
        code, _, err = results[name]
        assert code == 1 and "verifiers.android.service_account_file" in err, (name, results[name])


# ----------------------------------------------------------------------------------------------------------------
# attest-gateway playintegrity verify


def cli_verify(gateway_bin: str, token: str, tmp_path, *args: str):
    path = tmp_path / f"token-{next(_counter)}.txt"
    path.write_text(token + "\n")
    p = run_cli(gateway_bin, "playintegrity", "verify", "--token", str(path), *args)
    out, err = p.stdout.decode(), p.stderr.decode()
    return p.returncode, (json.loads(out) if out.strip() else None), err


def test_cli_decodes_a_classic_token_and_gives_the_gateways_decision(env, gateway_bin, tmp_path):
    keys = ["--decryption-key", str(env.dec), "--verification-key", str(env.ver)]
    token = mint(env, "classic", "the-nonce")
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", PACKAGE, *keys, "--nonce", "the-nonce",
                            "--certificate-sha256", APP_CERT_DIGEST)
    assert rc == 0 and out["verified"] is True, out
    assert out["verdict"]["requestDetails"]["nonce"] == "the-nonce"
    assert out["checked"] == {"certificate": True, "binding": True}
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", PACKAGE, *keys, "--nonce", "another")
    assert (rc, out["verified"], out["reason"]) == (1, False, "bad_assertion")
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", "com.other.app", *keys)
    assert (rc, out["reason"]) == (1, "wrong_package")
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", PACKAGE, *keys,
                            "--certificate-sha256", cert_digest(OTHER_CERT))
    assert (rc, out["reason"]) == (1, "app_not_recognized")
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", PACKAGE, *keys, "--at", "2020-01-01T00:00:00Z")
    assert (rc, out["reason"]) == (1, "stale_timestamp")
    rc, out, _ = cli_verify(gateway_bin, tamper(token, 3), tmp_path, "--package", PACKAGE, *keys)
    assert (rc, out["reason"], "verdict" in out) == (1, "malformed_token", False)


def test_cli_asks_google_for_a_standard_token(env, gateway_bin, tmp_path):
    token = mint(env, "standard", "hash-1")
    google = ["--service-account", str(env.sa.path), "--api-base-url", env.google.url, "--ca-file", str(env.tls.ca)]
    rc, out, _ = cli_verify(gateway_bin, token, tmp_path, "--package", PACKAGE, *google, "--request-hash", "hash-1")
    assert rc == 0 and out["verdict"]["requestDetails"]["requestHash"] == "hash-1", out
    rc, out, _ = cli_verify(gateway_bin, "never-registered", tmp_path, "--package", PACKAGE, *google)
    assert (rc, out["reason"]) == (1, "malformed_token")


def test_cli_usage_errors_exit_2(env, gateway_bin, tmp_path):
    token = mint(env, "classic", "n")
    for args in (["--package", PACKAGE],                                                    # no way to decode
                 ["--package", PACKAGE, "--decryption-key", str(env.dec)],                   # half of the classic keys
                 ["--package", PACKAGE, "--decryption-key", str(env.dec), "--verification-key", str(env.ver),
                  "--nonce", "a", "--request-hash", "b"],
                 ["--package", PACKAGE, "--decryption-key", str(tmp_path / "missing"), "--verification-key", str(env.ver)],
                 ["--package", PACKAGE, "--decryption-key", str(env.dec), "--verification-key", str(env.ver), "--at", "yesterday"]):
        rc, out, err = cli_verify(gateway_bin, token, tmp_path, *args)
        assert rc == 2 and out is None and "Usage:" in err, (args, rc, err)
