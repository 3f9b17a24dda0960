"""Forward-auth behind Debian's real nginx, configured with the snippet of docs/forward-auth.md taken verbatim (only
its three example addresses substituted), the gateway as its auth service (`source: nginx`, App Check from the dev
issuer) and a recording backend. A client that spoofs every forwarding and verdict header it can think of gets
nothing past nginx without a valid token, and the backend never sees a client-sent X-Attest-* header."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

import upstreams as U
from harness import REPO, app_check_verifier, free_port, gateway_config, wait_gateway_accepts, wait_listening

H = "X-Firebase-AppCheck"
NGINX = os.environ.get("NGINX_BIN") or shutil.which("nginx") or "/usr/sbin/nginx"
VERIFY = "/.attest/verify"
APP_ID = "1:123456789012:ios:0123456789abcdef"
MARKER = "<!-- forward-auth-nginx-snippet"

# Every header the gateway can answer with (PROTOCOL.md): the snippet must set or drop each one.
ATTEST_HEADERS = ["X-Attest-Verdict", "X-Attest-Reason", "X-Attest-Verifier", "X-Attest-App-Id", "X-Attest-Key-Id",
                  "X-Attest-Risk-Metric", "X-Attest-DeviceCheck-Bit0", "X-Attest-DeviceCheck-Bit1",
                  "X-Attest-Device-Integrity", "X-Attest-App-Recognition", "X-Attest-Assertion"]
SPOOFED_VERDICT = [(name, "spoofed-" + name.lower()) for name in ATTEST_HEADERS]
SPOOFED_FORWARDING = [("X-Forwarded-Uri", "/public"), ("X-Forwarded-Method", "GET"), ("X-Forwarded-Host", "www.example.com"),
                      ("X-Original-URI", "/public"), ("X-Original-Method", "GET"), ("X-Original-Host", "www.example.com")]


def doc_snippet() -> str:
    """The nginx block after the marker in docs/forward-auth.md, exactly as written there."""
    text = (REPO / "docs" / "forward-auth.md").read_text()
    at = text.index(MARKER)
    m = re.compile(r"```nginx\n(.*?)\n```", re.S).search(text, at)
    assert m and text[at:m.start()].count("\n") == 1, "the ```nginx block must follow the marker line directly"
    return m.group(1)


def substitute(snippet: str, listen: int, gateway: int, backend: int) -> str:
    """Only the documented example addresses change; each must be there exactly once."""
    for old, new in (("listen 127.0.0.1:80;", f"listen 127.0.0.1:{listen};"),
                     ("server 127.0.0.1:8080;", f"server 127.0.0.1:{gateway};"),
                     ("server 127.0.0.1:3000;", f"server 127.0.0.1:{backend};")):
        assert snippet.count(old) == 1, f"docs/forward-auth.md: expected `{old}` once in the nginx snippet"
        snippet = snippet.replace(old, new)
    return snippet


NGINX_MAIN = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 256; }}
http {{
access_log off;
client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fcgi;
uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
{snippet}
}}
"""


def gateway_cfg(port: int, up_url: str, jwks_url: str) -> str:
    routes = [
        # Protected only on its host: behind nginx it used to be skipped (the call's own Host was used) and the
        # request fell through to the public catch-all.
        {"name": "admin", "match": {"path_prefix": "/admin", "host": "admin.example.com"}, "upstream": "api",
         "verify": ["fb"]},
        {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "api", "verify": ["fb"]},
        {"name": "public", "match": {"path_prefix": "/"}, "upstream": "api", "verify": []},
    ]
    return gateway_config(port, {"api": up_url}, routes=routes, verifiers={"fb": app_check_verifier(jwks_url)}) + \
        f"forward_auth:\n  path: {VERIFY}\n  source: nginx\n"


@pytest.fixture(scope="module")
def env(module_factory):
    if not os.access(NGINX, os.X_OK):
        pytest.skip(f"nginx not installed at {NGINX} (scripts/install-deps.sh test installs it; or set NGINX_BIN)")
    tmp = module_factory.tmp
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(name="fa-nginx-backend")
    gport = free_port()
    gw = module_factory.gateway(gateway_cfg(gport, up.url, iss.jwks_url))
    wait_gateway_accepts(gport, "/api/warm", H, iss.token())
    nport = free_port()
    ndir = tmp / "nginx-doc"
    ndir.mkdir()
    conf = ndir / "nginx.conf"
    conf.write_text(NGINX_MAIN.format(dir=ndir, snippet=substitute(doc_snippet(), nport, gport, up.port)))
    proc = subprocess.Popen([NGINX, "-p", str(ndir), "-c", str(conf), "-g", "daemon off;"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(ndir / "stderr.log", "wb"), start_new_session=True)
    try:
        wait_listening(nport, proc, 10, "nginx")
        yield type("Env", (), dict(gw=gw, up=up, iss=iss, nport=nport, ndir=ndir))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)   # the process group this test started, by its id
        proc.wait(5)


def via_nginx(env, target: str, headers: list = (), method: str = "GET", host: str = "app.example.com",
              body: bytes = b"") -> U.Resp:
    req = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
    for k, v in headers:
        req += f"{k}: {v}\r\n"
    if body:
        req += f"Content-Length: {len(body)}\r\n"
    r = U.one_shot(env.nport, (req + "\r\n").encode("latin-1") + body)
    assert r is not None
    return r


def backend_count(env) -> int:
    with env.up.lock:
        return len(env.up.requests)


def backend_since(env, n: int) -> list:
    with env.up.lock:
        return list(env.up.requests[n:])


def assert_no_client_attest_headers(q) -> None:
    for name, value in SPOOFED_VERDICT:
        assert value not in q.get(name), (name, q.get(name))
        assert len(q.get(name)) <= 1, (name, q.get(name))


def log_line(env, method: str, path: str, status: int) -> dict:
    """The gateway's access log line of a check (flushed a moment after the answer: polled)."""
    deadline = time.monotonic() + 5
    while True:
        for l in env.gw.log_lines():
            if l.get("method") == method and l.get("path") == path and l.get("status") == status:
                return l
        assert time.monotonic() < deadline, f"no access log line {method} {path} {status}"
        time.sleep(0.05)


def test_the_snippet_sets_every_attest_header_and_keeps_the_gateway_alive():
    snippet = doc_snippet()
    for name in ATTEST_HEADERS:
        var = "$upstream_http_" + name.lower().replace("-", "_")
        assert re.search(r"auth_request_set\s+(\$\w+)\s+" + re.escape(var) + ";", snippet), name
        assert re.search(r"proxy_set_header\s+" + re.escape(name) + r"\s+\$\w+;", snippet), name
    for line in ("keepalive", "proxy_http_version 1.1;", 'proxy_set_header Connection "";', "proxy_method HEAD;",
                 "proxy_set_header X-Original-URI    $request_uri;", "proxy_set_header X-Original-Method $request_method;",
                 "proxy_set_header X-Original-Host   $host;"):
        assert line in snippet, line


def test_a_spoofing_client_without_a_token_reaches_nothing(env):
    before = backend_count(env)
    # Another source's URI (nginx passes client headers to the auth call): refused, which nginx answers with 500.
    r = via_nginx(env, "/api/payments/charge", SPOOFED_FORWARDING + SPOOFED_VERDICT, method="POST", body=b'{"amount":1}')
    assert r.status == 500, (r.status, r.body[:200])
    # Only nginx's own names: overwritten by the snippet, so the real request is judged — and has no token.
    only_nginx = [h for h in SPOOFED_FORWARDING if h[0].startswith("X-Original")]
    r = via_nginx(env, "/api/payments/charge", only_nginx + SPOOFED_VERDICT, method="POST", body=b'{"amount":1}')
    assert r.status == 401, (r.status, r.body[:200])
    assert log_line(env, "POST", "/api/payments/charge", 401)["reason"] == "missing_token"
    # A forged token, an expired one: the same.
    for token in ("not.a.jwt", env.iss.token(expired=True)):
        assert via_nginx(env, "/api/payments/charge", only_nginx + SPOOFED_VERDICT + [(H, token)], method="POST").status == 401
    assert backend_since(env, before) == []


def test_a_valid_token_passes_with_only_the_gateways_headers(env):
    before = backend_count(env)
    r = via_nginx(env, "/api/payments/charge?x=1", SPOOFED_VERDICT + [(H, env.iss.token())], method="POST",
                  body=b'{"amount":1}')
    assert r.status == 200, (r.status, r.body[:200])
    [q] = backend_since(env, before)
    assert (q.method, q.target, q.body) == ("POST", "/api/payments/charge?x=1", b'{"amount":1}')
    assert q.get("x-attest-verdict") == ["verified"]
    assert q.get("x-attest-verifier") == ["fb"]
    assert q.get("x-attest-app-id") == [APP_ID]
    for name in ("x-attest-reason", "x-attest-key-id", "x-attest-risk-metric", "x-attest-devicecheck-bit0",
                 "x-attest-devicecheck-bit1", "x-attest-device-integrity", "x-attest-app-recognition",
                 "x-attest-assertion"):
        assert q.get(name) == [], name
    assert_no_client_attest_headers(q)
    assert q.get("x-firebase-appcheck") == []   # the token stays out of the backend


def test_an_open_route_gets_no_attest_header_at_all(env):
    before = backend_count(env)
    r = via_nginx(env, "/public/page", SPOOFED_VERDICT)
    assert r.status == 200
    [q] = backend_since(env, before)
    for name in ATTEST_HEADERS:
        assert q.get(name) == [], name


def test_a_host_route_is_enforced_through_nginx(env):
    before = backend_count(env)
    # The client's own Host is what nginx names; a client-sent X-Forwarded-Host never moves it to another route.
    for extra in ([], [("X-Forwarded-Host", "www.example.com")]):
        r = via_nginx(env, "/admin/users", extra + SPOOFED_VERDICT, host="admin.example.com")
        assert r.status == 401, (extra, r.status)
    assert backend_since(env, before) == []
    assert log_line(env, "GET", "/admin/users", 401)["route"] == "admin"
    r = via_nginx(env, "/admin/users", [(H, env.iss.token())], host="Admin.Example.COM")
    assert r.status == 200
    [q] = backend_since(env, before)
    assert q.get("x-attest-verdict") == ["verified"]
    # Another host: the route does not apply (the public catch-all serves it, by this configuration).
    assert via_nginx(env, "/admin/elsewhere", host="www.example.com").status == 200
    assert log_line(env, "GET", "/admin/elsewhere", 200)["route"] == "public"


@pytest.mark.parametrize("spelling,canonical", [("/%61pi/s1", "/api/s1"), ("//api/s2", "/api/s2"),
                                                ("/x/../api/s3", "/api/s3"), ("/./api/s4", "/api/s4")])
def test_path_spellings_are_judged_as_the_canonical_path(env, spelling, canonical):
    before = backend_count(env)
    assert via_nginx(env, spelling).status == 401
    assert backend_since(env, before) == []
    assert log_line(env, "GET", canonical, 401)["route"] == "api"
    assert via_nginx(env, spelling, [(H, env.iss.token())]).status == 200
    [q] = backend_since(env, before)
    assert q.target == spelling   # nginx forwards the client's spelling; the gateway judged the canonical one
    assert q.get("x-attest-verdict") == ["verified"]


def test_an_ambiguous_path_never_reaches_the_backend(env):
    before = backend_count(env)
    for spelling in ("/api%2Fx", "/public/..%2Fapi/x", "/public;x=1"):
        r = via_nginx(env, spelling, [(H, env.iss.token())])
        assert r.status in (400, 500), (spelling, r.status)   # nginx turns the gateway's 400 into a 500
    assert backend_since(env, before) == []


def tcp_to(port: int) -> dict:
    """Loopback TCP sockets whose remote port is `port`, by state (/proc/net/tcp: 01 established, 06 time-wait)."""
    states: dict = {}
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == port:
            states[fields[3]] = states.get(fields[3], 0) + 1
    return states


def test_many_checks_over_the_kept_alive_connections(env):
    """nginx keeps its connections to the gateway (keepalive 16) and the gateway answers every check on them,
    rejections included: no stale answer, no error, no connection closed per check."""
    token = env.iss.token()
    before = backend_count(env)
    closed_before = tcp_to(env.gw.port).get("06", 0)
    for i in range(30):
        assert via_nginx(env, f"/api/ka/{i}", [(H, token)] if i % 2 == 0 else []).status == (200 if i % 2 == 0 else 401)
    got = [q.target for q in backend_since(env, before)]
    assert got == [f"/api/ka/{i}" for i in range(0, 30, 2)]
    states = tcp_to(env.gw.port)
    assert states.get("01", 0) >= 1, states                    # a pooled connection stays open
    assert states.get("06", 0) - closed_before < 5, states     # not one connection per check
    assert "upstream prematurely closed" not in (env.ndir / "error.log").read_text()
