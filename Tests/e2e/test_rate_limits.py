"""Abuse limits: a route's `rate_limit` by client address (the first untrusted hop), by app id after verification,
and the registration endpoints' default `registration_rate_limit` (10/s, burst 20 per client address): a burst
over the limit gets 429 `rate_limited` with `Retry-After`, and the refused requests never reach the upstream."""

from __future__ import annotations

import json
import socket
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config, http_get

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
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", env.gw.port))
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
