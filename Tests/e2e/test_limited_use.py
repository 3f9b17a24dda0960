"""Limited-use App Check tokens (replay protection) end to end: real gateways, a real `attest-gateway-dev issuer`,
a real `redis-server` (one per module, plus a private one for the outage test) and SQLite state files.

Routes: `/ready` (verify fb, not limited: readiness only) and `/lu` (verify fb, limited_use: true), both to one
recording upstream; upstream counts below only look at `/lu` targets. Every token used is remembered and the last
test checks that none of them (nor their jti) appears in any gateway's output."""

from __future__ import annotations

import os
import secrets
import signal
import threading
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import (app_check_verifier, assert_json_error, free_port, gateway_config, http_get, jwt_parts,
                     wait_gateway_accepts)

H = "X-Firebase-AppCheck"
PROJECT = "123456789012"
TOKEN_TTL = 3600
SKEW = 60

_SEEN = SimpleNamespace(gateways=[], tokens=[])   # for the final no-token-in-logs test


# ----------------------------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture(scope="module")
def env(module_factory, redis_server):
    iss = module_factory.dev_issuer()
    return SimpleNamespace(iss=iss, redis=redis_server)


def lu_token(env, **kw) -> str:
    t = env.iss.token(limited_use=True, **kw)
    _SEEN.tokens.append(t)
    return t


def plain_token(env) -> str:
    t = env.iss.token()
    _SEEN.tokens.append(t)
    return t


def state_for(kind: str, tmp, redis=None, prefix: str | None = None, **extra) -> dict:
    if kind == "sqlite":
        st = {"backend": "sqlite", "path": str(tmp / "state-dir" / "nested" / "state.db"), "timeout": "250ms"}
    elif kind == "redis":
        st = {"backend": "redis", "url": redis.url, "key_prefix": prefix or f"t{secrets.token_hex(4)}:",
              "timeout": "250ms"}
    elif kind == "memory":
        st = {"backend": "memory"}
    else:
        raise ValueError(kind)
    st.update(extra)
    return st


def start_lu_gateway(start_gateway, up, env, state: dict, port: int | None = None):
    port = port or free_port()
    routes = [
        {"name": "ready", "match": {"path_prefix": "/ready"}, "upstream": "lu", "verify": ["fb"]},
        {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "lu", "verify": ["fb"], "limited_use": True},
    ]
    cfg = gateway_config(port, {"lu": up.url}, routes=routes, state=state,
                         verifiers={"fb": app_check_verifier(env.iss.jwks_url, clock_skew=f"{SKEW}s")})
    gw = start_gateway(cfg)
    _SEEN.gateways.append(gw)
    wait_gateway_accepts(gw.port, "/ready", H, plain_token(env))
    return gw


def lu_count(up) -> int:
    with up.lock:
        return sum(1 for q in up.requests if q.target.startswith("/lu"))


def lu_requests(up, prefix: str = "/lu") -> list:
    with up.lock:
        return [q for q in up.requests if q.target.startswith(prefix)]


def outcome(r: U.Resp | None) -> tuple:
    """(status, reason) with reason None for 200; the JSON error shape is asserted for every non-200."""
    assert r is not None, "gateway closed the connection without a response"
    if r.status == 200:
        return (200, None)
    doc = assert_json_error(r, r.status)
    expected = {403: "forbidden", 503: "unavailable"}.get(r.status, "unauthorized")   # PROTOCOL.md: error by status
    if doc.get("error") != expected:                # shows up in the (status, reason) comparison
        return (r.status, f"{doc.get('error')}/{doc.get('reason')}")
    if r.status == 401:
        assert r.get("www-authenticate") == [f'AppCheck realm="attest-gateway", error="{doc["reason"]}"'], r.headers
    return (r.status, doc["reason"])


def send(gw, path: str, token: str | None, timeout: float = 10.0) -> tuple:
    headers = [(H, token)] if token is not None else []
    return outcome(U.one_shot(gw.port, http_get(path, headers), timeout=timeout))


def fire_together(reqs: list[tuple[int, bytes]], timeout: float = 15.0) -> list:
    """Opens one connection per request, waits on a barrier, then all send at once. Returns outcome() per request
    (or the string "error: ..." when a connection failed)."""
    n = len(reqs)
    barrier = threading.Barrier(n, timeout=15)
    results: list = [None] * n

    def worker(i: int) -> None:
        port, data = reqs[i]
        conn = None
        try:
            conn = U.Conn(port, timeout=timeout)
        except Exception as e:  # noqa: BLE001
            results[i] = f"error: connect {type(e).__name__}: {e}"
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            pass
        if conn is None:
            return
        try:
            results[i] = outcome(conn.request(data))
        except AssertionError as e:
            results[i] = f"error: {e}"
        except Exception as e:  # noqa: BLE001
            results[i] = f"error: {type(e).__name__}: {e}"
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout + 20)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    return results


def tally(results: list) -> dict:
    out: dict = {}
    for r in results:
        out[r] = out.get(r, 0) + 1
    return out


def wait_log(gw, path: str, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        lines = [l for l in gw.log_lines() if l.get("path") == path]
        if lines or time.monotonic() > deadline:
            assert lines, f"no access log line for {path}"
            return lines[-1]
        time.sleep(0.05)


# ----------------------------------------------------------------------------------------------------------------
# 1. 50 concurrent connections, one token: forwarded exactly once


@pytest.mark.timeout_s(40)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_same_token_50_concurrent_forwarded_once(env, start_gateway, start_upstream, tmp_path, backend):
    up = start_upstream("echo", name="lu")
    state = state_for(backend, tmp_path, env.redis)
    gw = start_lu_gateway(start_gateway, up, env, state)
    if backend == "sqlite":
        assert os.path.isfile(state["path"]), "sqlite state file (and its folders) not created"
    for rnd in range(3):
        tok = lu_token(env)
        before = lu_count(up)
        results = fire_together([(gw.port, http_get(f"/lu/c{rnd}/{i}", [(H, tok)])) for i in range(50)])
        t = tally(results)
        assert t == {(200, None): 1, (401, "token_replayed"): 49}, \
            f"round {rnd} ({backend}): expected 1 x 200 + 49 x 401 token_replayed, got {t}"
        time.sleep(0.1)
        assert lu_count(up) == before + 1, f"round {rnd} ({backend}): upstream saw {lu_count(up) - before} requests"
    assert gw.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 2. SQLite: consumed tokens survive a restart (graceful and SIGKILL)


@pytest.mark.timeout_s(40)
def test_sqlite_consumed_token_survives_restart(env, start_gateway, start_upstream, tmp_path):
    up = start_upstream("echo", name="lu")
    state = state_for("sqlite", tmp_path)
    gw = start_lu_gateway(start_gateway, up, env, state)
    t1 = lu_token(env)
    assert send(gw, "/lu/r1", t1) == (200, None)
    assert send(gw, "/lu/r1-again", t1) == (401, "token_replayed")
    rc = gw.stop(signal.SIGTERM)
    assert rc is not None, "gateway did not stop on SIGTERM"

    gw2 = start_lu_gateway(start_gateway, up, env, state)
    assert send(gw2, "/lu/r2-t1", t1) == (401, "token_replayed"), "consumed token accepted after a restart"
    t2 = lu_token(env)
    assert send(gw2, "/lu/r2-t2", t2) == (200, None), "fresh token refused after a restart"
    gw2.kill()   # SIGKILL right after the consume: the record must already be committed

    gw3 = start_lu_gateway(start_gateway, up, env, state)
    assert send(gw3, "/lu/r3-t1", t1) == (401, "token_replayed")
    assert send(gw3, "/lu/r3-t2", t2) == (401, "token_replayed"), "token consumed just before SIGKILL accepted again"
    assert send(gw3, "/lu/r3-t3", lu_token(env)) == (200, None)
    time.sleep(0.1)
    assert [q.target for q in lu_requests(up)] == ["/lu/r1", "/lu/r2-t2", "/lu/r3-t3"]


@pytest.mark.timeout_s(60)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_sigkill_mid_batch_under_load_every_forwarded_token_stays_consumed(env, start_gateway, start_upstream,
                                                                            tmp_path, backend):
    """8 keep-alive clients send distinct limited-use tokens as fast as they can; the gateway is SIGKILLed while
    consumes are in flight (batched: one SQLite transaction or one Redis pipeline per drain). Whatever the upstream
    received, and every 200 a client got, was forwarded after its commit: on a restarted gateway over the same
    store each of those tokens must be token_replayed. (A token whose answer was lost may be either.)"""
    up = start_upstream("echo", name="lu")
    state = state_for(backend, tmp_path, env.redis)
    gw = start_lu_gateway(start_gateway, up, env, state)
    clients, per_client = 8, 120
    tokens = {(c, i): lu_token(env) for c in range(clients) for i in range(per_client)}
    oks: list = []
    broken: list = []
    lock = threading.Lock()
    go = threading.Barrier(clients + 1, timeout=15)

    def client(c: int) -> None:
        conn = U.Conn(gw.port, timeout=10)
        go.wait()
        try:
            for i in range(per_client):
                r = conn.request(http_get(f"/lu/k/{c}/{i}", [(H, tokens[(c, i)])]))
                if r is None:
                    raise ConnectionError("closed")
                assert r.status == 200, (r.status, r.body[:200])
                with lock:
                    oks.append((c, i))
        except (OSError, ConnectionError) as e:
            with lock:
                broken.append(f"client {c}: {type(e).__name__}")
        finally:
            conn.sock.close()

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    go.wait()
    deadline = time.monotonic() + 20
    while len(oks) < 150 and time.monotonic() < deadline:   # well into the load, far from its end
        time.sleep(0.002)
    gw.kill()
    for t in threads:
        t.join(timeout=20)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    assert len(oks) >= 150 and len(broken) == clients, \
        f"the kill did not land under load: {len(oks)} answered, {len(broken)} of {clients} clients cut off"

    forwarded = set()
    for q in lu_requests(up, "/lu/k/"):
        _, _, _, c, i = q.target.split("/")
        forwarded.add((int(c), int(i)))
    assert set(oks) <= forwarded, "a client got a 200 the upstream never saw"
    gw2 = start_lu_gateway(start_gateway, up, env, state)
    again = {k: send(gw2, f"/lu/again/{k[0]}/{k[1]}", tokens[k]) for k in sorted(forwarded)}
    accepted = [k for k, res in again.items() if res != (401, "token_replayed")]
    assert not accepted, f"{backend}: {len(accepted)} of {len(forwarded)} forwarded tokens not replayed after the " \
                         f"SIGKILL: {[(k, again[k]) for k in accepted[:5]]}"
    assert send(gw2, "/lu/fresh", lu_token(env)) == (200, None)


# ----------------------------------------------------------------------------------------------------------------
# 3. Two gateway processes sharing one store never both accept a token


@pytest.mark.timeout_s(40)
@pytest.mark.parametrize("backend", ["redis", "sqlite"])
def test_two_gateways_shared_store_accept_each_token_once(env, start_gateway, start_upstream, tmp_path, backend):
    up = start_upstream("echo", name="lu")
    state = state_for(backend, tmp_path, env.redis)            # the same path / url + key_prefix for both
    g1 = start_lu_gateway(start_gateway, up, env, state)
    g2 = start_lu_gateway(start_gateway, up, env, state)
    before = lu_count(up)
    bad = []
    for i in range(30):
        tok = lu_token(env)
        res = fire_together([(g1.port, http_get(f"/lu/s{i}/g1", [(H, tok)])),
                             (g2.port, http_get(f"/lu/s{i}/g2", [(H, tok)]))])
        if sorted(res, key=str) != sorted([(200, None), (401, "token_replayed")], key=str):
            bad.append(f"token {i}: g1={res[0]} g2={res[1]}")
    time.sleep(0.2)
    got = [q.target for q in lu_requests(up)]
    per_token = {}
    for t in got:
        k = t.split("/")[2]
        per_token[k] = per_token.get(k, 0) + 1
    twice = {k: n for k, n in per_token.items() if n != 1}
    assert not bad and not twice and len(got) - before == 30, \
        f"{backend}: {len(bad)} of 30 tokens wrong: {bad[:4]}; forwarded more than once: {twice}; " \
        f"upstream saw {len(got) - before} (expected 30)"
    assert g1.proc.poll() is None and g2.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 4. Redis outage: 503 state_unavailable fast, no crash, recovery after redis comes back


@pytest.mark.timeout_s(40)
def test_redis_outage_and_recovery(env, start_gateway, start_upstream, start_redis, tmp_path):
    redis = start_redis()
    up = start_upstream("echo", name="lu")
    gw = start_lu_gateway(start_gateway, up, env, state_for("redis", tmp_path, redis))
    assert send(gw, "/lu/o-before", lu_token(env)) == (200, None)
    redis.stop()
    n0 = lu_count(up)
    refused = []
    for i in range(6):
        tok = lu_token(env)
        t0 = time.monotonic()
        got = send(gw, f"/lu/o-down{i}", tok, timeout=5)
        dt = time.monotonic() - t0
        assert got == (503, "state_unavailable"), f"request {i} with redis down: {got}"
        assert dt < 2.0, f"request {i} with redis down took {dt:.2f}s"
        refused.append(tok)
        time.sleep(0.1)
    assert lu_count(up) == n0, "a request reached the upstream while the state store was down"
    assert gw.proc.poll() is None, "gateway exited while redis was down"

    redis.start()
    t0 = time.monotonic()
    seen = []
    while True:
        tok = lu_token(env)
        got = send(gw, f"/lu/o-up{len(seen)}", tok, timeout=5)
        seen.append(got)
        assert got in ((200, None), (503, "state_unavailable")), f"while redis recovers: {got}"
        if got == (200, None):
            break
        assert time.monotonic() - t0 < 10, f"no success within 10 s of redis restarting: {seen[-5:]}"
        time.sleep(0.2)
    print(f"recovered {time.monotonic() - t0:.2f}s after redis restart ({len(seen)} requests)")
    assert send(gw, "/lu/o-replay", tok) == (401, "token_replayed"), "replay protection after reconnect"
    # a token refused with 503 was never consumed (and the new redis is empty): it passes now
    assert send(gw, "/lu/o-refused-later", refused[0]) == (200, None)
    assert gw.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 5. Behaviour per backend: missing_jti, forged token doesn't burn the jti, replay, expiry record


@pytest.mark.timeout_s(30)
@pytest.mark.parametrize("backend", ["memory", "sqlite", "redis"])
def test_missing_jti_forged_replay(env, start_gateway, start_upstream, tmp_path, backend):
    up = start_upstream("echo", name="lu")
    prefix = f"t{secrets.token_hex(4)}:"
    gw = start_lu_gateway(start_gateway, up, env, state_for(backend, tmp_path, env.redis, prefix))

    assert send(gw, "/lu/no-jti", plain_token(env)) == (401, "missing_jti")
    assert send(gw, "/lu/no-token", None) == (401, "missing_token")

    genuine = lu_token(env)
    h, p, _ = genuine.split(".")
    other_sig = lu_token(env).split(".")[2]                   # a real signature by the same key, other payload
    assert send(gw, "/lu/forged", f"{h}.{p}.{other_sig}") == (401, "bad_signature")
    assert send(gw, "/lu/forged-again", f"{h}.{p}.{other_sig}") == (401, "bad_signature")
    assert send(gw, "/lu/expired", lu_token(env, expired=True)) == (401, "expired")
    time.sleep(0.1)
    assert lu_count(up) == 0, "a rejected request reached the upstream"

    assert send(gw, "/lu/genuine", genuine) == (200, None), "the forged variant burnt the genuine token's jti"
    assert send(gw, "/lu/genuine-again", genuine) == (401, "token_replayed")
    # the forged variant after the consume: still bad_signature (signature is checked before the jti)
    assert send(gw, "/lu/forged-after", f"{h}.{p}.{other_sig}") == (401, "bad_signature")
    time.sleep(0.1)
    reqs = lu_requests(up)
    assert [q.target for q in reqs] == ["/lu/genuine"]
    q = reqs[0]
    assert q.get("x-attest-verdict") == ["verified"] and q.get("x-attest-reason") == [], q.headers
    assert q.get(H) == [], "token header reached the upstream"

    if backend == "redis":
        jti = jwt_parts(genuine)[1]["jti"]
        keys = sorted(env.redis.command("KEYS", prefix + "*"))       # the jti, and the key layout's marker
        assert keys == [f"{prefix}jti:{PROJECT}:{jti}", f"{prefix}layout"], f"redis keys under {prefix!r}: {keys}"
        assert env.redis.command("GET", f"{prefix}layout") == "1"
        ttl = env.redis.command("TTL", keys[0])
        assert TOKEN_TTL + SKEW - 30 <= ttl <= TOKEN_TTL + SKEW, f"jti record TTL {ttl}, expected ~exp + skew"
    assert gw.proc.poll() is None


# ----------------------------------------------------------------------------------------------------------------
# 5b. on_unavailable: allow / reject against a redis url with nothing listening


@pytest.mark.timeout_s(30)
def test_on_unavailable_allow_and_reject(env, start_gateway, start_upstream, tmp_path):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    up = start_upstream("echo", name="lu")
    allow = start_lu_gateway(start_gateway, up, env, {"backend": "redis", "url": dead, "timeout": "250ms",
                                                      "key_prefix": f"t{secrets.token_hex(4)}:", "on_unavailable": "allow"})
    tok = lu_token(env)
    for i in range(2):                                       # nothing is recorded: the same token passes again
        t0 = time.monotonic()
        assert send(allow, f"/lu/allow{i}", tok) == (200, None)
        assert time.monotonic() - t0 < 2.0
    assert send(allow, "/lu/allow-nojti", plain_token(env)) == (401, "missing_jti"), "allow skips only the store"
    time.sleep(0.1)
    reqs = lu_requests(up)
    assert [q.target for q in reqs] == ["/lu/allow0", "/lu/allow1"]
    for q in reqs:
        assert q.get("x-attest-verdict") == ["verified"], q.headers
        assert q.get("x-attest-reason") == ["state_unavailable"], q.headers
        assert q.get("x-attest-verifier") == ["fb"] and q.get(H) == [], q.headers

    reject = start_lu_gateway(start_gateway, up, env, {"backend": "redis", "url": dead, "timeout": "250ms",
                                                       "key_prefix": f"t{secrets.token_hex(4)}:"})
    t0 = time.monotonic()
    assert send(reject, "/lu/reject", lu_token(env)) == (503, "state_unavailable")
    assert time.monotonic() - t0 < 2.0
    time.sleep(0.1)
    assert lu_count(up) == 2
    line = wait_log(reject, "/lu/reject")
    assert (line.get("status"), line.get("reason")) == (503, "state_unavailable"), line


# ----------------------------------------------------------------------------------------------------------------
# 6. Access log: reasons on the lines, never a token (runs last in the module)


@pytest.mark.timeout_s(30)
def test_zz_access_log_reasons_and_no_tokens(env, start_gateway, start_upstream, tmp_path):
    up = start_upstream("echo", name="lu")
    gw = start_lu_gateway(start_gateway, up, env, state_for("sqlite", tmp_path))
    tok = lu_token(env)
    assert send(gw, "/lu/log-ok", tok) == (200, None)
    assert send(gw, "/lu/log-replayed", tok) == (401, "token_replayed")
    assert send(gw, "/lu/log-nojti", plain_token(env)) == (401, "missing_jti")
    line = wait_log(gw, "/lu/log-ok")
    assert line.get("verdict") == "verified" and "reason" not in line, line
    line = wait_log(gw, "/lu/log-replayed")
    assert (line.get("verdict"), line.get("reason"), line.get("status")) == ("failed", "token_replayed", 401), line
    line = wait_log(gw, "/lu/log-nojti")
    assert (line.get("verdict"), line.get("reason"), line.get("status")) == ("failed", "missing_jti", 401), line

    leaks = []
    for g in _SEEN.gateways:
        text = g.stdout() + g.stderr()
        for t in set(_SEEN.tokens):
            parts = t.split(".")
            needles = [s for s in parts[1:3] if len(s) >= 16]
            jti = jwt_parts(t)[1].get("jti")
            if jti:
                needles.append(jti)
            for s in needles:
                if s in text:
                    leaks.append(f"{g.dir.name}: {s[:24]}...")
    assert not leaks, f"token contents found in gateway output ({len(_SEEN.gateways)} gateways): {leaks[:5]}"
