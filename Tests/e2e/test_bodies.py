"""Acceptance: request bodies (GET/POST, Content-Length and chunked) and response bodies (Content-Length and
chunked) of 1 B, 1 KiB, 1 MiB and 50 MiB arrive byte-identical (SHA-256 compared at both ends)."""

import pytest

import upstreams as U
from harness import free_port, gateway_config

SIZES = [("1B", 1), ("1KiB", 1024), ("1MiB", 1 << 20), ("50MiB", 50 << 20)]


@pytest.fixture(scope="module")
def env(module_factory):
    up = module_factory.upstream("echo")
    gw = module_factory.gateway(gateway_config(free_port(), {"api": up.url}, limits={"max_body_bytes": "64MiB"}))
    return gw, up


@pytest.mark.timeout_s(90)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("size", [s for _, s in SIZES], ids=[n for n, _ in SIZES])
def test_request_body_identical(env, method, framing, size):
    gw, up = env
    body = U.blob(size)
    n = up.snapshot()[2]
    head = f"{method} /body/{method}/{framing}/{size}?x=1 HTTP/1.1\r\nHost: h\r\n".encode()
    with U.Conn(gw.port, timeout=30) as c:
        if framing == "content-length":
            c.send(head + b"Content-Length: %d\r\n\r\n" % size)
            c.send(body)
        else:
            c.send(head + b"Transfer-Encoding: chunked\r\n\r\n")
            step = 256 * 1024 + 13
            for i in range(0, size, step):
                piece = body[i : i + step]
                c.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
            c.send(b"0\r\n\r\n")
        r = c.response(method)
    assert r.status == 200, f"{r.status} {r.body[:200]!r}"
    echo = r.json()
    assert echo["body_bytes"] == size
    assert echo["body_sha256"] == U.sha256(body)
    assert up.wait_requests(n + 1)
    req = up.last()
    assert req.target == f"/body/{method}/{framing}/{size}?x=1"
    if framing == "content-length":
        assert req.get("content-length") == [str(size)] and not req.chunked
    else:
        assert req.chunked and not req.get("content-length")


@pytest.mark.timeout_s(90)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
@pytest.mark.parametrize("size", [s for _, s in SIZES], ids=[n for n, _ in SIZES])
def test_response_body_identical(env, framing, size):
    gw, up = env
    flag = b"1" if framing == "chunked" else b"0"
    with U.Conn(gw.port, timeout=30) as c:
        r = c.request(b"GET /reply HTTP/1.1\r\nHost: h\r\nX-Reply-Size: %d\r\nX-Reply-Chunked: %s\r\n\r\n" % (size, flag))
        assert r.status == 200
        assert r.body_len == size
        assert r.body_sha256 == U.sha256(U.blob(size)) == r.one("x-body-sha256")
        if framing == "content-length":
            assert r.one("content-length") == str(size)
        # the connection is still usable afterwards
        r2 = c.request(b"GET /after-reply HTTP/1.1\r\nHost: h\r\n\r\n")
        assert r2 is not None and r2.status == 200 and r2.json()["target"] == "/after-reply"


@pytest.mark.timeout_s(90)
def test_dev_echo_reports_body_sha_through_gateway(start_gateway, start_dev_echo):
    echo = start_dev_echo()
    gw = start_gateway(gateway_config(free_port(), {"api": echo.url}, limits={"max_body_bytes": "64MiB"}))
    body = U.blob(5 << 20)
    with U.Conn(gw.port, timeout=30) as c:
        r = c.request(b"POST /dev?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert r.status == 200
        doc = r.json()
        assert doc["body_bytes"] == len(body) and doc["body_sha256"] == U.sha256(body)
        c.send(b"POST /dev2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + U.chunk_encode(body, 100_003))
        r = c.response("POST")
        assert r.status == 200
        doc = r.json()
        assert doc["target"] == "/dev2" and doc["body_bytes"] == len(body) and doc["body_sha256"] == U.sha256(body)
