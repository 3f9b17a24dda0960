"""Forward-auth: the gateway judges requests another proxy forwards. A real nginx (`auth_request`, Debian's build on
127.0.0.1, an older snippet without X-Original-Host under `source: auto`) in front of a recording upstream, the
gateway as its auth service; Traefik's (`X-Forwarded-Uri`) and Envoy's (`{path}/<original path>`) layouts called
directly; and every call that must be refused (`untrusted_forwarding`, `ambiguous_path`) against a gateway per
`forward_auth.source`. The documented nginx snippet itself runs in test_forward_auth_nginx.py."""

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
def env(module_factory, dev_bin):
    if not os.access(NGINX, os.X_OK):
        pytest.fail(f"nginx not found at {NGINX} (make test installs it; or set NGINX_BIN)", pytrace=False)
    tmp = module_factory.tmp
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(name="fa-up")
    ca, root = ca_dir(dev_bin, tmp)
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
        yield type("Env", (), dict(gw=gw, up=up, iss=iss, nport=nport, ca=ca, root=root, tmp=tmp, bin=dev_bin))
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
        # The line names the original request (method, canonical path), not the endpoint.
        lines = [l for l in env.gw.log_lines() if (l.get("method"), l.get("path"), l.get("status")) == ("GET", "/api/x", 401)]
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



# ----------------------------------------------------------------------------------------------------------------
# Where the original request comes from (forward_auth.source), and every call refused instead of judged


def source_cfg(port: int, up_url: str, jwks_url: str, source: str) -> str:
    routes = [
        {"name": "admin", "match": {"path_prefix": "/admin", "host": "admin.example.com"}, "upstream": "api",
         "verify": ["fb"]},
        {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "api", "verify": ["fb"]},
        {"name": "public", "match": {"path_prefix": "/"}, "upstream": "api", "verify": []},
    ]
    return gateway_config(port, {"api": up_url}, routes=routes, verifiers={"fb": app_check_verifier(jwks_url)}) + \
        f"forward_auth:\n  path: {VERIFY}\n  source: {source}\n"


SOURCES = ("auto", "nginx", "traefik", "envoy")


@pytest.fixture(scope="module")
def by_source(env, module_factory):
    """A gateway per `forward_auth.source`, each with a match.host route (so an original host is required)."""
    gws = {}
    for source in SOURCES:
        port = free_port()
        gws[source] = module_factory.gateway(source_cfg(port, env.up.url, env.iss.jwks_url, source))
    for gw in gws.values():
        wait_gateway_accepts(gw.port, "/api/warm", H, env.iss.token())
    return gws


def raw_call(port: int, target: str, headers: list, host: str | None = "auth.internal", method: str = "GET",
             version: str = "HTTP/1.1") -> U.Resp:
    req = f"{method} {target} {version}\r\n"
    if host is not None:
        req += f"Host: {host}\r\n"
    for k, v in headers:
        req += f"{k}: {v}\r\n"
    r = U.one_shot(port, (req + "\r\n").encode("latin-1"), method=method)
    assert r is not None
    return r


def reason(r: U.Resp) -> str | None:
    return json.loads(r.body).get("reason") if r.body else None


def nginx_headers(uri: str, method: str = "GET", host: str | None = "admin.example.com") -> list:
    h = [("X-Original-URI", uri), ("X-Original-Method", method)]
    return h + ([("X-Original-Host", host)] if host else [])


def traefik_headers(uri: str, method: str = "GET", host: str | None = "admin.example.com") -> list:
    h = [("X-Forwarded-Uri", uri), ("X-Forwarded-Method", method), ("X-Forwarded-Proto", "https")]
    return h + ([("X-Forwarded-Host", host)] if host else [])


def untrusted(r: U.Resp) -> bool:
    return r.status == 400 and reason(r) == "untrusted_forwarding"


def test_each_source_is_read_from_its_own_headers_and_host(env, by_source):
    token = env.iss.token()
    layouts = {"nginx": lambda host, extra: (VERIFY, nginx_headers("/admin/x", host=host) + extra, "auth.internal"),
               "traefik": lambda host, extra: (VERIFY, traefik_headers("/admin/x", host=host) + extra, "auth.internal"),
               "envoy": lambda host, extra: (VERIFY + "/admin/x", extra, host)}
    for source, layout in layouts.items():
        for gw in (by_source[source], by_source["auto"]):
            target, headers, host = layout("admin.example.com", [])
            r = raw_call(gw.port, target, headers, host=host)
            assert r.status == 401 and reason(r) == "missing_token", (source, r.status, r.body)
            target, headers, host = layout("Admin.Example.com", [(H, token)])
            r = raw_call(gw.port, target, headers, host=host)
            assert r.status == 200 and r.one("x-attest-verdict") == "verified", (source, r.status, r.body)
            # Another host: the admin route does not apply, the public catch-all does.
            target, headers, host = layout("www.example.com", [])
            r = raw_call(gw.port, target, headers, host=host)
            assert r.status == 200 and json.loads(r.body) == {"verdict": "none"}, (source, r.status, r.body)


def test_two_sources_uris_are_refused_by_every_source_setting(by_source):
    calls = [
        (VERIFY, nginx_headers("/admin/x") + [("X-Forwarded-Uri", "/public")]),
        (VERIFY, traefik_headers("/admin/x") + [("X-Original-URI", "/public")]),
        (VERIFY + "/public", nginx_headers("/admin/x")),
        (VERIFY + "/public", traefik_headers("/admin/x")),
    ]
    for source, gw in by_source.items():
        for target, headers in calls:
            r = raw_call(gw.port, target, headers)
            assert untrusted(r), (source, target, headers, r.status, r.body)


def test_a_named_source_refuses_any_other_sources_uri(by_source):
    refused = {
        "nginx": [(VERIFY, traefik_headers("/admin/x")), (VERIFY + "/admin/x", [])],
        "traefik": [(VERIFY, nginx_headers("/admin/x")), (VERIFY + "/admin/x", [])],
        "envoy": [(VERIFY + "/admin/x", [("X-Original-URI", "/public")]),
                  (VERIFY + "/admin/x", [("X-Forwarded-Uri", "/public")]),
                  (VERIFY, nginx_headers("/admin/x")), (VERIFY, traefik_headers("/admin/x"))],
    }
    for source, calls in refused.items():
        for target, headers in calls:
            r = raw_call(by_source[source].port, target, headers, host="admin.example.com")
            assert untrusted(r), (source, target, headers, r.status, r.body)
    # A named source without its own URI names no original request at all.
    for source in SOURCES:
        r = raw_call(by_source[source].port, VERIFY, [(H, "x")])
        assert r.status == 400 and reason(r) == "forward_auth_target_missing", (source, r.status)


def test_the_host_of_another_source_is_never_used(by_source):
    # nginx call + a client's X-Forwarded-Host: no original host (refused, a route matches on host) ...
    for source in ("nginx", "auto"):
        r = raw_call(by_source[source].port, VERIFY, nginx_headers("/admin/x", host=None) +
                     [("X-Forwarded-Host", "www.example.com")])
        assert untrusted(r), (source, r.status, r.body)
        # ... and beside nginx's own host it changes nothing: still the admin route.
        r = raw_call(by_source[source].port, VERIFY, nginx_headers("/admin/x") + [("X-Forwarded-Host", "www.example.com")])
        assert r.status == 401 and reason(r) == "missing_token", (source, r.status, r.body)
    for source in ("traefik", "auto"):
        r = raw_call(by_source[source].port, VERIFY, traefik_headers("/admin/x", host=None) +
                     [("X-Original-Host", "www.example.com")])
        assert untrusted(r), (source, r.status, r.body)
    # Envoy: the call's Host, never a header's.
    r = raw_call(by_source["envoy"].port, VERIFY + "/admin/x", [("X-Forwarded-Host", "www.example.com"),
                                                               ("X-Original-Host", "www.example.com")],
                 host="admin.example.com")
    assert r.status == 401 and reason(r) == "missing_token"


def test_repeated_or_empty_fields_are_refused(by_source):
    for make, names in ((nginx_headers, ("X-Original-URI", "X-Original-Method", "X-Original-Host")),
                        (traefik_headers, ("X-Forwarded-Uri", "X-Forwarded-Method", "X-Forwarded-Host"))):
        source = "nginx" if make is nginx_headers else "traefik"
        base = make("/admin/x")
        for name in names:
            value = dict(base)[name]
            repeated = base + [(name, value)]
            empty = [(k, "" if k == name else v) for k, v in base]
            for headers in (repeated, empty):
                for gw in (by_source[source], by_source["auto"]):
                    r = raw_call(gw.port, VERIFY, headers)
                    assert untrusted(r), (source, name, headers, r.status, r.body)


def test_a_missing_method_header_is_refused_not_taken_from_the_call(env, by_source):
    token = env.iss.token()
    for source, headers in (("nginx", [("X-Original-URI", "/api/x"), ("X-Original-Host", "a.test")]),
                            ("traefik", [("X-Forwarded-Uri", "/api/x"), ("X-Forwarded-Host", "a.test")])):
        for gw in (by_source[source], by_source["auto"]):
            r = raw_call(gw.port, VERIFY, headers + [(H, token)])
            assert untrusted(r), (source, r.status, r.body)
    # Also without any host route (the module's first gateway): a method header is still required.
    r = raw_call(env.gw.port, VERIFY, [("X-Original-URI", "/api/x"), (H, token)])
    assert untrusted(r)
    # A method that is not a token.
    r = raw_call(env.gw.port, VERIFY, [("X-Original-URI", "/api/x"), ("X-Original-Method", "GET /x"), (H, token)])
    assert untrusted(r)


def test_no_original_host_while_a_route_matches_host_is_refused(env, by_source):
    token = env.iss.token()
    auto = by_source["auto"].port
    assert untrusted(raw_call(auto, VERIFY, nginx_headers("/api/x", host=None) + [(H, token)]))
    assert untrusted(raw_call(auto, VERIFY, traefik_headers("/api/x", host=None) + [(H, token)]))
    assert untrusted(raw_call(by_source["envoy"].port, VERIFY + "/api/x", [(H, token)], host=None, version="HTTP/1.0"))
    # Without any match.host route, no host is needed (the module's first gateway).
    r = raw_call(env.gw.port, VERIFY, nginx_headers("/api/x", host=None) + [(H, token)])
    assert r.status == 200 and r.one("x-attest-verdict") == "verified"


def test_the_original_target_is_routed_on_its_canonical_path(env):
    token = env.iss.token()
    spellings = ["/%61pi/x", "//api/x", "/open/../api/x", "/./api/x", "/%41pi/../api/x"]
    for spelling in spellings:
        for headers, target in ((traefik_headers(spelling, host=None), VERIFY), (nginx_headers(spelling, host=None), VERIFY),
                                ([], VERIFY + spelling)):
            r = raw_call(env.gw.port, target, headers)
            assert r.status == 401 and reason(r) == "missing_token", (spelling, target, r.status, r.body)
            r = raw_call(env.gw.port, target, headers + [(H, token)])
            assert r.status == 200 and r.one("x-attest-verdict") == "verified", (spelling, target, r.status)
    for spelling in ("/api%2Fx", "/open/..%2Fapi/x", "/../api/x", "/open;x=1", "/%00"):
        calls = [(traefik_headers(spelling, host=None), VERIFY), (nginx_headers(spelling, host=None), VERIFY)]
        if not spelling.startswith("/.."):   # (Envoy's "/.attest/verify/../api/x" is no call to the endpoint at all)
            calls.append(([], VERIFY + spelling))
        for headers, target in calls:
            r = raw_call(env.gw.port, target, headers + [(H, token)])
            assert r.status == 400 and reason(r) == "ambiguous_path", (spelling, target, r.status, r.body)


def test_the_access_log_shows_the_original_method_and_canonical_path(env):
    r = raw_call(env.gw.port, VERIFY, traefik_headers("/%61pi/log-check?x=1", method="POST", host=None))
    assert r.status == 401
    deadline = time.monotonic() + 5
    while True:
        lines = [l for l in env.gw.log_lines() if l.get("path") == "/api/log-check"]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert lines and lines[-1]["method"] == "POST" and lines[-1]["route"] == "api" and lines[-1]["status"] == 401
    assert lines[-1]["reason"] == "missing_token"


def test_app_attest_signs_the_original_target_as_sent_not_its_canonical_form(env):
    d = Device(env.bin, env.ca, env.tmp / "fa-device-canonical")
    register(env.gw.port, d)
    sent = "/%69os/profile?v=1"          # routed as /ios/profile
    h = d.assertions("GET", sent, b"")[0]
    r = raw_call(env.gw.port, VERIFY, traefik_headers(sent, host=None) + list(h.items()))
    assert r.status == 200 and r.one("x-attest-verdict") == "verified", (r.status, r.body)
    h = d.assertions("GET", "/ios/profile?v=1", b"")[0]     # signed over the canonical form: not what was sent
    r = raw_call(env.gw.port, VERIFY, traefik_headers(sent, host=None) + list(h.items()))
    assert r.status == 401 and reason(r) == "bad_assertion", (r.status, r.body)


def test_a_head_call_is_answered_without_a_body_on_a_kept_connection(env):
    """What lets nginx keep its connections (`proxy_method HEAD`): the answer's head only, then the next one."""
    token = env.iss.token()
    with U.Conn(env.gw.port) as c:
        for headers, status in (([], 401), ([(H, token)], 200), ([], 401)):
            req = f"HEAD {VERIFY} HTTP/1.1\r\nHost: gw.test\r\n" + "".join(
                f"{k}: {v}\r\n" for k, v in nginx_headers("/api/head", host=None) + headers) + "\r\n"
            r = c.request(req.encode("latin-1"))
            assert r is not None and r.status == status and r.body == b"", (status, r and r.status)
            assert int(r.one("content-length")) > 0
        r = c.request(http_get(VERIFY + "/api/after-head", [(H, token)]))
        assert r is not None and r.status == 200 and json.loads(r.body) == {"verdict": "verified"}


def test_a_grpc_content_type_does_not_turn_a_forward_auth_rejection_into_a_200(env):
    """A proxy copies the original request's headers into the auth call; for gRPC traffic that includes
    content-type application/grpc. The call is still answered by HTTP status (a 200 would read as "allow")."""
    grpc = [("Content-Type", "application/grpc"), ("TE", "trailers")]
    r = call(env, VERIFY, [("X-Forwarded-Method", "POST"), ("X-Forwarded-Uri", "/api/svc.Echo/Call")] + grpc)
    assert r.status == 401 and json.loads(r.body)["reason"] == "missing_token"
    assert r.one("grpc-status") is None
    r = call(env, VERIFY, [("X-Forwarded-Method", "POST"), ("X-Forwarded-Uri", "/api/svc.Echo/Call"), (H, env.iss.token())] + grpc)
    assert r.status == 200 and r.one("x-attest-verdict") == "verified"
    r = via_nginx(env, "/api/svc.Echo/Call", grpc, method="POST")
    assert r.status == 401
