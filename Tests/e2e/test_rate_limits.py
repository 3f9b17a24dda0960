"""Abuse limits: a route's `rate_limit` by client address (the first untrusted hop), by app id after verification,
and the registration endpoints' default `registration_rate_limit` (10/s, burst 20 per client address): a burst
over the limit gets 429 `rate_limited` with `Retry-After`, and the refused requests never reach the upstream.

With `state.backend: redis` the budgets are shared: two gateways on one real redis-server spend one budget (route
limits by client address and app id, registration limits), and with Redis killed each gateway limits locally —
still refusing over its own budget, never unlimited — and says so once in its log."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import socket
import struct
import time
import urllib.request
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config, http_get, log_records

H = "X-Firebase-AppCheck"


@pytest.fixture(scope="module")
def env(module_factory):
    iss = module_factory.dev_issuer()
    up = module_factory.upstream("echo", name="rl")
    port = free_port()
    verifiers = {"fb": app_check_verifier(iss.jwks_url),
                 "ios": {"type": "app_attest", "team_id": "ABCDE12345", "bundle_ids": ["com.example.app"],
                         "registration_path": "/.attest/ios"},
                 "ios_open": {"type": "app_attest", "team_id": "ABCDE12345", "bundle_ids": ["com.example.app"],
                              "registration_path": "/.attest/ios-open", "registration_rate_limit": {"rate": 0}}}
    routes = [
        {"name": "ip", "match": {"path_prefix": "/ip/"}, "upstream": "up", "verify": [],
         "rate_limit": {"key": "client_address", "rate": "2/s", "burst": 3}},
        {"name": "app", "match": {"path_prefix": "/app/"}, "upstream": "up", "verify": ["fb"],
         "rate_limit": {"key": "app_id", "rate": "1/m", "burst": 2}},
        {"name": "open", "match": {"path_prefix": "/"}, "upstream": "up", "verify": []},
    ]
    text = gateway_config(port, {"up": up.url}, routes=routes, verifiers=verifiers, state={"backend": "memory"})
    needle = f'address: "127.0.0.1:{port}"' if f'address: "127.0.0.1:{port}"' in text else f"address: 127.0.0.1:{port}"
    text = text.replace(needle, needle + '\n    trusted_proxies: ["127.0.0.2/32"]', 1)
    gw = module_factory.gateway(text)
    return SimpleNamespace(gw=gw, up=up, iss=iss)


def send(env, raw: bytes, source: str = "127.0.0.1") -> U.Resp:
    return send_to(env.gw.port, raw, source)


def send_to(port: int, raw: bytes, source: str = "127.0.0.1") -> U.Resp:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    c = U.Conn.__new__(U.Conn)
    c.sock, c.reader = s, U.Reader(s)
    try:
        return c.request(raw, "POST" if raw.startswith(b"POST") else "GET")
    finally:
        s.close()


def get(env, path: str, headers=(), source: str = "127.0.0.1") -> U.Resp:
    return send(env, http_get(path, list(headers) + [("Connection", "close")]), source)


def seen(env, prefix: str) -> int:
    with env.up.lock:
        return sum(1 for q in env.up.requests if q.target.startswith(prefix))


def assert_limited(r: U.Resp) -> int:
    assert r.status == 429, (r.status, r.body)
    doc = json.loads(r.body)
    assert doc == {"error": "too_many_requests", "reason": "rate_limited"}, doc
    retry = r.get("retry-after")
    assert len(retry) == 1 and int(retry[0]) >= 1, r.headers
    return int(retry[0])


def test_a_burst_over_a_client_address_limit_gets_429_with_retry_after(env):
    before = seen(env, "/ip/a")
    assert [get(env, "/ip/a").status for _ in range(3)] == [200, 200, 200]
    assert assert_limited(get(env, "/ip/a")) == 1
    assert seen(env, "/ip/a") - before == 3                              # the refused one never reached the upstream
    time.sleep(0.6)                                                     # 2/s: one token back after 500 ms
    assert get(env, "/ip/a").status == 200
    assert get(env, "/ip/a").status == 429


def test_behind_a_trusted_proxy_the_reported_client_is_counted(env):
    # 127.0.0.2 is a trusted proxy: its clients (the last X-Forwarded-For entry) have buckets of their own.
    for client in ("203.0.113.5", "203.0.113.6"):
        codes = [get(env, "/ip/b", [("X-Forwarded-For", f"198.51.100.1, {client}")], source="127.0.0.2").status
                 for _ in range(4)]
        assert codes == [200, 200, 200, 429], (client, codes)
    # An untrusted peer's X-Forwarded-For is not believed: spoofing it does not buy a new bucket.
    codes = [get(env, "/ip/c", [("X-Forwarded-For", f"192.0.2.{i}")], source="127.0.0.3").status for i in range(4)]
    assert codes == [200, 200, 200, 429], codes


def test_an_app_id_limit_counts_verified_requests_per_app(env):
    a = [env.iss.token(app_id="1:123456789012:ios:aaaa") for _ in range(3)]
    b = env.iss.token(app_id="1:123456789012:ios:bbbb")
    assert get(env, "/app/x", [(H, "not-a-token")]).status == 401      # not verified: not counted, not 429
    assert [get(env, "/app/x", [(H, t)]).status for t in a[:2]] == [200, 200]
    assert_limited(get(env, "/app/x", [(H, a[2])]))
    assert get(env, "/app/x", [(H, b)]).status == 200                   # another app has its own budget
    assert get(env, "/app/x").status == 401                             # no token: 401 as ever, never 429


def test_registration_endpoints_are_limited_per_client_by_default(env):
    challenge = b"POST /.attest/ios/challenge HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    codes = [send(env, challenge, source="127.0.0.4").status for _ in range(21)]
    assert codes[:20] == [200] * 20 and codes[20] == 429, codes          # default: 10/s, burst 20
    assert_limited(send(env, challenge, source="127.0.0.4"))
    assert send(env, challenge, source="127.0.0.5").status == 200        # another client
    # rate: 0 turns it off.
    open_challenge = challenge.replace(b"/.attest/ios/", b"/.attest/ios-open/")
    assert all(send(env, open_challenge, source="127.0.0.6").status == 200 for _ in range(25))


def test_the_access_log_says_who_sent_what_and_what_decided(env):
    """client, the client a trusted proxy reports, host, user agent, verifier and app id on each line; a line for a
    request that did not parse carries the client and a request id too. Never a token."""
    token = env.iss.token(app_id="1:123456789012:ios:logs")
    r = get(env, "/app/logged", [(H, token), ("User-Agent", 'probe/1.0 "quoted"'), ("X-Forwarded-For", "203.0.113.9")],
            source="127.0.0.2")
    assert r.status == 200
    bad = send(env, b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", source="127.0.0.3")
    assert bad.status == 400
    deadline = time.monotonic() + 5
    lines = []
    while time.monotonic() < deadline:
        lines = env.gw.log_lines()
        if any(l.get("path") == "/app/logged" for l in lines) and any(l.get("status") == 400 and l.get("method") == "-" for l in lines):
            break
        time.sleep(0.1)
    line = next(l for l in lines if l.get("path") == "/app/logged")
    assert (line["client"], line["forwarded_for"], line["host"], line["user_agent"]) == \
        ("127.0.0.2", "203.0.113.9", "gw.test", 'probe/1.0 "quoted"'), line
    assert (line["verifier"], line["app_id"], line["verdict"]) == ("fb", "1:123456789012:ios:logs", "verified"), line
    assert isinstance(line["status"], int) and isinstance(line["duration_ms"], float), line
    # Where the answer came from and how long the upstream took to its response head (part of the whole).
    assert line["upstream_address"] == env.up.url.split("//", 1)[1].rstrip("/"), line
    assert isinstance(line["upstream_ms"], float) and 0 < line["upstream_ms"] <= line["duration_ms"], line
    parse_error = next(l for l in lines if l.get("status") == 400 and l.get("method") == "-")
    assert parse_error["client"] == "127.0.0.3" and parse_error.get("request_id"), parse_error
    assert "upstream_address" not in parse_error and "upstream_ms" not in parse_error, parse_error
    assert token not in env.gw.stdout_path.read_text()


# ----------------------------------------------------------------------------------------------------------------
# Shared through Redis: two gateways, one budget.

CHALLENGE = b"POST /.attest/ios/challenge HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def shared_gateway(factory, redis, iss, up, prefix: str, admin_port: int | None = None, with_app_attest: bool = True):
    """A gateway on `redis` under `prefix`; slow rates (per minute), so nothing refills while a test runs."""
    verifiers = {"fb": app_check_verifier(iss.jwks_url)}
    if with_app_attest:
        verifiers["ios"] = {"type": "app_attest", "team_id": "ABCDE12345", "bundle_ids": ["com.example.app"],
                            "registration_path": "/.attest/ios", "registration_rate_limit": {"rate": "1/m", "burst": 3}}
    routes = [
        {"name": "ip", "match": {"path_prefix": "/ip/"}, "upstream": "up", "verify": [],
         "rate_limit": {"key": "client_address", "rate": "1/m", "burst": 4}},
        {"name": "app", "match": {"path_prefix": "/app/"}, "upstream": "up", "verify": ["fb"],
         "rate_limit": {"key": "app_id", "rate": "1/m", "burst": 3}},
    ]
    state = {"backend": "redis", "url": redis.url, "key_prefix": prefix, "timeout": "300ms"}
    text = gateway_config(free_port(), {"up": up.url}, routes=routes, verifiers=verifiers, state=state)
    if admin_port is not None:
        text += f"admin:\n  address: 127.0.0.1:{admin_port}\n"
    return factory.gateway(text)


@pytest.fixture(scope="module")
def pair(module_factory, redis_server):
    iss = module_factory.dev_issuer()
    up = module_factory.upstream("echo", name="shared")
    prefix = f"rl{secrets.token_hex(4)}:"
    a = shared_gateway(module_factory, redis_server, iss, up, prefix)
    b = shared_gateway(module_factory, redis_server, iss, up, prefix)
    return SimpleNamespace(a=a, b=b, up=up, iss=iss, redis=redis_server, prefix=prefix)


def shared_seen(pair, prefix: str) -> int:
    with pair.up.lock:
        return sum(1 for q in pair.up.requests if q.target.startswith(prefix))


def test_two_gateways_on_one_redis_share_a_client_address_budget(pair):
    source = "127.0.0.21"
    path = "/ip/shared"
    codes = [get_from(gw, path, source).status for gw in (pair.a, pair.b, pair.a, pair.b)]
    assert codes == [200, 200, 200, 200], codes                         # burst 4, spent across both gateways
    # The 5th from either gateway is refused: one budget, not one each (that would have been 8).
    for gw in (pair.a, pair.b, pair.b):
        retry = assert_limited(get_from(gw, path, source))
        assert 50 <= retry <= 60, retry                                 # 1/m: a token back within the minute
    assert shared_seen(pair, path) == 4                                 # the refused ones never reached the upstream
    # Another client address has a budget of its own, on both gateways.
    assert get_from(pair.b, path, "127.0.0.22").status == 200
    # One Redis key per bucket: the prefix, the limit, the SHA-256 of the address — never the address itself.
    digest = hashlib.sha256(source.encode()).hexdigest()
    key = f"{pair.prefix}ratelimit:route:ip:{digest}"
    keys = pair.redis.command("KEYS", f"{pair.prefix}ratelimit:*")
    assert key in keys, keys
    assert not any("127.0.0" in k for k in keys), keys
    ttl = pair.redis.command("PTTL", key)
    assert 0 < ttl <= 4 * 60_000, ttl                                   # gone once the burst would have refilled


def test_two_gateways_share_an_app_id_budget(pair):
    app = f"1:123456789012:ios:{secrets.token_hex(3)}"
    tokens = [pair.iss.token(app_id=app) for _ in range(5)]
    codes = [get_from(gw, "/app/x", "127.0.0.23", [(H, t)]).status for gw, t in zip((pair.a, pair.b, pair.a), tokens)]
    assert codes == [200, 200, 200], codes                              # burst 3 across both
    assert_limited(get_from(pair.b, "/app/x", "127.0.0.24", [(H, tokens[3])]))   # the app's budget, not the address's
    assert_limited(get_from(pair.a, "/app/x", "127.0.0.23", [(H, tokens[4])]))
    assert get_from(pair.a, "/app/x", "127.0.0.23", [(H, "not-a-token")]).status == 401   # unverified: not counted
    other = pair.iss.token(app_id=f"1:123456789012:ios:{secrets.token_hex(3)}")
    assert get_from(pair.b, "/app/x", "127.0.0.23", [(H, other)]).status == 200


def test_two_gateways_share_a_registration_budget(pair):
    source = "127.0.0.25"
    codes = [send_to(gw.port, CHALLENGE, source).status for gw in (pair.b, pair.a, pair.b)]
    assert codes == [200, 200, 200], codes                              # registration_rate_limit burst 3, shared
    assert_limited(send_to(pair.a.port, CHALLENGE, source))
    assert_limited(send_to(pair.b.port, CHALLENGE, source))
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert pair.redis.command("EXISTS", f"{pair.prefix}ratelimit:registration:ios:{digest}") == 1


def get_from(gw, path: str, source: str, headers=()) -> U.Resp:
    return send_to(gw.port, http_get(path, list(headers) + [("Connection", "close")]), source)


def metric_sum(admin_port: int, family: str, **labels) -> float:
    with _NO_PROXY.open(f"http://127.0.0.1:{admin_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(family + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.timeout_s(90)
def test_with_redis_killed_each_gateway_limits_locally_and_says_so_once(factory, start_redis):
    redis = start_redis()
    iss = factory.dev_issuer()
    up = factory.upstream("echo", name="fallback")
    admin = free_port()
    prefix = f"fb{secrets.token_hex(4)}:"
    # Only rate-limited routes: the Redis store is opened for them alone.
    gw = shared_gateway(factory, redis, iss, up, prefix, admin_port=admin, with_app_attest=False)
    source = "127.0.0.31"
    assert [get_from(gw, "/ip/f", source).status for _ in range(2)] == [200, 200]
    assert redis.command("EXISTS", f"{prefix}ratelimit:route:ip:{hashlib.sha256(source.encode()).hexdigest()}") == 1
    redis.stop()
    t0 = time.monotonic()
    # The process's own bucket decides now (it starts full: the shared spending is not known to it): burst 4, then
    # 429 — never unlimited.
    codes = [get_from(gw, "/ip/f", source).status for _ in range(6)]
    assert codes == [200, 200, 200, 200, 429, 429], codes
    assert time.monotonic() - t0 < 5, "the fallback answers within the state timeout, not after a hang"
    assert_limited(get_from(gw, "/ip/f", source))
    assert get_from(gw, "/ip/f", "127.0.0.32").status == 200          # another client: its own local bucket
    fallbacks = log_records(gw.stderr_path, "rate limit store unavailable, limiting locally")
    assert len(fallbacks) == 1, gw.stderr()[-3000:]                     # once per change, not per request
    assert metric_sum(admin, "attest_gateway_state_errors_total", operation="rate_limit") == 8   # one per fallback
    assert gw.proc.poll() is None
    # Redis back: limits are shared again (a fresh Redis: a fresh shared budget), and the change is told once.
    redis.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not log_records(gw.stderr_path, "rate limit store available, limits shared again"):
        get_from(gw, "/ip/g", "127.0.0.33")
        time.sleep(0.2)
    assert len(log_records(gw.stderr_path, "rate limit store available, limits shared again")) == 1, gw.stderr()[-3000:]
    assert redis.command("EXISTS", f"{prefix}ratelimit:route:ip:{hashlib.sha256(b'127.0.0.33').hexdigest()}") == 1


def test_a_client_gone_while_its_token_is_awaited_is_never_forwarded(factory, start_redis):
    redis = start_redis()
    iss = factory.dev_issuer()
    up = factory.upstream("echo", name="gone")
    admin = free_port()
    gw = shared_gateway(factory, redis, iss, up, f"gone{secrets.token_hex(4)}:", admin_port=admin, with_app_attest=False)
    assert get_from(gw, "/ip/warm", "127.0.0.41").status == 200
    os.kill(redis.proc.pid, signal.SIGSTOP)      # the redis-server this test started: it stops answering
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.42", 0))
        s.connect(("127.0.0.1", gw.port))
        s.sendall(http_get("/ip/left", [("Connection", "close")]))
        time.sleep(0.1)                           # read and waiting for Redis (state.timeout 300 ms)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()                                 # reset: the client is gone before the answer
        time.sleep(0.8)                           # the take timed out meanwhile, the fallback would admit it
        # It did wait for Redis: its take is the one that timed out.
        assert metric_sum(admin, "attest_gateway_state_errors_total", operation="rate_limit", kind="timeout") == 1
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    with up.lock:
        assert not any(q.target.startswith("/ip/left") for q in up.requests), "forwarded for a client that left"
    assert gw.proc.poll() is None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and get_from(gw, "/ip/after", "127.0.0.43").status != 200:
        time.sleep(0.2)
    assert get_from(gw, "/ip/after", "127.0.0.44").status == 200
