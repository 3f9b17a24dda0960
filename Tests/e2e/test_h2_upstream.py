"""An HTTP/2 upstream (`protocol: h2c`) that misbehaves in the ways RFC 9113 allows, frame by frame (h2_upstream.py,
PyPI's h2): a stream the server refused (RST_STREAM REFUSED_STREAM) or did not take before its GOAWAY is sent again,
body included, on another connection — the server did nothing with it (RFC 9113 8.7) — while a stream reset after
the server may have acted on it, or one whose body was too large to keep, is a 502 and never sent twice; response
bytes a slow client has not taken hold only that stream's window, not the connection's shared one. (A reload under
an open stream: test_grpc.py.)

Real parts: the gateway binary, curl-free raw sockets and urllib as clients, the h2 upstream on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from h2_upstream import H2Upstream
from harness import free_port, gateway_config

pytestmark = pytest.mark.timeout_s(60)


@pytest.fixture
def up():
    u = H2Upstream()
    yield u
    u.close()


def start(factory, up: H2Upstream, **upstream) -> object:
    spec = {"url": up.url, "protocol": "h2c", **upstream}
    return factory.gateway(gateway_config(free_port(), {"api": spec}), workers=1)   # one loop: one pool


def call(port: int, path: str, body: bytes | None = None, timeout: float = 10) -> tuple[int, bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_a_refused_stream_is_sent_again_with_its_body(factory, up):
    gw = start(factory, up)
    body = bytes(range(256)) * 40   # 10 KiB: nghttp2 took it with the head, the retry must send it again
    status, out = call(gw.port, "/refuse/a", body)
    assert status == 200, out
    answer = json.loads(out)
    assert answer["attempts"] == 2
    assert answer["body_length"] == len(body) and answer["body_sha256"] == hashlib.sha256(body).hexdigest()


def test_a_stream_a_goaway_did_not_take_goes_to_a_new_connection(factory, up):
    gw = start(factory, up)
    status, out = call(gw.port, "/warm")
    assert status == 200, out
    warm = json.loads(out)["connection"]
    status, out = call(gw.port, "/goaway/b")
    assert status == 200, out
    answer = json.loads(out)
    assert answer["attempts"] == 2 and answer["connection"] > warm, answer
    assert call(gw.port, "/after")[0] == 200


def test_a_stream_reset_after_the_server_may_have_acted_is_not_sent_twice(factory, up):
    gw = start(factory, up)
    status, out = call(gw.port, "/reset/c", b"pay once")
    assert status == 502 and json.loads(out)["reason"] == "upstream_closed", out
    time.sleep(0.2)
    assert up.attempts["/reset/c"] == 1


def test_a_refused_stream_whose_body_was_too_large_to_keep_is_not_sent_again(factory, up):
    gw = start(factory, up)
    status, out = call(gw.port, "/refuse/d", b"x" * (256 * 1024))
    assert status == 502 and json.loads(out)["reason"] == "upstream_closed", out
    time.sleep(0.2)
    assert up.attempts["/refuse/d"] == 1


def test_slow_readers_do_not_stall_the_shared_upstream_connection(factory, up):
    """Six clients that never read hold back 8 MiB responses; the stream windows they keep closed (256 KiB each)
    add up to more than the connection's (1 MiB). A seventh request on the same upstream connection still flows."""
    gw = start(factory, up)
    slow = []
    for _ in range(6):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", gw.port))
        s.sendall(b"GET /big/8388608 HTTP/1.1\r\nHost: t\r\n\r\n")
        slow.append(s)
    try:
        time.sleep(1.5)   # the slow streams' bytes fill every buffer up to their windows
        status, out = call(gw.port, "/big/2097152", timeout=15)
        assert status == 200 and len(out) == 2097152
        assert up.connections == 1, "the requests did not share one upstream connection: the test proves nothing"
    finally:
        for s in slow:
            s.close()
