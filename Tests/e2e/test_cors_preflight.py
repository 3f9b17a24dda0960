"""CORS preflights (CONFIG.md Additions `cors_preflight`): with `forward`, an OPTIONS request carrying Origin and
Access-Control-Request-Method and no body reaches the upstream unverified, whatever `match.methods` says; the
request that follows still needs its token. Anything short of a preflight is judged like any request."""

from __future__ import annotations

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config

pytestmark = pytest.mark.timeout_s(60)

H = "X-Firebase-AppCheck"


@pytest.fixture(scope="module")
def env(module_factory):
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(name="cors-up")
    port = free_port()
    routes = [
        {"name": "api", "match": {"path_prefix": "/api/", "methods": ["POST"]}, "upstream": "up",
         "verify": ["firebase"], "cors_preflight": "forward"},
        {"name": "strict", "match": {"path_prefix": "/strict/"}, "upstream": "up", "verify": ["firebase"]},
    ]
    gw = module_factory.gateway(gateway_config(port, {"up": up.url}, routes,
                                               verifiers={"firebase": app_check_verifier(iss.jwks_url)}))
    return type("Env", (), dict(iss=iss, up=up, port=port, gw=gw))


def req(method: str, path: str, headers: list[tuple[str, str]] = (), body: bytes = b"") -> bytes:
    out = f"{method} {path} HTTP/1.1\r\nHost: gw.test\r\n"
    for k, v in headers:
        out += f"{k}: {v}\r\n"
    if body:
        out += f"Content-Length: {len(body)}\r\n"
    return (out + "\r\n").encode() + body


PREFLIGHT = [("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST"),
             ("Access-Control-Request-Headers", "x-firebase-appcheck, content-type")]


def test_a_preflight_is_forwarded_unverified_and_the_real_request_still_needs_a_token(env):
    before = len(env.up.requests)
    r = U.one_shot(env.port, req("OPTIONS", "/api/items", PREFLIGHT))
    assert r.status == 200
    assert len(env.up.requests) == before + 1
    seen = env.up.requests[-1]
    assert seen.method == "OPTIONS" and seen.one("origin") == "https://app.example"
    assert seen.one("x-attest-verdict") is None
    r = U.one_shot(env.port, req("POST", "/api/items", [("Origin", "https://app.example")], b"{}"))
    assert r.status == 401
    token = env.iss.token()
    for _ in range(50):
        r = U.one_shot(env.port, req("POST", "/api/items", [("Origin", "https://app.example"), (H, token)], b"{}"))
        if r.status == 200:
            break
    assert r.status == 200


@pytest.mark.parametrize("variant", ["no-origin", "no-request-method", "with-body", "not-options"])
def test_what_is_not_a_preflight_is_not_let_through(env, variant):
    headers = {
        "no-origin": PREFLIGHT[1:],
        "no-request-method": PREFLIGHT[:1],
        "with-body": PREFLIGHT,
        "not-options": PREFLIGHT,
    }[variant]
    method = "GET" if variant == "not-options" else "OPTIONS"
    before = len(env.up.requests)
    r = U.one_shot(env.port, req(method, "/api/items", headers, b"x" if variant == "with-body" else b""))
    # OPTIONS/GET are not in the route's methods: without the preflight exemption nothing matches.
    assert r.status == 404
    assert len(env.up.requests) == before


def test_a_route_that_verifies_preflights_refuses_one_without_a_token(env):
    before = len(env.up.requests)
    r = U.one_shot(env.port, req("OPTIONS", "/strict/x", PREFLIGHT))
    assert r.status == 401
    assert len(env.up.requests) == before
