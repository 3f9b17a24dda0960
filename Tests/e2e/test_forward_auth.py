"""Forward-auth: the gateway judges requests another proxy forwards. A real nginx (`auth_request`, Debian's build on
127.0.0.1) in front of a recording upstream, the gateway as its auth service; plus Traefik's (`X-Forwarded-Uri`)
and Envoy's (`{path}/<original path>`) layouts called directly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts, wait_listening
from test_app_attest import Device, ca_dir, register

H = "X-Firebase-AppCheck"
NGINX = os.environ.get("NGINX_BIN") or shutil.which("nginx") or "/usr/sbin/nginx"
VERIFY = "/.attest/verify"


def gateway_cfg(port: int, up_url: str, jwks_url: str, root: Path) -> str:
    verifiers = {"fb": app_check_verifier(jwks_url),
                 "aa": {"type": "app_attest", "team_id": "TEAMID1234", "bundle_ids": ["com.example.app"],
                        "root_ca": str(root), "max_skew": "60s"}}
    routes = [
        {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "api", "verify": ["fb"], "limited_use": True},
        {"name": "mon", "match": {"path_prefix": "/mon"}, "upstream": "api", "verify": ["fb"], "mode": "monitor"},
        {"name": "open", "match": {"path_prefix": "/open"}, "upstream": "api", "verify": []},
        {"name": "ios", "match": {"path_prefix": "/ios"}, "upstream": "api", "verify": ["aa"]},
        {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "api", "verify": ["fb"]},
    ]
    return gateway_config(port, {"api": up_url}, routes=routes, verifiers=verifiers) + \
        f"forward_auth:\n  path: {VERIFY}\n"


NGINX_CONF = """
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body; proxy_temp_path {dir}/proxy; fastcgi_temp_path {dir}/fcgi;
  uwsgi_temp_path {dir}/uwsgi; scgi_temp_path {dir}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      auth_request /_attest;
      auth_request_set $attest_verdict $upstream_http_x_attest_verdict;
      auth_request_set $attest_app $upstream_http_x_attest_app_id;
      auth_request_set $attest_reason $upstream_http_x_attest_reason;
      proxy_set_header X-Attest-Verdict $attest_verdict;
      proxy_set_header X-Attest-App-Id $attest_app;
      proxy_set_header X-Attest-Reason $attest_reason;
      proxy_set_header X-Firebase-AppCheck "";
      proxy_pass http://127.0.0.1:{up};
    }}
    location = /_attest {{
      internal;
      proxy_pass http://127.0.0.1:{gw}{verify};
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI $request_uri;
      proxy_set_header X-Original-Method $request_method;
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def env(module_factory, gateway_bin):
    if not os.access(NGINX, os.X_OK):
        pytest.fail(f"nginx not found at {NGINX} (make test installs it; or set NGINX_BIN)", pytrace=False)
    tmp = module_factory.tmp
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(name="fa-up")
    ca, root = ca_dir(gateway_bin, tmp)
    gport = free_port()
    gw = module_factory.gateway(gateway_cfg(gport, up.url, iss.jwks_url, root))
    wait_gateway_accepts(gport, "/api/warm", H, iss.token())
    nport = free_port()
    ndir = tmp / "nginx"
    ndir.mkdir()
    (ndir / "nginx.conf").write_text(NGINX_CONF.format(dir=ndir, port=nport, up=up.port, gw=gport, verify=VERIFY))
    proc = subprocess.Popen([NGINX, "-p", str(ndir), "-c", str(ndir / "nginx.conf")], stdout=subprocess.DEVNULL,
                            stderr=open(ndir / "stderr.log", "wb"), start_new_session=True)
    try:
        wait_listening(nport, proc, 10, "nginx")
        yield type("Env", (), dict(gw=gw, up=up, iss=iss, nport=nport, ca=ca, root=root, tmp=tmp, bin=gateway_bin))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def via_nginx(env, path: str, headers: list | None = None, method: str = "GET") -> U.Resp:
    req = f"{method} {path} HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n"
    for k, v in headers or []:
        req += f"{k}: {v}\r\n"
    r = U.one_shot(env.nport, (req + "\r\n").encode())
    assert r is not None
    return r


def last_upstream(env, prefix: str):
    with env.up.lock:
        return [q for q in env.up.requests if q.target.startswith(prefix)][-1]


def test_nginx_auth_request_lets_a_valid_token_through_with_the_verdict(env):
    token = env.iss.token()
    r = via_nginx(env, "/api/orders?page=2", [(H, token)])
    assert r.status == 200, r.body
    q = last_upstream(env, "/api/orders")
    assert q.target == "/api/orders?page=2"
    assert q.one("x-attest-verdict") == "verified"
    assert q.one("x-attest-app-id") == "1:123456789012:ios:0123456789abcdef"
    assert not q.one("x-firebase-appcheck")


def test_nginx_auth_request_returns_the_rejection(env):
    before = len(env.up.requests)
    for headers, reason in (([], "missing_token"), ([(H, env.iss.token(expired=True))], "expired"),
                            ([(H, "not.a.jwt")], "malformed_token")):
        r = via_nginx(env, "/api/x", headers)
        assert r.status == 401, (reason, r.status)
    assert len(env.up.requests) == before
    # The access log is flushed after the loop's batch of events, a moment after the response went out: poll.
    wanted, deadline = {"missing_token", "expired", "malformed_token"}, time.monotonic() + 5
    while True:
        lines = [l for l in env.gw.log_lines() if l.get("path") == VERIFY and l.get("status") == 401]
        if {l["reason"] for l in lines} >= wanted or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert {l["reason"] for l in lines} >= wanted


def test_nginx_auth_request_consumes_a_limited_use_token_once(env):
    once = env.iss.token(limited_use=True)
    assert via_nginx(env, "/lu/a", [(H, once)]).status == 200
    assert via_nginx(env, "/lu/a", [(H, once)]).status == 401


def test_monitor_and_open_routes_are_let_through(env):
    r = via_nginx(env, "/mon/x", [(H, env.iss.token(expired=True))])
    assert r.status == 200
    q = last_upstream(env, "/mon/x")
    assert q.one("x-attest-verdict") == "failed" and q.one("x-attest-reason") == "expired"
    assert via_nginx(env, "/open/x").status == 200


def test_app_attest_through_nginx_signs_the_original_request(env):
    d = Device(env.bin, env.ca, env.tmp / "fa-device")
    register(env.gw.port, d)
    h = d.assertions("GET", "/ios/profile?v=1", b"")[0]
    assert via_nginx(env, "/ios/profile?v=1", list(h.items())).status == 200
    assert last_upstream(env, "/ios/profile").one("x-attest-verdict") == "verified"
    assert via_nginx(env, "/ios/profile?v=1", list(h.items())).status == 401        # replayed counter
    h2 = d.assertions("GET", "/ios/profile?v=1", b"")[0]
    assert via_nginx(env, "/ios/profile?v=2", list(h2.items())).status == 401       # another URI than signed


def call(env, target: str, headers: list) -> U.Resp:
    r = U.one_shot(env.gw.port, http_get(target, headers))
    assert r is not None
    return r


def test_traefik_and_envoy_layouts(env):
    token = env.iss.token()
    # Traefik forwardAuth: the original request in X-Forwarded-Method / -Uri / -Host.
    r = call(env, VERIFY, [("X-Forwarded-Method", "POST"), ("X-Forwarded-Uri", "/api/t?x=1"),
                           ("X-Forwarded-Host", "app.test"), (H, token)])
    assert r.status == 200 and r.one("x-attest-verdict") == "verified"
    assert json.loads(r.body) == {"verdict": "verified"}
    r = call(env, VERIFY, [("X-Forwarded-Method", "GET"), ("X-Forwarded-Uri", "/api/t")])
    assert r.status == 401 and json.loads(r.body)["reason"] == "missing_token"
    assert r.one("www-authenticate")
    # Envoy ext_authz (HTTP service): the original path after the endpoint's.
    r = call(env, VERIFY + "/api/e?y=2", [(H, token)])
    assert r.status == 200 and r.one("x-attest-app-id")
    # No original request named, and no route for it.
    r = call(env, VERIFY, [(H, token)])
    assert r.status == 400 and json.loads(r.body)["reason"] == "forward_auth_target_missing"
    assert call(env, VERIFY + "/nowhere", [(H, token)]).status == 404
