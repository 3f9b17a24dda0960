"""App Attest fraud metric end to end: the real gateway, a local HTTPS stand-in for Apple's App Attest data server
(test CA), receipts minted by the simulated Apple: the ATTEST receipt exchanged at once, the risk metric reaching the
upstream, `max_risk_metric` (enforced and monitor), and 304 / 404 / 429 handled."""

from __future__ import annotations

import json
import subprocess
import time
from types import SimpleNamespace

import pytest

from apple_fakes import FakeAppAttestData, make_p8, make_tls
from harness import free_port, gateway_config
from test_app_attest import APP_ID, BUNDLE, REG, TEAM, Device, ca_dir, challenge, outcome, post, register

FRAUD_KEY = "FRAUDKEY01"


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def env(factory, dev_bin, tmp_path):
    ca, root = ca_dir(dev_bin, tmp_path)
    tls = make_tls(tmp_path / "tls")
    p8 = make_p8(tmp_path / "AuthKey.p8")
    public = subprocess.run(["openssl", "pkey", "-in", str(p8), "-pubout"], capture_output=True, check=True).stdout
    apple = FakeAppAttestData(tls, FRAUD_KEY, TEAM, public, dev_bin, ca, tmp_path / "apple")
    factory.items.append(apple)
    up = factory.upstream(name="fm-up")
    verifier = {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "root_ca": str(root), "max_skew": "60s",
                "receipt_root_ca": str(ca / "receipt-root.pem"),
                "fraud_metric": {"key_id": FRAUD_KEY, "private_key": str(p8), "base_url": apple.url,
                                 "ca_file": str(tls.ca), "refresh_interval": "2s", "timeout": "5s"}}
    routes = [{"name": "mon", "match": {"path_prefix": "/mon"}, "upstream": "up", "verify": ["aa"], "mode": "monitor",
               "max_risk_metric": 5},
              {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "up", "verify": ["aa"], "max_risk_metric": 5}]
    port = free_port()
    gw = factory.gateway(gateway_config(port, {"up": up.url}, routes=routes, verifiers={"aa": verifier},
                                        state={"backend": "sqlite", "path": str(tmp_path / "fm.db")}))
    device = Device(dev_bin, ca, tmp_path / "device")
    return SimpleNamespace(gw=gw, up=up, apple=apple, device=device)


def call(env, path: str) -> tuple:
    h = env.device.assertions("GET", path, b"")[0]
    lines = [f"GET {path} HTTP/1.1", "Host: gw.test", "Connection: close"] + [f"{k}: {v}" for k, v in h.items()]
    import upstreams as U
    r = U.one_shot(env.gw.port, ("\r\n".join(lines) + "\r\n\r\n").encode())
    assert r is not None
    return outcome(r)


def seen(env, path: str):
    with env.up.lock:
        return [q for q in env.up.requests if q.target == path][-1]


def test_the_risk_metric_is_refreshed_forwarded_and_enforced(env):
    env.apple.mode = ("200", 3)
    register(env.gw.port, env.device)
    wait_for(lambda: env.apple.count() >= 1, 10, "the ATTEST receipt was not exchanged at once")
    assert env.apple.calls[0]["problem"] is None            # ES256 JWT, no Bearer, kid and iss right
    wait_for(lambda: call(env, "/api/a") == (200, None) and seen(env, "/api/a").one("x-attest-risk-metric") == "3",
             10, "the risk metric never reached the upstream")
    # Apple's metric rises above the route's max_risk_metric (5): refreshed after refresh_interval (2 s).
    env.apple.mode = ("200", 9)
    wait_for(lambda: call(env, "/api/b") == (403, "risk_too_high"), 15, "max_risk_metric not enforced after refresh")
    assert call(env, "/mon/c") == (200, None)               # monitor: forwarded with the verdict
    q = seen(env, "/mon/c")
    assert (q.one("x-attest-verdict"), q.one("x-attest-reason")) == ("failed", "risk_too_high")


def test_304_keeps_and_404_429_back_off(env):
    env.apple.mode = ("200", 2)
    register(env.gw.port, env.device)
    wait_for(lambda: env.apple.count() >= 1, 10, "no exchange")
    env.apple.mode = ("304",)
    call(env, "/api/x")
    wait_for(lambda: env.apple.count() >= 2, 10, "no refresh after refresh_interval")
    time.sleep(2.5)
    assert call(env, "/api/y") == (200, None) and seen(env, "/api/y").one("x-attest-risk-metric") == "2"   # kept
    # 404: the key backs off (60 s first), keeping its metric.
    env.apple.mode = ("404",)
    before = env.apple.count()
    wait_for(lambda: env.apple.count() > before, 10, "no call to see the 404")
    after_failure = env.apple.count()
    time.sleep(3.5)                                          # > refresh_interval, < the 60 s first back-off
    assert env.apple.count() == after_failure, "404 did not back off"
    assert call(env, "/api/z") == (200, None) and seen(env, "/api/z").one("x-attest-risk-metric") == "2"
    # 429 on a new key's ATTEST exchange: tried once, then backs off; no metric yet, and none is required.
    env.apple.mode = ("429",)
    other = Device(env.device.binary, env.device.ca_dir, env.device.home.parent / "device2")
    register(env.gw.port, other)
    wait_for(lambda: env.apple.count() > after_failure, 10, "the new key's receipt was not sent")
    n = env.apple.count()
    time.sleep(3.5)
    assert env.apple.count() == n, "429 did not back off"
    h = other.assertions("GET", "/api/new", b"")[0]
    import upstreams as U
    lines = ["GET /api/new HTTP/1.1", "Host: gw.test", "Connection: close"] + [f"{k}: {v}" for k, v in h.items()]
    assert outcome(U.one_shot(env.gw.port, ("\r\n".join(lines) + "\r\n\r\n").encode())) == (200, None)
    assert seen(env, "/api/new").one("x-attest-risk-metric") is None


def test_a_risk_metric_over_the_limit_is_forwarded_on_monitor_and_refused_on_enforce(env):
    """Apple's receipt says 9 (max_risk_metric 5): the enforce route answers 403 risk_too_high and the upstream never
    sees it; the monitor route forwards with the failed verdict, the reason and the metric that would have refused
    it."""
    import upstreams as U
    from harness import assert_json_error

    env.apple.mode = ("200", 9)
    register(env.gw.port, env.device)
    wait_for(lambda: env.apple.count() >= 1, 10, "the ATTEST receipt was not exchanged at once")
    wait_for(lambda: call(env, "/api/risky") == (403, "risk_too_high"), 15, "max_risk_metric not enforced")
    # Until the receipt's answer is stored the key has no metric, and requests go through (none is required yet):
    # the enforce route must refuse every request from the first 403 on.
    enforced_since = time.monotonic()
    h = env.device.assertions("GET", "/api/risky2", b"")[0]
    lines = ["GET /api/risky2 HTTP/1.1", "Host: gw.test", "Connection: close"] + [f"{k}: {v}" for k, v in h.items()]
    r = U.one_shot(env.gw.port, ("\r\n".join(lines) + "\r\n\r\n").encode())
    doc = assert_json_error(r, 403)
    assert doc == {"error": "forbidden", "reason": "risk_too_high"}, doc
    assert r.get("www-authenticate") == [], "a 403 carries no authentication challenge"
    with env.up.lock:
        assert not [q for q in env.up.requests if q.target.startswith("/api/risky2")
                    or (q.target.startswith("/api/risky") and q.received_at >= enforced_since)], \
            "a refused request was forwarded"

    assert call(env, "/mon/risky") == (200, None)
    q = seen(env, "/mon/risky")
    assert q.one("x-attest-verdict") == "failed", q.headers
    assert q.one("x-attest-reason") == "risk_too_high", q.headers
    assert q.get("x-attest-risk-metric") == ["9"], q.headers
    assert q.get("x-attest-verifier") == ["aa"], q.headers
    for name in ("x-app-attest-assertion", "x-app-attest-key-id", "x-app-attest-timestamp"):
        assert q.get(name) == [], name
    # A client cannot plant its own metric or verdict: X-Attest-* from the client are removed.
    h = env.device.assertions("GET", "/mon/planted", b"")[0]
    lines = ["GET /mon/planted HTTP/1.1", "Host: gw.test", "Connection: close", "X-Attest-Risk-Metric: 0",
             "X-Attest-Verdict: verified"] + [f"{k}: {v}" for k, v in h.items()]
    assert U.one_shot(env.gw.port, ("\r\n".join(lines) + "\r\n\r\n").encode()).status == 200
    q = seen(env, "/mon/planted")
    assert q.get("x-attest-risk-metric") == ["9"] and q.get("x-attest-verdict") == ["failed"], q.headers


def test_a_risk_metric_within_the_limit_is_forwarded_on_monitor_as_verified(env):
    env.apple.mode = ("200", 4)
    register(env.gw.port, env.device)
    wait_for(lambda: call(env, "/mon/ok") == (200, None) and seen(env, "/mon/ok").one("x-attest-risk-metric") == "4",
             15, "the risk metric never reached the upstream on the monitor route")
    q = seen(env, "/mon/ok")
    assert q.one("x-attest-verdict") == "verified" and q.get("x-attest-reason") == [], q.headers
