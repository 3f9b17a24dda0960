"""Request smuggling and malformed requests: the right status, a JSON error, the connection closed (4xx, and
501 for an unknown transfer coding, whose framing cannot be known) and not one byte at the upstream."""

import time

import pytest

import upstreams as U
from harness import assert_json_error, free_port, gateway_config

P = b"POST / HTTP/1.1\r\nHost: x\r\n"
G = b"GET / HTTP/1.1\r\nHost: x\r\n"
TE = b"Transfer-Encoding: chunked\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

CASES = [
    # framing conflicts
    ("cl_and_te", P + b"Content-Length: 6\r\n" + TE + b"\r\n0\r\n\r\nX", 400),
    ("te_and_cl", P + TE + b"Content-Length: 6\r\n\r\n0\r\n\r\nX", 400),
    ("te_and_cl_0", P + TE + b"Content-Length: 0\r\n\r\n0\r\n\r\n", 400),
    ("duplicate_cl_differ", P + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("cl_list", P + b"Content-Length: 5, 6\r\n\r\nhello!", 400),
    ("cl_plus", P + b"Content-Length: +5\r\n\r\nhello", 400),
    ("cl_negative", P + b"Content-Length: -5\r\n\r\nhello", 400),
    ("cl_not_a_number", P + b"Content-Length: 5x\r\n\r\nhello", 400),
    # chunk syntax (the error is in the first chunk, so nothing may be forwarded)
    ("chunk_size_negative", P + TE + b"\r\n-1\r\nx\r\n0\r\n\r\n", 400),
    ("chunk_size_0x", P + TE + b"\r\n0x10\r\n0123456789abcdef\r\n0\r\n\r\n", 400),
    ("chunk_size_trailing_space", P + TE + b"\r\n1 \r\nx\r\n0\r\n\r\n", 400),
    ("chunk_size_huge", P + TE + b"\r\nfffffffffffffffffffff\r\nx\r\n0\r\n\r\n", 400),
    ("chunk_size_empty", P + TE + b"\r\n\r\nx\r\n0\r\n\r\n", 400),
    ("chunk_missing_crlf_after_data", P + TE + b"\r\n5\r\nhelloXX0\r\n\r\n", 400),
    ("chunk_smuggle_in_data", P + TE + b"\r\n3\r\nabcdef\r\n0\r\n\r\n" + SMUGGLED, 400),
    # header syntax
    ("obs_fold", G + b"X-A: a\r\n b\r\n\r\n", 400),
    ("obs_fold_tab_te", P + b"X-A: a\r\n\tTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("ws_before_colon", G + b"X-Foo : y\r\n\r\n", 400),
    ("ws_before_colon_host", b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
    ("ws_before_colon_te", P + b"Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400),
    ("bare_cr_in_header", G + b"X-A: a\rb\r\n\r\n", 400),
    ("bare_lf_line_endings", b"GET / HTTP/1.1\nHost: x\n\n", 400),
    ("bare_lf_mixed", G + b"X-A: b\nX-B: c\r\n\r\n", 400),
    ("nul_in_value", G + b"X-A: a\x00b\r\n\r\n", 400),
    ("invalid_name_at", G + b"Bad@Name: b\r\n\r\n", 400),
    ("invalid_name_space", G + b"Bad Name: b\r\n\r\n", 400),
    ("empty_name", G + b": b\r\n\r\n", 400),
    ("leading_ws_first_header", b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400),
    # transfer codings
    ("te_xchunked", P + b"Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501),
    ("te_chunked_gzip", P + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 501),
    # request line
    ("missing_host", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("http2_version", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
]


@pytest.fixture(scope="module")
def env(module_factory):
    up = module_factory.upstream("echo")
    gw = module_factory.gateway(gateway_config(free_port(), {"api": up.url}))
    return gw, up


@pytest.mark.parametrize("raw,status", [pytest.param(r, s, id=i) for i, r, s in CASES])
def test_malformed_rejected_before_upstream(env, raw, status):
    gw, up = env
    before = up.snapshot()
    with U.Conn(gw.port, timeout=5) as c:
        c.send(raw)
        try:
            resp = c.response()
        except (ConnectionResetError, EOFError) as e:
            pytest.fail(f"no {status} response: {type(e).__name__}")
        assert_json_error(resp, status)
        if status < 500 or status == 501:
            closed, extra = c.closed_within(3)
            assert closed, "connection left open after the error"
            assert b"HTTP/1.1 200" not in extra, f"a second response followed: {extra[:200]!r}"
    time.sleep(0.15)
    after = up.snapshot()
    assert after[0] == before[0], f"the upstream received {after[0] - before[0]} bytes"


def test_gateway_still_serves_after_malformed(env):
    gw, up = env
    r = U.one_shot(gw.port, b"GET /still-alive HTTP/1.1\r\nHost: x\r\n\r\n")
    assert r.status == 200 and r.json()["target"] == "/still-alive"


def test_smuggled_request_after_error_never_forwarded(env):
    """CL+TE with a smuggled request in the body: the 400 must be the only answer, nothing after it."""
    gw, up = env
    before = up.snapshot()
    with U.Conn(gw.port, timeout=5) as c:
        c.send(P + b"Content-Length: 4\r\n" + TE + b"\r\n0\r\n\r\n" + SMUGGLED)
        resp = c.response()
        assert_json_error(resp, 400)
        closed, extra = c.closed_within(3)
        assert closed and extra == b"", f"data after the 400: {extra[:200]!r}"
    time.sleep(0.15)
    assert up.snapshot()[0] == before[0]
