"""Upstream keep-alive pool: connections are reused, and connections the upstream closed are not handed out."""

import time

import upstreams as U
from harness import free_port, gateway_config


def _close_after_each_response(req, ctx):
    """Answers keep-alive (no Connection: close) and then closes anyway — as upstream idle timeouts do."""
    U.b_echo(req, ctx)
    ctx.close = True


def test_pooled_connections_are_reused(start_gateway, start_upstream):
    up = start_upstream("echo")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}), workers=1)
    c = U.Conn(gw.port)
    for i in range(20):
        r = c.request(b"GET /reuse/%d HTTP/1.1\r\nHost: h\r\n\r\n" % i)
        assert r is not None and r.status == 200
    # One client connection, one loop: the upstream should have seen a single connection for all 20 requests.
    assert up.snapshot()[1] == 1, f"upstream saw {up.snapshot()[1]} connections for 20 sequential requests"


def test_connections_closed_by_the_upstream_are_not_reused(start_gateway, start_upstream):
    up = start_upstream(_close_after_each_response)
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}), workers=1)
    c = U.Conn(gw.port)
    gaps = [0, 0.01, 0.05, 0.2, 0, 0.001, 1.2, 0, 0.02, 0.1] * 2
    for i, gap in enumerate(gaps):
        time.sleep(gap)
        r = c.request(b"GET /closing/%d HTTP/1.1\r\nHost: h\r\n\r\n" % i)
        assert r is not None, f"request {i} (after {gap}s) got no response"
        assert r.status == 200, f"request {i} (after {gap}s) got {r.status}: {r.body!r}"
    assert up.snapshot()[2] == len(gaps)
