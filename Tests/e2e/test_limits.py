"""Limits and timeouts (414, 431, 413, 408, idle close, max_connections) and upstream failures (502, 504)."""

import socket
import time

import pytest

import upstreams as U
from harness import assert_json_error, free_port, gateway_config


@pytest.fixture(scope="module")
def env(module_factory):
    up = module_factory.upstream("echo")
    cfg = gateway_config(free_port(), {"api": up.url}, limits={
        "max_header_bytes": "4KiB", "max_headers": 10, "max_body_bytes": "1KiB",
        "header_timeout": "1s", "idle_timeout": "1s",
    }, routes=[
        {"name": "small", "match": {"path_prefix": "/small"}, "upstream": "api", "verify": [], "max_body_bytes": 100},
        {"name": "api", "match": {"path_prefix": "/"}, "upstream": "api", "verify": []},
    ])
    return module_factory.gateway(cfg), up


def _expect_closed(c, what):
    closed, extra = c.closed_within(3)
    assert closed, f"connection left open after {what}"


@pytest.fixture(scope="module")
def default_env(module_factory):
    up = module_factory.upstream("echo")
    return module_factory.gateway(gateway_config(free_port(), {"api": up.url})), up


def test_uri_too_long_414_default_limits(default_env):
    gw, up = default_env
    before = up.snapshot()
    ok = U.one_shot(gw.port, b"GET /" + b"a" * 8000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
    assert ok.status == 200, "an 8000-byte target must still be served"
    before = up.snapshot()
    with U.Conn(gw.port) as c:
        r = c.request(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: h\r\n\r\n")
        assert_json_error(r, 414)
        _expect_closed(c, "414")
    assert up.snapshot()[0] == before[0]


def test_head_too_large_431(env):
    gw, up = env
    ok = U.one_shot(gw.port, b"GET /h HTTP/1.1\r\nHost: h\r\nX-Big: " + b"v" * 3000 + b"\r\n\r\n")
    assert ok.status == 200, "a 3 KB head is under max_header_bytes 4KiB"
    before = up.snapshot()
    with U.Conn(gw.port) as c:
        r = c.request(b"GET /h HTTP/1.1\r\nHost: h\r\nX-Big: " + b"v" * 5000 + b"\r\n\r\n")
        assert_json_error(r, 431)
        _expect_closed(c, "431")
    assert up.snapshot()[0] == before[0]


def test_too_many_headers_431(env):
    gw, up = env
    ten = b"GET /n HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(9)) + b"\r\n"
    assert U.one_shot(gw.port, ten).status == 200, "exactly max_headers (10) fields must be accepted"
    before = up.snapshot()
    eleven = b"GET /n HTTP/1.1\r\nHost: h\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(10)) + b"\r\n"
    with U.Conn(gw.port) as c:
        r = c.request(eleven)
        assert_json_error(r, 431)
        _expect_closed(c, "431")
    assert up.snapshot()[0] == before[0]


def test_body_too_large_content_length_413_before_upstream(env):
    gw, up = env
    ok = U.one_shot(gw.port, b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1024\r\n\r\n" + b"x" * 1024)
    assert ok.status == 200, "a body of exactly max_body_bytes must pass"
    before = up.snapshot()
    with U.Conn(gw.port) as c:
        # only the head: the gateway must answer from Content-Length alone
        r = c.request(b"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 1025\r\n\r\n", "POST")
        assert_json_error(r, 413)
    time.sleep(0.15)
    after = up.snapshot()
    assert after[0] == before[0], "the upstream received bytes for a too-large Content-Length"
    assert after[1] == before[1], "the upstream was connected to for a too-large Content-Length"


def test_body_too_large_per_route_413(env):
    gw, up = env
    assert U.one_shot(gw.port, b"POST /small HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n" + b"x" * 100).status == 200
    before = up.snapshot()
    r = U.one_shot(gw.port, b"POST /small HTTP/1.1\r\nHost: h\r\nContent-Length: 200\r\n\r\n", method="POST")
    assert_json_error(r, 413)
    time.sleep(0.15)
    assert up.snapshot()[:2] == before[:2], "the upstream was contacted for a too-large Content-Length"
    # the same size is fine on the other route (global 1 KiB)
    assert U.one_shot(gw.port, b"POST /other HTTP/1.1\r\nHost: h\r\nContent-Length: 200\r\n\r\n" + b"x" * 200).status == 200


def test_body_too_large_chunked_413_and_close(env):
    gw, up = env
    body = U.chunk_encode(b"y" * 1600, 400)
    with U.Conn(gw.port) as c:
        c.send(b"POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        r = c.response("POST")
        assert_json_error(r, 413)
        _expect_closed(c, "chunked 413")
    with U.Conn(gw.port) as c:
        small = U.chunk_encode(b"y" * 1000, 400)
        r = c.request(b"POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + small)
        assert r.status == 200 and r.json()["body_bytes"] == 1000


def test_body_too_large_chunked_per_route(env):
    gw, up = env
    with U.Conn(gw.port) as c:
        c.send(b"POST /small HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + U.chunk_encode(b"z" * 150, 50))
        assert_json_error(c.response("POST"), 413)
        _expect_closed(c, "chunked 413")


def test_header_timeout_408(env):
    gw, up = env
    before = up.snapshot()
    with U.Conn(gw.port, timeout=6) as c:
        t0 = time.monotonic()
        c.send(b"GET / HTTP/1.1\r\nHost: h\r\n")
        r = c.response()
        elapsed = time.monotonic() - t0
        assert_json_error(r, 408)
        assert 0.7 <= elapsed <= 4.0, f"408 after {elapsed:.2f}s with header_timeout 1s"
        _expect_closed(c, "408")
    assert up.snapshot()[0] == before[0]


def test_header_timeout_slowloris_drip(env):
    """A head dribbled one byte at a time must still hit the header timeout (it is not an idle timer)."""
    gw, up = env
    with U.Conn(gw.port, timeout=6) as c:
        t0 = time.monotonic()
        got = None
        for i in range(60):
            try:
                c.send(b"a" if i else b"GET / HTTP/1.1\r\nHost: h\r\nX-Drip: ")
            except (BrokenPipeError, ConnectionResetError):
                break
            c.sock.settimeout(0.1)
            try:
                data = c.sock.recv(65536)
                got = data
                break
            except socket.timeout:
                pass
            finally:
                c.sock.settimeout(6)
        elapsed = time.monotonic() - t0
    assert got is not None, "gateway never answered a head dribbled over 6 s (header_timeout 1s)"
    assert got.startswith(b"HTTP/1.1 408"), got[:100]
    assert elapsed <= 4.0, f"408 after {elapsed:.2f}s"


def test_idle_keepalive_closed_without_response(env):
    gw, up = env
    with U.Conn(gw.port, timeout=6) as c:
        assert c.request(b"GET /idle HTTP/1.1\r\nHost: h\r\n\r\n").status == 200
        t0 = time.monotonic()
        closed, extra = c.closed_within(5)
        elapsed = time.monotonic() - t0
    assert closed, "idle keep-alive connection not closed within 5 s (idle_timeout 1s)"
    assert extra == b"", f"idle close sent bytes: {extra[:200]!r}"
    assert 0.7 <= elapsed <= 4.0, f"closed after {elapsed:.2f}s"


def test_max_connections(start_gateway, start_upstream):
    up = start_upstream("echo")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}, limits={"max_connections": 2}))
    # The harness's readiness probe (connect, close) holds a slot until its loop has read the EOF, which a slow
    # build (sanitizers) on a busy machine may not have done when c2 arrives: retry until both are served.
    deadline = time.monotonic() + 5
    while True:
        c1, c2 = U.Conn(gw.port), U.Conn(gw.port)
        try:
            r1 = c1.request(b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\n")
            r2 = c2.request(b"GET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
        except OSError:
            r1 = r2 = None
        if r1 is not None and r1.status == 200 and r2 is not None and r2.status == 200:
            break
        c1.close()
        c2.close()
        assert time.monotonic() < deadline, f"two connections (max_connections 2) not both served: {r1}, {r2}"
        time.sleep(0.1)
    try:
        try:
            c3 = U.Conn(gw.port, timeout=3)
        except ConnectionRefusedError:
            c3 = None
        if c3 is not None:
            with c3:
                closed, extra = c3.closed_within(2)
                assert closed, "third connection (max_connections 2) not closed at once"
                assert b"200" not in extra
        # the first two keep working
        assert c1.request(b"GET /1b HTTP/1.1\r\nHost: h\r\n\r\n").status == 200
        c2.close()
        # a slot is free again: a new connection is served (poll, bounded)
        deadline, served = time.monotonic() + 5, False
        while time.monotonic() < deadline and not served:
            try:
                with U.Conn(gw.port, timeout=3) as c4:
                    r = c4.request(b"GET /4 HTTP/1.1\r\nHost: h\r\n\r\n")
                    served = r is not None and r.status == 200
            except (OSError, EOFError):
                pass
            if not served:
                time.sleep(0.1)
        assert served, "no connection accepted after one of the two closed"
    finally:
        c1.close()
        c2.close()


# ------------------------------------------------------------------------------------------------------------
# Upstream failures


def test_upstream_refused_502(start_gateway):
    dead = free_port()
    gw = start_gateway(gateway_config(free_port(), {"api": f"http://127.0.0.1:{dead}"}))
    t0 = time.monotonic()
    r = U.one_shot(gw.port, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
    assert_json_error(r, 502)
    assert time.monotonic() - t0 < 3


def test_upstream_garbage_502(start_gateway, start_upstream):
    up = start_upstream("garbage")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}))
    assert_json_error(U.one_shot(gw.port, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"), 502)
    assert up.snapshot()[2] >= 1


def test_upstream_closes_at_once_502(start_gateway, start_upstream):
    up = start_upstream("close")
    gw = start_gateway(gateway_config(free_port(), {"api": up.url}))
    assert_json_error(U.one_shot(gw.port, b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n"), 502)


def test_upstream_slow_504(start_gateway, start_upstream):
    up = start_upstream(("slow", 4.0))
    gw = start_gateway(gateway_config(free_port(), {"api": {"url": up.url, "response_timeout": "1s"}}))
    t0 = time.monotonic()
    r = U.one_shot(gw.port, b"GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
    elapsed = time.monotonic() - t0
    assert_json_error(r, 504)
    assert 0.7 <= elapsed <= 3.0, f"504 after {elapsed:.2f}s with response_timeout 1s"
