"""Fault injection against the running binary: what a client sees while an upstream, the App Check key server or the
state store (Redis, SQLite) fails, and that the gateway recovers by itself — same process, no restart — without
giving back anything it had consumed (a limited-use token used before a fault stays used; an App Attest counter never
moves back).

Faults (real unless said otherwise):
- upstream: nothing listening, accepts and never answers, resets before / in the middle of its response, garbage;
- JWKS endpoint: nothing listening, stalls, answers garbage / an empty key set / 500 — at start-up, and as a failed
  refresh while a good set is loaded;
- Redis: killed (SIGKILL) and restarted on the same port with its append-only file (fsync always);
- SQLite: disk full (the state file on a 1 MiB tmpfs mounted for the test, filled up; skipped where mount is not
  permitted) and read-only (SIMULATED with `chattr +i` on the database and its WAL: writes fail with EPERM, also for
  root; a real `mount -o remount,ro` is refused with EBUSY while the gateway holds the file open for writing).

Every wait is bounded by a deadline and every loop by a count."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import app_check_verifier, assert_json_error, free_port, gateway_config, http_get
from test_app_attest import BUNDLE, REG, TEAM, Device, ca_dir

H = "X-Firebase-AppCheck"


# ----------------------------------------------------------------------------------------------------------------
# Helpers


def outcome(r: U.Resp | None) -> tuple:
    """(status, reason); reason None for 2xx; every gateway error is checked for the JSON shape."""
    assert r is not None, "the gateway closed the connection without a response"
    if r.status in (200, 201):
        return (r.status, None)
    return (r.status, assert_json_error(r, r.status).get("reason"))


def get(port: int, path: str, token: str | None = None, timeout: float = 10.0) -> tuple:
    return outcome(U.one_shot(port, http_get(path, [(H, token)] if token else []), timeout=timeout))


def post(port: int, path: str, body: bytes = b"", headers: dict | None = None, timeout: float = 10.0) -> tuple:
    lines = [f"POST {path} HTTP/1.1", "Host: gw.test", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return outcome(U.one_shot(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body, timeout=timeout))


def timed(fn, *args, **kw) -> tuple[tuple, float]:
    t0 = time.monotonic()
    got = fn(*args, **kw)
    return got, time.monotonic() - t0


def poll(fn, want, timeout: float, step: float = 0.2, what: str = "condition") -> tuple[float, int]:
    """Calls fn() until it returns want (at most timeout seconds and timeout/step + 1 calls); returns (seconds, calls)."""
    t0 = time.monotonic()
    seen = []
    for _ in range(int(timeout / step) + 1):
        seen.append(fn())
        if seen[-1] == want:
            return time.monotonic() - t0, len(seen)
        if time.monotonic() - t0 > timeout:
            break
        time.sleep(step)
    raise AssertionError(f"{what}: not {want} within {timeout}s; last answers {seen[-5:]}")


def targets(up, prefix: str = "/") -> list[str]:
    with up.lock:
        return [q.target for q in up.requests if q.target.startswith(prefix)]


def rst_close(sock: socket.socket) -> None:
    """Closes with a TCP reset (SO_LINGER 0) instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# ----------------------------------------------------------------------------------------------------------------
# 1. Upstream faults. One gateway (one loop, so one upstream pool), an App Check verifier with limited use on SQLite:
#    /lu/<fault> consumes a token, then meets the fault; /plain/<fault> has no verification.


class FaultyUpstream:
    """Dispatches on the last path segment: stall (never answers until released), reset-early (reset after reading
    the request), reset-mid (head and 1 KiB of a 100 KiB body, then a reset), garbage; anything else echoes."""

    def __init__(self):
        self.release = threading.Event()
        self.late_sent: list[str] = []

    def __call__(self, req: U.Req, ctx: U.Ctx) -> None:
        last = req.target.split("?", 1)[0].rsplit("/", 1)[-1]
        if last == "stall":
            self.release.wait(20)                                  # bounded: the test releases it much sooner
            try:                                                   # a late answer the gateway must never relay
                ctx.send(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nLATE")
                self.late_sent.append(req.target)
            except OSError:
                pass
            ctx.close = True
        elif last == "reset-early":
            rst_close(ctx.sock)
            ctx.close = True
        elif last == "reset-mid":
            ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 102400\r\n\r\n"
                     + b"x" * 1024)
            time.sleep(0.05)
            rst_close(ctx.sock)
            ctx.close = True
        elif last == "garbage":
            U.b_garbage(req, ctx)
        else:
            U.b_echo(req, ctx)


class Blackhole:
    """A listener whose accept queue (backlog 0) is already full and never drained: connects to it hang until the
    client gives up, as with a host that drops SYNs."""

    def __init__(self):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(0)
        self.port = self.lsock.getsockname()[1]
        self.filler = socket.create_connection(("127.0.0.1", self.port), timeout=2)

    def close(self) -> None:
        for s in (self.filler, self.lsock):
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture(scope="module")
def upf(module_factory):
    iss = module_factory.dev_issuer()
    faulty = FaultyUpstream()
    up = module_factory.upstream(faulty, name="faulty")
    # The black hole first: it binds port 0 and could otherwise be given the dead port that free_port has just
    # let go (the dead upstream then hangs instead of refusing). The gateway's port must not be that one either.
    blackhole = Blackhole()
    module_factory.items.append(blackhole)
    dead_port = free_port()                                        # nothing listens there (yet)
    gw_port = free_port()
    while gw_port == dead_port:
        gw_port = free_port()
    state = {"backend": "sqlite", "path": str(module_factory.tmp / "upf" / "state.db"), "timeout": "250ms"}
    ups = {"faulty": {"url": up.url, "response_timeout": "1s"},
           "dead": {"url": f"http://127.0.0.1:{dead_port}", "response_timeout": "1s"},
           "blackhole": {"url": f"http://127.0.0.1:{blackhole.port}", "connect_timeout": "500ms"}}
    routes = [
        {"name": "lu-dead", "match": {"path_prefix": "/lu/refused"}, "upstream": "dead", "verify": ["fb"],
         "limited_use": True},
        {"name": "lu-blackhole", "match": {"path_prefix": "/lu/connect-timeout"}, "upstream": "blackhole",
         "verify": ["fb"], "limited_use": True},
        {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "faulty", "verify": ["fb"], "limited_use": True},
        {"name": "refused", "match": {"path_prefix": "/plain/refused"}, "upstream": "dead", "verify": []},
        {"name": "blackhole", "match": {"path_prefix": "/plain/connect-timeout"}, "upstream": "blackhole",
         "verify": []},
        {"name": "plain", "match": {"path_prefix": "/"}, "upstream": "faulty", "verify": []},
    ]
    gw = module_factory.gateway(gateway_config(gw_port, ups, routes=routes, state=state,
                                               verifiers={"fb": app_check_verifier(iss.jwks_url)}), workers=1)
    poll(lambda: get(gw.port, "/lu/ready", iss.token(limited_use=True)), (200, None), 10, what="key set loaded")
    return SimpleNamespace(gw=gw, up=up, faulty=faulty, iss=iss, dead_port=dead_port, factory=module_factory)


UPSTREAM_FAULTS = [
    # fault, documented status and reason
    ("refused", 502, "upstream_unreachable"),
    ("connect-timeout", 502, "upstream_connect_timeout"),
    ("stall", 504, "upstream_timeout"),
    ("reset-early", 502, "upstream_closed"),
    ("garbage", 502, "upstream_invalid_response"),
]


@pytest.mark.timeout_s(30)
@pytest.mark.parametrize("fault,status,reason", UPSTREAM_FAULTS, ids=[f[0] for f in UPSTREAM_FAULTS])
def test_upstream_fault_status_and_consumed_token_stays_consumed(upf, fault, status, reason):
    gw = upf.gw
    n0 = len(targets(upf.up))
    # unverified route: the documented answer, within the response timeout (1 s) plus slack
    got, took = timed(get, gw.port, f"/plain/{fault}")
    assert got == (status, reason), f"/plain/{fault}: {got}"
    assert took < 3.0, f"/plain/{fault} answered after {took:.2f}s"
    # limited-use route: the token is consumed before forwarding, and stays consumed although the upstream failed
    token = upf.iss.token(limited_use=True)
    assert get(gw.port, f"/lu/{fault}", token) == (status, reason)
    assert get(gw.port, f"/lu/{fault}/again", token) == (401, "token_replayed"), "a failed upstream gave the jti back"
    # the same client connection keeps working, and so does the upstream pool (no late or stray answer reused)
    with U.Conn(gw.port, timeout=10) as c:
        r = c.request(http_get(f"/plain/{fault}"))
        assert outcome(r) == (status, reason)
        for i in range(3):
            r = c.request(http_get(f"/plain/ok-after-{fault}/{i}"))
            assert outcome(r) == (200, None) and r.json()["target"] == f"/plain/ok-after-{fault}/{i}", r.body[:200]
    fresh = upf.iss.token(limited_use=True)
    r = U.one_shot(gw.port, http_get(f"/lu/ok-after-{fault}", [(H, fresh)]))
    assert outcome(r) == (200, None)
    q = upf.up.last()
    assert q.target == f"/lu/ok-after-{fault}" and q.one("x-attest-verdict") == "verified", q.headers
    assert gw.proc.poll() is None, "the gateway exited"
    if fault == "stall":
        upf.faulty.release.set()                                   # the late answers go out now, to closed sockets
        time.sleep(0.3)
        with U.Conn(gw.port, timeout=10) as c:
            for i in range(3):
                r = c.request(http_get(f"/plain/after-release/{i}"))
                assert r.body != b"LATE" and r.json()["target"] == f"/plain/after-release/{i}"
        upf.faulty.release.clear()
    forwarded = targets(upf.up)[n0:]
    assert not [t for t in forwarded if t.startswith("/lu/") and t.endswith("/again")], forwarded


@pytest.mark.timeout_s(30)
def test_upstream_reset_mid_response_closes_the_client_connection(upf):
    """The response has started (200 and 1 KiB of 100 KiB) when the upstream resets: the only honest signal left
    is to cut the client connection; the next connection is served."""
    token = upf.iss.token(limited_use=True)
    for raw in (http_get("/plain/reset-mid"), http_get("/lu/reset-mid", [(H, token)])):
        with U.Conn(upf.gw.port, timeout=5) as c:
            c.send(raw)
            version, status, _, headers, _ = U.read_head(c.reader)
            assert status == 200 and U.hone(headers, "content-length") == "102400", (status, headers)
            got = bytearray()
            with pytest.raises((EOFError, ConnectionResetError)):
                c.reader.read_into(102400, got.extend)
            assert 0 < len(got) < 102400
    assert get(upf.gw.port, "/lu/reset-mid/again", token) == (401, "token_replayed")
    assert get(upf.gw.port, "/plain/after-reset-mid") == (200, None)
    assert upf.gw.proc.poll() is None


@pytest.mark.timeout_s(30)
def test_zz_refused_upstream_recovers_when_it_starts_listening(upf):
    """Runs after the others: an upstream that starts listening where there was nothing is used at once."""
    assert get(upf.gw.port, "/plain/refused/x") == (502, "upstream_unreachable")
    up = upf.factory.upstream("echo", name="late", port=upf.dead_port)
    assert get(upf.gw.port, "/plain/refused/now") == (200, None)
    assert get(upf.gw.port, "/lu/refused/now", upf.iss.token(limited_use=True)) == (200, None)
    assert targets(up) == ["/plain/refused/now", "/lu/refused/now"]
    assert upf.gw.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 2. JWKS endpoint faults. A fake key server in front of a dev issuer, switchable between ok, garbage, an empty set,
#    500 and "slow" (holds the request until released, then answers ok).


class KeyServer:
    def __init__(self, iss, mode: str):
        self.iss = iss
        self.mode = mode
        self.release = threading.Event()
        self.fetches = 0

    def __call__(self, req: U.Req, ctx: U.Ctx) -> None:
        self.fetches += 1
        mode = self.mode
        if mode == "slow":
            self.release.wait(20)
            mode = "ok"
        if mode == "ok":
            body, status = json.dumps(self.iss.jwks()).encode(), b"200 OK"
        elif mode == "garbage":
            body, status = b"<html>this is not a key set</html>", b"200 OK"
        elif mode == "empty":
            body, status = b'{"keys":[]}', b"200 OK"
        else:
            body, status = b'{"error":"internal"}', b"500 Internal Server Error"
        ctx.send(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nCache-Control: max-age=300\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        ctx.close = True


def jwks_gateway(start_gateway, up, jwks_url: str):
    routes = [{"name": "ac", "match": {"path_prefix": "/"}, "upstream": "up", "verify": ["fb"]}]
    return start_gateway(gateway_config(free_port(), {"up": up.url}, routes=routes,
                                        verifiers={"fb": app_check_verifier(jwks_url)}))


@pytest.mark.timeout_s(45)
def test_jwks_down_at_start_503_then_recovers_without_restart(factory, start_dev_issuer):
    """Five gateways at once, each with its own broken key server: 503 jwks_unavailable (promptly: the request path
    never waits for a fetch), nothing forwarded; the key server is fixed; each recovers by itself (first retry 5 s
    after the failure; the stalled fetch completes as soon as it is answered)."""
    iss = start_dev_issuer()
    up = factory.upstream("echo", name="jwks-up")
    token = iss.token()
    cases = {}
    for mode in ("garbage", "empty", "http500", "slow"):
        ks = KeyServer(iss, mode)
        server = factory.upstream(ks, name=f"jwks-{mode}")
        cases[mode] = SimpleNamespace(ks=ks, server=server, gw=jwks_gateway(factory.gateway, up, server.url + "/jwks"))
    refused_port = free_port()
    cases["refused"] = SimpleNamespace(ks=None, server=None,
                                       gw=jwks_gateway(factory.gateway, up, f"http://127.0.0.1:{refused_port}/jwks"))
    # every gateway has tried once (the slow one is still waiting on its fetch)
    deadline = time.monotonic() + 10
    while any(c.ks and c.ks.fetches == 0 for c in cases.values()) or "jwks refresh failed" not in cases["refused"].gw.stderr():
        assert time.monotonic() < deadline, "a gateway never fetched its key set"
        time.sleep(0.05)
    for mode, c in cases.items():
        for i in range(3):
            got, took = timed(get, c.gw.port, f"/{mode}/down{i}", token)
            assert got == (503, "jwks_unavailable"), f"{mode}: {got}"
            assert took < 1.0, f"{mode}: 503 took {took:.2f}s"
    assert targets(up) == [], "a request reached the upstream without a key set"
    for mode in ("garbage", "empty", "http500"):
        assert "jwks refresh failed" in cases[mode].gw.stderr(), mode
    # the fix
    t_fix = time.monotonic()
    for mode in ("garbage", "empty", "http500"):
        cases[mode].ks.mode = "ok"
    cases["slow"].ks.release.set()
    factory.upstream(KeyServer(iss, "ok"), name="jwks-refused-now-up", port=refused_port)
    recovered = {}
    pending = set(cases)
    for _ in range(200):                                           # bounded: 200 rounds, and 15 s
        for mode in sorted(pending):
            got = get(cases[mode].gw.port, f"/{mode}/up", token)
            assert got in ((200, None), (503, "jwks_unavailable")), f"{mode} while recovering: {got}"
            if got == (200, None):
                recovered[mode] = round(time.monotonic() - t_fix, 2)
                pending.discard(mode)
        if not pending or time.monotonic() - t_fix > 15:
            break
        time.sleep(0.2)
    assert not pending, f"not recovered within 15 s: {sorted(pending)} (recovered: {recovered})"
    print(f"recovered after the fix (s): {recovered}")
    assert recovered["slow"] < 2.0, "the stalled fetch did not complete when answered"
    for mode, c in cases.items():
        assert c.gw.proc.poll() is None, f"{mode}: the gateway exited"
        assert "jwks loaded" in c.gw.stderr(), mode
    assert sorted(targets(up)) == sorted(f"/{m}/up" for m in cases)


@pytest.mark.timeout_s(30)
@pytest.mark.parametrize("bad", ["garbage", "empty", "http500"])
def test_failed_refresh_keeps_the_loaded_key_set(start_gateway, start_upstream, start_dev_issuer, bad):
    """A refresh that returns garbage, an empty set or 500 (forced here by a token with an unknown kid) never
    replaces the loaded set: tokens of the known key keep verifying."""
    iss = start_dev_issuer()
    ks = KeyServer(iss, "ok")
    server = start_upstream(ks, name="jwks")
    up = start_upstream("echo", name="up")
    gw = jwks_gateway(start_gateway, up, server.url + "/jwks")
    old = iss.token()
    poll(lambda: get(gw.port, "/ready", old), (200, None), 10, what="key set loaded")
    ks.mode = bad
    iss.rotate()                                                   # the issuer now signs with a kid the gateway lacks
    new = iss.token()
    fetches = ks.fetches
    assert get(gw.port, "/new", new) == (401, "unknown_key")       # requests one refresh, which fails
    deadline = time.monotonic() + 10
    while ks.fetches == fetches or "jwks refresh failed" not in gw.stderr():
        assert time.monotonic() < deadline, "the unknown kid did not trigger a refresh"
        time.sleep(0.05)
    for i in range(3):
        assert get(gw.port, f"/old/{i}", old) == (200, None), f"the {bad} refresh evicted the loaded set"
    assert get(gw.port, "/new/again", new) == (401, "unknown_key")
    assert gw.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 3. State store faults: limited-use App Check (/lu) and App Attest (/api, registration at /.attest/ios) on one store.


@pytest.fixture(scope="module")
def aa_env(module_factory, dev_bin):
    ca, root = ca_dir(dev_bin, module_factory.tmp)
    iss = module_factory.dev_issuer()
    return SimpleNamespace(ca=ca, root=root, iss=iss, bin=dev_bin)


def store_gateway(factory, env, up, state: dict):
    verifiers = {
        "fb": app_check_verifier(env.iss.jwks_url),
        "aa": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "environment": "production",
               "root_ca": str(env.root), "binding": "request", "max_skew": "60s", "registration_path": REG},
    }
    routes = [
        {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "up", "verify": ["fb"], "limited_use": True},
        {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "up", "verify": ["aa"]},
    ]
    gw = factory.gateway(gateway_config(free_port(), {"up": up.url}, routes=routes, verifiers=verifiers,
                                        state=state))
    poll(lambda: get(gw.port, "/lu/ready", env.iss.token(limited_use=True)), (200, None), 10, what="key set loaded")
    return gw


def register(port: int, device: Device) -> None:
    r = U.one_shot(port, b"POST " + REG.encode() + b"/challenge HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\n\r\n")
    assert outcome(r) == (200, None)
    body = json.dumps(device.attest_body(r.json()["challenge"])).encode()
    assert post(port, REG + "/attest", body, {"Content-Type": "application/json"}) == (201, None)


def store_fault_scenario(env, gw, up, device: Device, break_store, repair_store, label: str,
                         may_apply_late: bool = False) -> dict:
    """Before: a token consumed, an assertion accepted. During: 503 state_unavailable (never a 200) within 2 s,
    registration refused, process alive. After: recovery without restart; the token stays consumed, the counter
    did not move back, and what was refused with 503 was not consumed — unless `may_apply_late` (a stalled store
    may still execute a write the gateway gave up on: then that token / assertion is refused afterwards, never
    accepted twice). Then fresh tokens and assertions each pass exactly once (no reply mix-up after the fault)."""
    port = gw.port
    n0 = len(targets(up))
    t1 = env.iss.token(limited_use=True)
    assert get(port, "/lu/before", t1) == (200, None)
    register(port, device)
    h1, h2, h3 = device.assertions("POST", "/api/pay", b"amount=1", count=3)
    assert post(port, "/api/pay", b"amount=1", h1) == (200, None)

    break_store()
    t2 = env.iss.token(limited_use=True)
    observed = {}
    for name, fn in (("lu_new", lambda: get(port, "/lu/during", t2, timeout=5)),
                     ("lu_consumed", lambda: get(port, "/lu/during-replay", t1, timeout=5)),
                     ("aa_next", lambda: post(port, "/api/pay", b"amount=1", h2, timeout=5)),
                     ("aa_replay", lambda: post(port, "/api/pay", b"amount=1", h1, timeout=5)),
                     ("challenge", lambda: post(port, REG + "/challenge", timeout=5))):
        got, took = timed(fn)
        observed[name] = got
        assert took < 2.0, f"{label}: {name} took {took:.2f}s with the store down"
    assert observed["lu_new"] == (503, "state_unavailable"), observed
    assert observed["aa_next"] == (503, "state_unavailable"), observed
    assert observed["challenge"] == (503, "state_unavailable"), observed
    # the consumed token and the replayed assertion: refused either way, never forwarded
    assert observed["lu_consumed"] in ((503, "state_unavailable"), (401, "token_replayed")), observed
    assert observed["aa_replay"] in ((503, "state_unavailable"), (401, "counter_not_increasing")), observed
    assert gw.proc.poll() is None, f"{label}: the gateway exited"
    assert targets(up)[n0:] == ["/lu/before", "/api/pay"], "a request reached the upstream while the store was down"

    repair_store()
    t0 = time.monotonic()
    took, probes = poll(lambda: get(port, "/lu/probe", env.iss.token(limited_use=True), timeout=5), (200, None), 15,
                        what=f"{label}: recovery")
    expected = ["/lu/before", "/api/pay"]
    assert get(port, "/lu/after-replay", t1) == (401, "token_replayed"), "a token consumed before the fault came back"
    t2_after = get(port, "/lu/after", t2)
    if t2_after == (200, None):
        expected.append("/lu/after")
        assert get(port, "/lu/after-again", t2) == (401, "token_replayed")
    else:
        assert may_apply_late and t2_after == (401, "token_replayed"), f"{label}: a token refused with 503: {t2_after}"
    assert post(port, "/api/pay", b"amount=1", h1) == (401, "counter_not_increasing"), "the counter moved back"
    h2_after = post(port, "/api/pay", b"amount=1", h2)
    if h2_after == (200, None):
        expected.append("/api/pay")
        assert post(port, "/api/pay", b"amount=1", h2) == (401, "counter_not_increasing")
    else:
        assert may_apply_late and h2_after == (401, "counter_not_increasing"), f"{label}: assertion after 503: {h2_after}"
    assert post(port, "/api/pay", b"amount=1", h3) == (200, None)
    expected.append("/api/pay")
    # no reply or lock mix-up left behind: fresh tokens and assertions pass exactly once each
    for i, h in enumerate(device.assertions("POST", "/api/burst", b"", count=5)):
        tok = env.iss.token(limited_use=True)
        assert get(port, f"/lu/burst{i}", tok) == (200, None) and get(port, f"/lu/burst{i}-again", tok) == \
            (401, "token_replayed"), f"{label}: burst {i}"
        assert post(port, "/api/burst", b"", h) == (200, None) and post(port, "/api/burst", b"", h) == \
            (401, "counter_not_increasing"), f"{label}: burst {i}"
        expected += [f"/lu/burst{i}", "/api/burst"]
    assert gw.proc.poll() is None
    forwarded = [t for t in targets(up)[n0:] if t != "/lu/probe"]
    assert forwarded == expected
    return {"recovery_s": round(time.monotonic() - t0, 2), "probes": probes, "during": observed,
            "after": {"lu_refused": t2_after, "aa_refused": h2_after}}


@pytest.mark.timeout_s(45)
def test_redis_killed_and_restarted(factory, aa_env, tmp_path):
    redis = factory.redis(persistent=True)
    up = factory.upstream("echo", name="redis-up")
    state = {"backend": "redis", "url": redis.url, "key_prefix": "faults:", "timeout": "250ms"}
    gw = store_gateway(factory, aa_env, up, state)
    pid = gw.proc.pid
    result = store_fault_scenario(aa_env, gw, up, Device(aa_env.bin, aa_env.ca, tmp_path / "dev"),
                                  redis.stop, redis.start, "redis")
    print(f"redis: {result}")
    assert gw.proc.pid == pid and gw.proc.poll() is None


@pytest.mark.timeout_s(45)
def test_redis_stalled_sigstop(factory, aa_env, tmp_path):
    """Redis accepts but does not answer (SIGSTOP): every call is cut at state.timeout; after SIGCONT the replies to
    the abandoned calls arrive late and must not be taken as answers to later calls."""
    redis = factory.redis()
    up = factory.upstream("echo", name="stall-up")
    state = {"backend": "redis", "url": redis.url, "key_prefix": "stall:", "timeout": "250ms"}
    gw = store_gateway(factory, aa_env, up, state)
    try:
        result = store_fault_scenario(aa_env, gw, up, Device(aa_env.bin, aa_env.ca, tmp_path / "dev"),
                                      lambda: os.kill(redis.proc.pid, signal.SIGSTOP),
                                      lambda: os.kill(redis.proc.pid, signal.SIGCONT), "redis stalled",
                                      may_apply_late=True)
    finally:
        if redis.proc.poll() is None:
            os.kill(redis.proc.pid, signal.SIGCONT)
    print(f"redis stalled: {result}")


@pytest.mark.timeout_s(45)
def test_sqlite_locked_by_another_writer(factory, aa_env, tmp_path):
    """Another process holds the SQLite write lock (BEGIN IMMEDIATE): the gateway waits up to state.timeout, answers
    503, and writes again once the lock is released."""
    up = factory.upstream("echo", name="lock-up")
    db = tmp_path / "state" / "state.db"
    gw = store_gateway(factory, aa_env, up, {"backend": "sqlite", "path": str(db), "timeout": "250ms"})
    holder = sqlite3.connect(str(db), isolation_level=None, timeout=5)
    try:
        result = store_fault_scenario(aa_env, gw, up, Device(aa_env.bin, aa_env.ca, tmp_path / "dev"),
                                      lambda: holder.execute("BEGIN IMMEDIATE"), lambda: holder.execute("ROLLBACK"),
                                      "sqlite locked")
    finally:
        holder.close()
    print(f"sqlite locked: {result}")


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs (real ENOSPC); skipped where mounting is not permitted. Unmounted lazily at the end (the
    gateway may still hold the file: it is killed in the factory's teardown)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)], capture_output=True,
                       timeout=10)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.decode().strip()[:200]}): disk-full case not run")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)


def fill(directory: Path) -> Path:
    """Writes a filler file until the filesystem is full (bounded: 4096 writes of 4 KiB)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for _ in range(4096):
            try:
                f.write(b"\0" * 4096)
            except OSError as e:
                assert e.errno == 28, e                            # ENOSPC
                return filler
    raise AssertionError("the tmpfs never filled up")


@pytest.mark.timeout_s(45)
def test_sqlite_disk_full(factory, aa_env, small_tmpfs, tmp_path):
    up = factory.upstream("echo", name="full-up")
    state = {"backend": "sqlite", "path": str(small_tmpfs / "state" / "state.db"), "timeout": "250ms"}
    gw = store_gateway(factory, aa_env, up, state)
    pid = gw.proc.pid
    filler: list[Path] = []
    result = store_fault_scenario(aa_env, gw, up, Device(aa_env.bin, aa_env.ca, tmp_path / "dev"),
                                  lambda: filler.append(fill(small_tmpfs)), lambda: filler[0].unlink(), "sqlite full")
    print(f"sqlite disk full: {result}")
    assert gw.proc.pid == pid and gw.proc.poll() is None
    gw.kill()


@pytest.mark.timeout_s(45)
def test_sqlite_read_only_simulated_with_chattr(factory, aa_env, tmp_path):
    if not shutil.which("chattr"):
        pytest.skip("chattr not installed")
    up = factory.upstream("echo", name="ro-up")
    db = tmp_path / "state" / "state.db"
    gw = store_gateway(factory, aa_env, up, {"backend": "sqlite", "path": str(db), "timeout": "250ms"})
    files = [str(db), str(db) + "-wal"]            # not -shm: it is mapped, and an immutable mapping would fault
    probe = subprocess.run(["chattr", "+i", *files], capture_output=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"chattr +i not supported here: {probe.stderr.decode().strip()[:200]}")
    subprocess.run(["chattr", "-i", *files], capture_output=True, timeout=10, check=True)
    try:
        result = store_fault_scenario(
            aa_env, gw, up, Device(aa_env.bin, aa_env.ca, tmp_path / "dev"),
            lambda: subprocess.run(["chattr", "+i", *files], capture_output=True, timeout=10, check=True),
            lambda: subprocess.run(["chattr", "-i", *files], capture_output=True, timeout=10, check=True),
            "sqlite read-only")
    finally:
        subprocess.run(["chattr", "-i", *files], capture_output=True, timeout=10)   # else tmp_path cannot be removed
    print(f"sqlite read-only (chattr +i): {result}")
    assert gw.proc.poll() is None
