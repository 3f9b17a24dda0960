"""Limited use: every presented credential counts (PROTOCOL.md Additions, "Limited use"). The real gateway, two real
`attest-gateway-dev issuer` processes (two Firebase projects), a simulated App Attest device registered with the
gateway, the local HTTPS stand-in for Apple's DeviceCheck API and a recording upstream. Each test tries to walk a
spent credential past the replay check alongside a fresh one, and counts what the upstream saw.

Routes (one gateway, SQLite state):
  /all-aa  verify [fb, aa]  require_all, limited_use   App Check jti + a fresh App Attest assertion
  /all-fb  verify [fb, fb2] require_all, limited_use   two App Check verifiers, two projects, two headers
  /any-dc  verify [fb, dc]  any-of, limited_use        the first passing credential is consumed, only that one
  /dc-lu   verify [dc]      limited_use                each DeviceCheck token accepted once
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from apple_fakes import FakeDeviceCheck, make_p8, make_tls
from harness import app_check_verifier, assert_json_error, free_port, gateway_config, http_get, wait_gateway_accepts
from test_app_attest import BUNDLE, REG, TEAM, Device, ca_dir, register

pytestmark = pytest.mark.timeout_s(60)

H_A = "X-Firebase-AppCheck"
H_B = "X-Firebase-AppCheck-B"
H_DC = "X-Apple-DeviceCheck"
PROJECT_B = "210987654321"
DC_TEAM = "TEAMDC1234"
DC_KEY = "KEYDC12345"


class SwitchableDeviceCheck(FakeDeviceCheck):
    """FakeDeviceCheck whose answer for a given device token can be forced: `overrides[token] = (status, body)`."""

    def __init__(self, *args, **kw):
        self.overrides: dict[str, tuple[int, bytes]] = {}
        super().__init__(*args, **kw)

    def handle(self, path: str, authorization: str, body: bytes):
        try:
            token = json.loads(body).get("device_token")
        except ValueError:
            token = None
        with self.lock:
            forced = self.overrides.get(token)
            if forced is not None:
                self.calls.append({"path": path, "token": token, "body": {}, "authorization": authorization})
        if forced is not None:
            return forced
        return super().handle(path, authorization, body)


@pytest.fixture(scope="module")
def env(module_factory, dev_bin):
    tmp = module_factory.tmp
    iss_a = module_factory.dev_issuer()
    iss_b = module_factory.dev_issuer(project_number=PROJECT_B, project_id="other-project")
    ca, root = ca_dir(dev_bin, tmp)
    tls = make_tls(tmp / "tls")
    p8 = make_p8(tmp / "AuthKey.p8")
    public = subprocess.run(["openssl", "pkey", "-in", str(p8), "-pubout"], capture_output=True, check=True).stdout
    apple = SwitchableDeviceCheck(tls, DC_KEY, DC_TEAM, public)
    module_factory.items.append(apple)
    up = module_factory.upstream(name="cc-up")
    verifiers = {
        "fb": app_check_verifier(iss_a.jwks_url),
        "fb2": app_check_verifier(iss_b.jwks_url, project_number=PROJECT_B, project_id="other-project", header=H_B),
        "aa": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "root_ca": str(root),
               "binding": "request", "max_skew": "60s", "registration_path": REG},
        "dc": {"type": "device_check", "team_id": DC_TEAM, "key_id": DC_KEY, "private_key": str(p8),
               "environment": "development", "base_url": apple.url, "ca_file": str(tls.ca), "timeout": "3s"},
    }
    routes = [
        {"name": "ready-a", "match": {"path_prefix": "/ready-a"}, "upstream": "up", "verify": ["fb"]},
        {"name": "ready-b", "match": {"path_prefix": "/ready-b"}, "upstream": "up", "verify": ["fb2"]},
        {"name": "all-aa", "match": {"path_prefix": "/all-aa"}, "upstream": "up", "verify": ["fb", "aa"],
         "require_all": True, "limited_use": True},
        {"name": "all-fb", "match": {"path_prefix": "/all-fb"}, "upstream": "up", "verify": ["fb", "fb2"],
         "require_all": True, "limited_use": True},
        {"name": "any-dc", "match": {"path_prefix": "/any-dc"}, "upstream": "up", "verify": ["fb", "dc"],
         "limited_use": True},
        {"name": "dc-lu", "match": {"path_prefix": "/dc-lu"}, "upstream": "up", "verify": ["dc"], "limited_use": True},
    ]
    port = free_port()
    gw = module_factory.gateway(gateway_config(port, {"up": up.url}, routes=routes, verifiers=verifiers,
                                               state={"backend": "sqlite", "path": str(tmp / "cc.db")}))
    wait_gateway_accepts(port, "/ready-a", H_A, iss_a.token())
    wait_gateway_accepts(port, "/ready-b", H_B, iss_b.token())
    device = Device(dev_bin, ca, tmp / "device")
    register(port, device)
    return SimpleNamespace(gw=gw, up=up, iss_a=iss_a, iss_b=iss_b, apple=apple, device=device)


# ----------------------------------------------------------------------------------------------------------------
# Helpers


def outcome(r: U.Resp | None) -> tuple:
    """(status, reason, WWW-Authenticate schemes joined by "+", or None); reason None for 200. The JSON error shape
    and `error` by status are asserted for every rejection, and a 401's challenges all carry its reason."""
    assert r is not None, "the gateway closed the connection without a response"
    if r.status == 200:
        return (200, None, None)
    doc = assert_json_error(r, r.status)
    expected = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 503: "unavailable"}.get(r.status)
    assert expected is None or doc["error"] == expected, f"{r.status} with error {doc['error']!r}: {r.body!r}"
    scheme = None
    if r.status == 401:
        challenges = r.get("www-authenticate")
        assert len(challenges) == 1, f"401 {doc['reason']}: WWW-Authenticate {challenges}"
        schemes = re.findall(r'(?:^|, )([A-Za-z]+) realm="attest-gateway", error="([a-z_]+)"', challenges[0])
        assert schemes and all(e == doc["reason"] for _, e in schemes), challenges
        assert ", ".join(f'{s} realm="attest-gateway", error="{e}"' for s, e in schemes) == challenges[0], challenges
        scheme = "+".join(s for s, _ in schemes)
    return (r.status, doc["reason"], scheme)


def send(env, path: str, headers: list[tuple[str, str]]) -> tuple:
    return outcome(U.one_shot(env.gw.port, http_get(path, headers), timeout=20))


def seen(env, prefix: str) -> list:
    time.sleep(0.05)   # the upstream records a request as it reads it: let a just-answered one land
    with env.up.lock:
        return [q for q in env.up.requests if q.target.startswith(prefix)]


def aa_headers(env, path: str) -> list[tuple[str, str]]:
    """A fresh assertion (the next counter) for GET path with an empty body."""
    return list(env.device.assertions("GET", path, b"")[0].items())


def lu(iss) -> str:
    return iss.token(limited_use=True)


def together(env, requests: list[tuple[str, list]], timeout: float = 20.0) -> list:
    """One connection per request, all sent at once (after a barrier); outcome() of each, or "error: ..."."""
    n = len(requests)
    barrier = threading.Barrier(n, timeout=15)
    results: list = [None] * n

    def worker(i: int) -> None:
        path, headers = requests[i]
        try:
            conn = U.Conn(env.gw.port, timeout=timeout)
        except OSError as e:
            results[i] = f"error: connect: {e}"
            barrier.abort()
            return
        try:
            barrier.wait()
            results[i] = outcome(conn.request(http_get(path, headers)))
        except Exception as e:  # noqa: BLE001
            results[i] = f"error: {type(e).__name__}: {e}"
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 20)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    return results


def tally(results: list) -> dict:
    out: dict = {}
    for r in results:
        out[r] = out.get(r, 0) + 1
    return out


# ----------------------------------------------------------------------------------------------------------------
# (a) require_all: App Check (limited use) + App Attest


def test_require_all_app_check_and_app_attest_consumes_the_jti(env):
    tok = lu(env.iss_a)
    assert send(env, "/all-aa/1", [(H_A, tok), *aa_headers(env, "/all-aa/1")]) == (200, None, None)
    # The same App Check token with a new, valid assertion: the assertion passes, the spent jti does not.
    assert send(env, "/all-aa/2", [(H_A, tok), *aa_headers(env, "/all-aa/2")]) == (401, "token_replayed", "AppCheck")
    assert send(env, "/all-aa/3", [(H_A, tok), *aa_headers(env, "/all-aa/3")]) == (401, "token_replayed", "AppCheck")
    reqs = seen(env, "/all-aa")
    assert [q.target for q in reqs] == ["/all-aa/1"], [q.target for q in reqs]
    q = reqs[0]
    assert q.one("x-attest-verdict") == "verified" and q.get(H_A) == [], q.headers
    assert q.get("x-app-attest-assertion") == [], "App Attest token header reached the upstream"


def test_require_all_a_failing_second_credential_burns_nothing(env):
    """The jti is consumed only once every verifier has passed: a request whose assertion is missing or wrong
    leaves the App Check token usable."""
    tok = lu(env.iss_a)
    before = len(seen(env, "/all-aa"))
    # App Attest missing: require_all refuses (missing token), App Check's jti untouched.
    status, reason, schemes = send(env, "/all-aa/m", [(H_A, tok)])
    assert (status, reason) == (401, "missing_token") and "AppAttest" in schemes.split("+"), (status, reason, schemes)
    print(f"\nrequire_all [fb, aa], App Attest missing: WWW-Authenticate schemes {schemes}")
    # An assertion for another path: bad_assertion, the jti still untouched.
    wrong = aa_headers(env, "/all-aa/elsewhere")
    assert send(env, "/all-aa/w", [(H_A, tok), *wrong]) == (401, "bad_assertion", "AppAttest")
    # App Check missing (a valid assertion alone): refused as well.
    assert send(env, "/all-aa/n", aa_headers(env, "/all-aa/n"))[:2] == (401, "missing_token")
    assert len(seen(env, "/all-aa")) == before, "a request without every credential reached the upstream"
    # Now both, valid: passes once; then the jti is spent.
    assert send(env, "/all-aa/ok", [(H_A, tok), *aa_headers(env, "/all-aa/ok")]) == (200, None, None)
    assert send(env, "/all-aa/ok2", [(H_A, tok), *aa_headers(env, "/all-aa/ok2")]) == \
        (401, "token_replayed", "AppCheck")
    assert [q.target for q in seen(env, "/all-aa")[before:]] == ["/all-aa/ok"]


def test_require_all_two_app_check_verifiers_consume_both_jtis(env):
    ta, tb = lu(env.iss_a), lu(env.iss_b)
    assert send(env, "/all-fb/1", [(H_A, ta), (H_B, tb)]) == (200, None, None)
    # Reusing either one, with a fresh other, fails.
    assert send(env, "/all-fb/2", [(H_A, ta), (H_B, lu(env.iss_b))]) == (401, "token_replayed", "AppCheck")
    assert send(env, "/all-fb/3", [(H_A, lu(env.iss_a)), (H_B, tb)]) == (401, "token_replayed", "AppCheck")
    assert send(env, "/all-fb/4", [(H_A, ta), (H_B, tb)]) == (401, "token_replayed", "AppCheck")
    reqs = seen(env, "/all-fb")
    assert [q.target for q in reqs] == ["/all-fb/1"], [q.target for q in reqs]
    assert reqs[0].get(H_A) == [] and reqs[0].get(H_B) == [], reqs[0].headers
    # Each token is single-use on its own too: a fresh pair passes, and the fresh pair again does not.
    ta2, tb2 = lu(env.iss_a), lu(env.iss_b)
    assert send(env, "/all-fb/5", [(H_A, ta2), (H_B, tb2)]) == (200, None, None)
    assert send(env, "/all-fb/6", [(H_A, ta2), (H_B, tb2)]) == (401, "token_replayed", "AppCheck")
    assert [q.target for q in seen(env, "/all-fb")] == ["/all-fb/1", "/all-fb/5"]


def test_require_all_one_token_without_jti_is_missing_jti(env):
    """require_all + limited_use: the second App Check token must be limited-use too."""
    assert send(env, "/all-fb/nojti", [(H_A, lu(env.iss_a)), (H_B, env.iss_b.token())])[:2] == (401, "missing_jti")
    assert not [q for q in seen(env, "/all-fb") if q.target == "/all-fb/nojti"]


def test_require_all_concurrent_reuse_of_one_jti_passes_once(env):
    """16 concurrent requests, each with a fresh project-B token but the same project-A token: one passes."""
    ta = lu(env.iss_a)
    before = len(seen(env, "/all-fb"))
    results = together(env, [(f"/all-fb/c{i}", [(H_A, ta), (H_B, lu(env.iss_b))]) for i in range(16)])
    t = tally(results)
    assert t == {(200, None, None): 1, (401, "token_replayed", "AppCheck"): 15}, t
    assert len(seen(env, "/all-fb")) - before == 1


# ----------------------------------------------------------------------------------------------------------------
# (b) any-of [fb, dc], limited use: the first passing credential is consumed (and only that one)


def test_any_of_consumes_the_first_passing_credential(env):
    tok = lu(env.iss_a)
    assert send(env, "/any-dc/1", [(H_A, tok), (H_DC, "ok-any-1")]) == (200, None, None)
    q = seen(env, "/any-dc/1")[-1]
    assert q.one("x-attest-verifier") == "fb", q.headers
    assert env.apple.count("/v1/validate_device_token", "ok-any-1") == 0, "DeviceCheck ran after App Check passed"
    # The spent App Check token, a fresh device token beside it: App Check decides (and is replayed).
    assert send(env, "/any-dc/2", [(H_A, tok), (H_DC, "ok-any-2")]) == (401, "token_replayed", "AppCheck")
    # The device token of the first request did not run, so it was not consumed: it passes alone, once.
    assert send(env, "/any-dc/3", [(H_DC, "ok-any-1")]) == (200, None, None)
    assert seen(env, "/any-dc/3")[-1].one("x-attest-verifier") == "dc"
    assert send(env, "/any-dc/4", [(H_DC, "ok-any-1")]) == (401, "token_replayed", "DeviceCheck")
    # App Check fails (expired), DeviceCheck passes: the device token is what is consumed.
    assert send(env, "/any-dc/5", [(H_A, env.iss_a.token(expired=True)), (H_DC, "ok-any-5")]) == (200, None, None)
    assert seen(env, "/any-dc/5")[-1].one("x-attest-verifier") == "dc"
    assert send(env, "/any-dc/6", [(H_A, env.iss_a.token(expired=True)), (H_DC, "ok-any-5")]) == \
        (401, "token_replayed", "DeviceCheck")
    assert send(env, "/any-dc/7", [(H_DC, "ok-any-5")]) == (401, "token_replayed", "DeviceCheck")
    # A fresh App Check token still passes beside the spent device token (App Check decides first).
    assert send(env, "/any-dc/8", [(H_A, lu(env.iss_a)), (H_DC, "ok-any-5")]) == (200, None, None)
    assert [q.target for q in seen(env, "/any-dc")] == ["/any-dc/1", "/any-dc/3", "/any-dc/5", "/any-dc/8"]
    for q in seen(env, "/any-dc"):
        assert q.get(H_A) == [] and q.get(H_DC) == [], q.headers


# ----------------------------------------------------------------------------------------------------------------
# (c) limited use on a device_check route


def test_device_token_accepted_once(env):
    assert send(env, "/dc-lu/1", [(H_DC, "ok-lu-1")]) == (200, None, None)
    assert send(env, "/dc-lu/2", [(H_DC, "ok-lu-1")]) == (401, "token_replayed", "DeviceCheck")
    assert send(env, "/dc-lu/3", [(H_DC, "ok-lu-1")]) == (401, "token_replayed", "DeviceCheck")
    assert send(env, "/dc-lu/4", [(H_DC, "ok-lu-2")]) == (200, None, None)
    assert send(env, "/dc-lu/5", []) == (401, "missing_token", "DeviceCheck")
    reqs = seen(env, "/dc-lu")
    assert [q.target for q in reqs] == ["/dc-lu/1", "/dc-lu/4"], [q.target for q in reqs]
    for q in reqs:
        assert q.one("x-attest-verdict") == "verified" and q.one("x-attest-verifier") == "dc" and q.get(H_DC) == []


def test_a_token_apple_rejects_burns_nothing(env):
    token = "ok-flip-1"
    before = len(seen(env, "/dc-lu"))
    env.apple.overrides[token] = (400, b"Missing or incorrectly formatted device token payload")
    assert send(env, "/dc-lu/r1", [(H_DC, token)]) == (401, "device_check_failed", "DeviceCheck")
    assert send(env, "/dc-lu/r2", [(H_DC, token)]) == (401, "device_check_failed", "DeviceCheck")
    env.apple.overrides[token] = (429, b"Too many requests")               # Apple unavailable: not consumed either
    assert send(env, "/dc-lu/r3", [(H_DC, token)])[:2] == (503, "device_check_unavailable")
    assert len(seen(env, "/dc-lu")) == before, "a token Apple did not accept reached the upstream"
    del env.apple.overrides[token]                                         # Apple now says valid
    assert send(env, "/dc-lu/r4", [(H_DC, token)]) == (200, None, None)
    assert send(env, "/dc-lu/r5", [(H_DC, token)]) == (401, "token_replayed", "DeviceCheck")
    assert [q.target for q in seen(env, "/dc-lu")[before:]] == ["/dc-lu/r4"]


def test_sixteen_concurrent_requests_with_one_device_token_pass_once(env):
    before = len(seen(env, "/dc-lu"))
    for rnd in range(2):
        token = f"ok-conc-{rnd}"
        results = together(env, [(f"/dc-lu/c{rnd}-{i}", [(H_DC, token)]) for i in range(16)])
        t = tally(results)
        assert t == {(200, None, None): 1, (401, "token_replayed", "DeviceCheck"): 15}, f"round {rnd}: {t}"
    assert len(seen(env, "/dc-lu")) - before == 2
    assert env.gw.proc.poll() is None
    assert env.apple.auth_problems == []
