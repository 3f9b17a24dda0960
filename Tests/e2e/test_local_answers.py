"""Every answer the gateway makes itself is proper HTTP (PROTOCOL.md Additions, "Every answer the gateway makes
itself"): a valid IMF-fixdate `Date` within a few seconds of now, `Content-Type: application/json` with a matching
`Content-Length`, the body `{"error":…,"reason":…}` with `error` by status (400 bad_request, 401 unauthorized,
403 forbidden, 503 unavailable; other statuses keep their names), and on a 401 a `WWW-Authenticate` naming the
scheme of the verifier that failed (`AppCheck`, `AppAttest`, `DeviceCheck`) — an App Attest rejection never
carries an `AppCheck` challenge, and no other status carries a challenge at all.

One real gateway (HTTP/1.1 and h2c on one listener) with every kind of local answer reachable: routing misses,
parse errors and ambiguous targets, App Check / App Attest / DeviceCheck rejections (a real dev issuer, a simulated
App Attest device, the HTTPS stand-in for Apple's DeviceCheck API), 413, 502 (nothing listening), 504 (a slow
upstream), 408, the registration endpoints (200/201/4xx) and forward-auth (200 and its rejection)."""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import socket
import subprocess
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from apple_fakes import FakeDeviceCheck, make_p8, make_tls
from harness import app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts
from test_app_attest import BUNDLE, REG, TEAM, Device, ca_dir, challenge, register

pytestmark = pytest.mark.timeout_s(60)

H = "X-Firebase-AppCheck"
H_DC = "X-Apple-DeviceCheck"
VERIFY = "/.attest/verify"
DC_TEAM, DC_KEY = "TEAMDC1234", "KEYDC12345"

ERROR_BY_STATUS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                   405: "method_not_allowed", 408: "request_timeout", 413: "payload_too_large",
                   431: "header_too_large", 502: "bad_gateway", 503: "unavailable", 504: "gateway_timeout",
                   505: "http_version_not_supported"}
# docs/http.md documents these without a reason code (`{"error":"not_found"}`, test_proxy.py pins it).
NO_REASON = {404, 405}
IMF_FIXDATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                         r"\d{4} \d{2}:\d{2}:\d{2} GMT$")


@pytest.fixture(scope="module")
def env(module_factory, dev_bin):
    tmp = module_factory.tmp
    iss = module_factory.dev_issuer()
    ca, root = ca_dir(dev_bin, tmp)
    tls = make_tls(tmp / "tls")
    p8 = make_p8(tmp / "AuthKey.p8")
    public = subprocess.run(["openssl", "pkey", "-in", str(p8), "-pubout"], capture_output=True, check=True).stdout
    apple = FakeDeviceCheck(tls, DC_KEY, DC_TEAM, public)
    module_factory.items.append(apple)
    up = module_factory.upstream(name="la-up")
    slow = module_factory.upstream(("slow", 3.0), name="la-slow")
    dead = f"http://127.0.0.1:{free_port()}"                     # nothing listens there
    verifiers = {
        "fb": app_check_verifier(iss.jwks_url),
        "fbapp": app_check_verifier(iss.jwks_url, app_ids=["1:123456789012:ios:not-this-app"]),
        "fbdead": app_check_verifier(f"http://127.0.0.1:{free_port()}/jwks"),
        "aa": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "root_ca": str(root),
               "binding": "request", "max_skew": "60s", "registration_path": REG},
        "dc": {"type": "device_check", "team_id": DC_TEAM, "key_id": DC_KEY, "private_key": str(p8),
               "environment": "development", "base_url": apple.url, "ca_file": str(tls.ca), "timeout": "2s"},
    }
    routes = [
        {"name": "ac", "match": {"path_prefix": "/ac/"}, "upstream": "up", "verify": ["fb"]},
        {"name": "acapp", "match": {"path_prefix": "/acapp"}, "upstream": "up", "verify": ["fbapp"]},
        {"name": "acdead", "match": {"path_prefix": "/acdead"}, "upstream": "up", "verify": ["fbdead"]},
        {"name": "aa", "match": {"path_prefix": "/aa"}, "upstream": "up", "verify": ["aa"]},
        {"name": "mix", "match": {"path_prefix": "/mix"}, "upstream": "up", "verify": ["fb", "aa"]},
        {"name": "all", "match": {"path_prefix": "/all"}, "upstream": "up", "verify": ["fb", "aa"],
         "require_all": True},
        {"name": "dc", "match": {"path_prefix": "/dc"}, "upstream": "up", "verify": ["dc"]},
        {"name": "small", "match": {"path_prefix": "/small"}, "upstream": "up", "verify": [], "max_body_bytes": 100},
        {"name": "dead", "match": {"path_prefix": "/dead"}, "upstream": "dead", "verify": []},
        {"name": "slow", "match": {"path_prefix": "/slow"}, "upstream": "slow", "verify": []},
        {"name": "open", "match": {"path_prefix": "/open"}, "upstream": "up", "verify": []},
    ]
    port = free_port()
    cfg = gateway_config(port, {"up": up.url, "dead": dead, "slow": {"url": slow.url, "response_timeout": "1s"}},
                         routes=routes, verifiers=verifiers, limits={"header_timeout": "1s"},
                         state={"backend": "sqlite", "path": str(tmp / "la.db")})
    listener = f'  - address: "127.0.0.1:{port}"\n'
    assert listener in cfg
    cfg = cfg.replace(listener, listener + "    http2: true\n", 1) + f"forward_auth:\n  path: {VERIFY}\n"
    gw = module_factory.gateway(cfg)
    wait_gateway_accepts(port, "/ac/ready", H, iss.token())
    device = Device(dev_bin, ca, tmp / "device")
    register(port, device)
    return SimpleNamespace(gw=gw, port=port, up=up, iss=iss, apple=apple, device=device, ca=ca, tmp=tmp,
                           bin=dev_bin)


# ----------------------------------------------------------------------------------------------------------------
# Checks


def check_date(value: str | None, what: str) -> None:
    assert value is not None, f"{what}: no Date"
    assert IMF_FIXDATE.match(value), f"{what}: Date {value!r} is not an IMF-fixdate"
    when = email.utils.parsedate_to_datetime(value)
    assert email.utils.format_datetime(when, usegmt=True) == value, f"{what}: Date {value!r} (weekday?) is inconsistent"
    skew = abs(when.timestamp() - time.time())
    assert skew <= 5, f"{what}: Date {value!r} is {skew:.0f}s off"


def check_local(r, status: int, reason: str | None = None, what: str = "") -> dict:
    """The shape of a gateway-made error answer (HTTP/1.1 `U.Resp`)."""
    what = what or f"{status} {reason}"
    assert r is not None, f"{what}: no response"
    assert r.status == status, f"{what}: got {r.status} {r.body[:300]!r}"
    dates = r.get("date")
    assert len(dates) == 1, f"{what}: Date fields {dates}"
    check_date(dates[0], what)
    assert (r.one("content-type") or "").startswith("application/json"), f"{what}: {r.headers}"
    assert r.get("content-length") == [str(len(r.body))], f"{what}: {r.headers}"
    doc = json.loads(r.body)
    if status in ERROR_BY_STATUS:
        assert doc.get("error") == ERROR_BY_STATUS[status], f"{what}: body {doc}"
    if reason is not None:
        assert doc.get("reason") == reason, f"{what}: body {doc}"
    elif status >= 400 and status not in NO_REASON:
        assert isinstance(doc.get("reason"), str) and doc["reason"], f"{what}: body {doc}"
    if status in NO_REASON:
        assert set(doc) <= {"error", "reason"}, f"{what}: body {doc}"
    if status != 401:
        assert r.get("www-authenticate") == [], f"{what}: a {status} with a challenge: {r.headers}"
    return doc


def challenges(r) -> list[tuple[str, str]]:
    """(scheme, error) of each challenge in the one WWW-Authenticate field."""
    fields = r.get("www-authenticate")
    assert len(fields) == 1, f"WWW-Authenticate fields {fields}"
    got = re.findall(r'(?:^|, )([A-Za-z]+) realm="attest-gateway", error="([a-z_]+)"', fields[0])
    assert ", ".join(f'{s} realm="attest-gateway", error="{e}"' for s, e in got) == fields[0], fields
    return got


def check_401(r, reason: str, schemes: list[str], what: str = "") -> None:
    check_local(r, 401, reason, what)
    assert challenges(r) == [(s, reason) for s in schemes], f"{what or reason}: WWW-Authenticate {r.headers}"


def get(env, path: str, headers: list = ()) -> U.Resp:
    return U.one_shot(env.port, http_get(path, list(headers)), timeout=15)


def raw(env, data: bytes, timeout: float = 15) -> U.Resp:
    return U.one_shot(env.port, data, timeout=timeout)


def post(env, path: str, body: bytes = b"", headers: dict | None = None) -> U.Resp:
    lines = [f"POST {path} HTTP/1.1", "Host: gw.test", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return raw(env, ("\r\n".join(lines) + "\r\n\r\n").encode() + body)


def upstream_targets(env) -> list[str]:
    time.sleep(0.05)
    with env.up.lock:
        return [q.target for q in env.up.requests]


# ----------------------------------------------------------------------------------------------------------------
# Routing, parsing, limits, upstream failures


def test_routing_misses_and_parse_errors(env):
    check_local(get(env, "/nowhere"), 404)
    check_local(get(env, "/open/a%2Fb"), 400, "ambiguous_path")
    check_local(get(env, "/open/../../etc/passwd"), 400, "ambiguous_path")
    for bad in (b"BROKEN\r\n\r\n",
                b"GET /open HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello",
                b"GET /open HTTP/1.1\r\nHost: gw.test\r\nBad Header\r\n\r\n",
                b"GET /open HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
                b"GET /open HTTP/1.1\r\n\r\n"):
        r = raw(env, bad)
        check_local(r, 400, what=f"parse error {bad[:40]!r}")
    check_local(raw(env, b"GET /open HTTP/1.1\r\nHost: gw.test\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n"), 431)
    check_local(raw(env, b"GET /open HTTP/3.7\r\nHost: gw.test\r\n\r\n"), 505)
    assert not [t for t in upstream_targets(env) if t.startswith("/open")], "a refused request reached the upstream"


def test_body_too_large_timeouts_and_upstream_failures(env):
    check_local(post(env, "/small/x", b"x" * 200), 413, "body_too_large")
    check_local(get(env, "/dead/x"), 502)
    t0 = time.monotonic()
    check_local(get(env, "/slow/x"), 504, "upstream_timeout")
    assert time.monotonic() - t0 < 3, "504 only after the slow upstream answered"
    with U.Conn(env.port, timeout=10) as c:           # header_timeout 1s: half a head, then nothing
        c.send(b"GET /open/partial HTTP/1.1\r\nHost: gw")
        check_local(c.response(), 408, "header_timeout")


# ----------------------------------------------------------------------------------------------------------------
# Verification rejections


def test_app_check_rejections(env):
    check_401(get(env, "/ac/x"), "missing_token", ["AppCheck"])
    check_401(get(env, "/ac/x", [(H, "not.a.jwt")]), "malformed_token", ["AppCheck"])
    check_401(get(env, "/ac/x", [(H, env.iss.token(expired=True))]), "expired", ["AppCheck"])
    check_local(get(env, "/acapp/x", [(H, env.iss.token())]), 403, "app_not_allowed")
    deadline = time.monotonic() + 10
    while True:                                         # its JWKS URL has nothing behind it
        r = get(env, "/acdead/x", [(H, env.iss.token())])
        if r.status == 503 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    check_local(r, 503, "jwks_unavailable")


def test_app_attest_rejections_name_app_attest_only(env):
    dev = env.device
    made_up = {"X-App-Attest-Key-Id": base64.b64encode(os.urandom(32)).decode(),
               "X-App-Attest-Assertion": base64.b64encode(os.urandom(150)).decode(),
               "X-App-Attest-Timestamp": str(int(time.time()))}
    replayed = dev.assertions("GET", "/aa/r", b"")[0]
    assert get(env, "/aa/r", replayed.items()).status == 200
    cases = [
        ("/aa/x", {}, "missing_token"),
        ("/aa/x", dict(made_up, **{"X-App-Attest-Key-Id": "not-a-key-id"}), "malformed_token"),
        ("/aa/x", made_up, "unknown_key_id"),
        ("/aa/x", dev.assertions("GET", "/aa/elsewhere", b"")[0], "bad_assertion"),
        ("/aa/r", replayed, "counter_not_increasing"),
        ("/aa/x", dev.assertions("GET", "/aa/x", b"", timestamp=int(time.time()) - 600)[0], "stale_timestamp"),
        # any-of [fb, aa] with only App Attest headers, which fail: the App Attest verifier decided.
        ("/mix/x", made_up, "unknown_key_id"),
        ("/mix/x", dev.assertions("GET", "/mix/elsewhere", b"")[0], "bad_assertion"),
    ]
    for path, headers, reason in cases:
        r = get(env, path, headers.items())
        check_401(r, reason, ["AppAttest"], what=f"{path} {reason}")
        assert "AppCheck" not in r.one("www-authenticate"), r.headers
    # Nothing at all on the any-of route: both verifiers' schemes are offered (no verifier failed).
    r = get(env, "/mix/x")
    check_401(r, "missing_token", ["AppCheck", "AppAttest"])
    assert [t for t in upstream_targets(env) if t.startswith(("/aa", "/mix"))] == ["/aa/r"]


def test_require_all_missing_app_attest_names_app_attest_only(env):
    """require_all [fb, aa]: the App Check token passed, the App Attest headers are missing — the verifier that
    failed is App Attest, so the challenge must not ask for App Check again."""
    r = get(env, "/all/x", [(H, env.iss.token())])
    check_local(r, 401, "missing_token")
    assert challenges(r) == [("AppAttest", "missing_token")], \
        f"an App Attest rejection carries {r.one('www-authenticate')!r}"


def test_device_check_rejections(env):
    check_401(get(env, "/dc/x"), "missing_token", ["DeviceCheck"])
    check_401(get(env, "/dc/x", [(H_DC, "bad-la-1")]), "device_check_failed", ["DeviceCheck"])
    check_local(get(env, "/dc/x", [(H_DC, "down-la-1")]), 503, "device_check_unavailable")
    assert not [t for t in upstream_targets(env) if t.startswith("/dc")]


# ----------------------------------------------------------------------------------------------------------------
# Registration and forward-auth answers


def test_registration_answers(env):
    r = post(env, REG + "/challenge")
    check_local(r, 200)
    assert set(r.json()) == {"challenge", "expires_in"}
    assert r.one("cache-control") == "no-store"
    d = Device(env.bin, env.ca, env.tmp / "reg-device")
    c = challenge(env.port)
    body = json.dumps(d.attest_body(c)).encode()
    r = post(env, REG + "/attest", body, {"Content-Type": "application/json"})
    check_local(r, 201)
    assert r.json()["keyId"] == d.key_id
    check_local(post(env, REG + "/attest", body), 401, "challenge_unknown")          # the challenge is spent
    check_local(post(env, REG + "/attest", b"not json"), 400, "malformed_token")
    other = Device(env.bin, env.ca, env.tmp / "reg-other", team="OTHERTEAM1")
    check_local(post(env, REG + "/attest", json.dumps(other.attest_body(challenge(env.port))).encode()), 403,
                "app_not_allowed")
    r = raw(env, f"GET {REG}/challenge HTTP/1.1\r\nHost: gw.test\r\n\r\n".encode())
    check_local(r, 405)
    assert r.one("allow") == "POST"
    for r in (post(env, REG + "/attest", body), post(env, REG + "/attest", b"not json")):
        assert r.get("www-authenticate") == [], "registration is not an authentication challenge"


def test_forward_auth_answers(env):
    r = get(env, VERIFY + "/ac/fa", [(H, env.iss.token())])                        # Envoy's layout
    check_local(r, 200)
    assert r.json() == {"verdict": "verified"} and r.one("x-attest-verdict") == "verified"
    r = get(env, VERIFY, [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/ac/fa"), (H, env.iss.token())])
    check_local(r, 200)
    check_401(get(env, VERIFY, [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/ac/fa")]), "missing_token",
              ["AppCheck"])
    check_local(get(env, VERIFY, [(H, env.iss.token())]), 400, "forward_auth_target_missing")
    check_local(get(env, VERIFY + "/nowhere"), 404)
    assert not [t for t in upstream_targets(env) if "/fa" in t], "forward-auth forwarded a request"


# ----------------------------------------------------------------------------------------------------------------
# The same over h2c


def test_local_answers_over_h2(env):
    from test_http2 import H2

    c = H2(env.port)
    try:
        def check(st, status, reason=None, schemes=None):
            assert st.status == status, st.describe()
            dates = st.get("date")
            assert len(dates) == 1, st.describe()
            check_date(dates[0], f"h2 {status} {reason}")
            assert (st.one("content-type") or "").startswith("application/json"), st.describe()
            doc = st.json()
            if status in ERROR_BY_STATUS:
                assert doc["error"] == ERROR_BY_STATUS[status], doc
            if reason:
                assert doc["reason"] == reason, doc
            got = st.get("www-authenticate")
            if schemes is None:
                assert got == [], st.describe()
            else:
                assert got == [", ".join(f'{s} realm="attest-gateway", error="{reason}"' for s in schemes)], got

        check(c.get("/nowhere"), 404)
        check(c.get("/open/a%2Fb"), 400, "ambiguous_path")
        check(c.get("/ac/x"), 401, "missing_token", ["AppCheck"])
        check(c.get("/ac/x", [(H.lower(), env.iss.token(expired=True))]), 401, "expired", ["AppCheck"])
        check(c.get("/acapp/x", [(H.lower(), env.iss.token())]), 403, "app_not_allowed")
        check(c.get("/aa/x"), 401, "missing_token", ["AppAttest"])
        made_up = [("x-app-attest-key-id", base64.b64encode(os.urandom(32)).decode()),
                   ("x-app-attest-assertion", base64.b64encode(os.urandom(150)).decode()),
                   ("x-app-attest-timestamp", str(int(time.time())))]
        check(c.get("/aa/x", made_up), 401, "unknown_key_id", ["AppAttest"])
        check(c.get("/dc/x", [(H_DC.lower(), "bad-h2-1")]), 401, "device_check_failed", ["DeviceCheck"])
        check(c.get("/dead/x"), 502)
        st = c.response(c.request("POST", "/small/x", [("content-length", "200")], b"x" * 200))
        check(st, 413, "body_too_large")
        st = c.response(c.request("POST", REG + "/challenge", [("content-length", "0")], None))
        assert st.status == 200, st.describe()
        check_date(st.one("date"), "h2 registration challenge")
    finally:
        c.close()
