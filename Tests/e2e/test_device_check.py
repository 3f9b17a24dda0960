"""DeviceCheck end to end: the real gateway against a local HTTPS stand-in for Apple's DeviceCheck API (test CA via
`ca_file`): valid, invalid, rate-limited and failing device tokens; the bit0 subject binding; the ES256 auth token;
and a slow Apple never holding up unrelated routes."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from apple_fakes import FakeDeviceCheck, make_p8, make_tls
from harness import assert_json_error, free_port, gateway_config, http_get

TEAM = "TEAMDC1234"
KEY_ID = "KEYDC12345"
H = "X-Apple-DeviceCheck"
SUBJECT = "X-User-Hash"


@pytest.fixture(scope="module")
def env(module_factory):
    tmp = module_factory.tmp
    tls = make_tls(tmp / "tls")
    p8 = make_p8(tmp / "AuthKey.p8")
    public = subprocess.run(["openssl", "pkey", "-in", str(p8), "-pubout"], capture_output=True, check=True).stdout
    apple = FakeDeviceCheck(tls, KEY_ID, TEAM, public)
    module_factory.items.append(apple)
    up = module_factory.upstream(name="dc-up")
    base = {"type": "device_check", "team_id": TEAM, "key_id": KEY_ID, "private_key": str(p8),
            "environment": "development", "base_url": apple.url, "ca_file": str(tls.ca), "timeout": "3s"}
    verifiers = {"dc": dict(base), "dcb": dict(base, subject_binding={"header": SUBJECT})}
    routes = [
        {"name": "bind", "match": {"path_prefix": "/bind"}, "upstream": "up", "verify": ["dcb"]},
        {"name": "mon", "match": {"path_prefix": "/mon"}, "upstream": "up", "verify": ["dc"], "mode": "monitor"},
        {"name": "dc", "match": {"path_prefix": "/dc"}, "upstream": "up", "verify": ["dc"]},
        {"name": "open", "match": {"path_prefix": "/open"}, "upstream": "up", "verify": []},
    ]
    port = free_port()
    gw = module_factory.gateway(gateway_config(port, {"up": up.url}, routes=routes, verifiers=verifiers,
                                               state={"backend": "sqlite", "path": str(tmp / "dc.db")}))
    return SimpleNamespace(gw=gw, up=up, apple=apple)


def send(env, path: str, headers: list) -> tuple:
    r = U.one_shot(env.gw.port, http_get(path, headers), timeout=20)
    assert r is not None
    if r.status == 200:
        return (200, None)
    return (r.status, assert_json_error(r, r.status)["reason"])


def last(env, prefix: str):
    with env.up.lock:
        return [q for q in env.up.requests if q.target.startswith(prefix)][-1]


def test_valid_invalid_rate_limited_and_failing_tokens(env):
    assert send(env, "/dc/a", [(H, "ok-1")]) == (200, None)
    q = last(env, "/dc/a")
    assert q.one("x-attest-verdict") == "verified" and q.one("x-attest-verifier") == "dc"
    assert q.get(H.lower()) == [] and q.get("x-attest-app-id") == []
    assert send(env, "/dc/b", [(H, "bad-1")]) == (401, "device_check_failed")
    assert send(env, "/dc/c", [(H, "limit-1")]) == (503, "device_check_unavailable")
    assert env.apple.count("/v1/validate_device_token", "limit-1") == 2          # one retry
    assert send(env, "/dc/d", [(H, "down-1")]) == (503, "device_check_unavailable")
    assert send(env, "/dc/e", [(H, "flaky-1")]) == (200, None)                   # the retry succeeded
    assert send(env, "/dc/f", []) == (401, "missing_token")
    assert env.apple.auth_problems == []


def test_monitor_mode_forwards_an_unavailable_verdict(env):
    assert send(env, "/mon/x", [(H, "down-2")]) == (200, None)
    q = last(env, "/mon/x")
    assert q.one("x-attest-verdict") == "failed" and q.one("x-attest-reason") == "device_check_unavailable"


def test_the_auth_token_is_es256_and_reused(env):
    send(env, "/dc/t1", [(H, "ok-t1")])
    send(env, "/dc/t2", [(H, "ok-t2")])
    with env.apple.lock:
        tokens = {c["authorization"] for c in env.apple.calls}
    assert env.apple.auth_problems == []          # header, iss, iat and the ES256 signature all checked
    assert len(tokens) == 1                        # reused until 20 minutes old
    with env.apple.lock:
        bodies = [c["body"] for c in env.apple.calls]
    assert len({b["transaction_id"] for b in bodies}) == len(bodies)   # a fresh transaction id per call


def test_subject_binding_binds_the_first_subject_only(env):
    device = "ok-device-7"
    assert send(env, "/bind/x", [(H, device), (SUBJECT, "alice")]) == (200, None)
    q = last(env, "/bind/x")
    assert (q.one("x-attest-devicecheck-bit0"), q.one("x-attest-devicecheck-bit1")) == ("0", "0")
    assert q.one(SUBJECT.lower()) == "alice"                                     # forwarded unchanged
    assert env.apple.bits[device] == {"bit0": True, "bit1": False}
    assert send(env, "/bind/y", [(H, device), (SUBJECT, "alice")]) == (200, None)
    assert last(env, "/bind/y").one("x-attest-devicecheck-bit0") == "1"
    assert send(env, "/bind/z", [(H, device), (SUBJECT, "mallory")]) == (403, "unknown_subject")
    assert send(env, "/bind/z", [(H, device)]) == (401, "missing_subject")
    assert env.apple.count("/v1/update_two_bits", device) == 1


def test_a_slow_apple_does_not_hold_up_other_routes(env):
    """Six DeviceCheck requests wait 2 s each on Apple while 30 requests to an unverified route are timed."""
    results: list = []
    threads = [threading.Thread(target=lambda i=i: results.append(send(env, f"/dc/slow{i}", [(H, f"slow-{i}")])))
               for i in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    latencies = []
    for i in range(30):
        t0 = time.monotonic()
        assert send(env, f"/open/{i}", []) == (200, None)
        latencies.append(time.monotonic() - t0)
    for t in threads:
        t.join(30)
    assert results == [(200, None)] * 6
    latencies.sort()
    print(f"\nunrelated route while Apple is slow: median {latencies[15] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert latencies[-1] < 0.5, latencies
