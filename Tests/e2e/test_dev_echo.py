"""`attest-gateway-dev echo`: the JSON echo used as a load upstream."""

import http.client
import json

import upstreams as U


def test_dev_echo_get_shape(start_dev_echo):
    echo = start_dev_echo()
    with U.Conn(echo.port) as c:
        r = c.request(b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Two: 2\r\n\r\n")
    assert r.status == 200
    assert (r.one("content-type") or "").startswith("application/json")
    doc = json.loads(r.body)
    assert doc["method"] == "GET" and doc["target"] == "/a?b=1" and doc["version"] == "HTTP/1.1"
    assert doc["headers"][:2] == [["Host", "x"], ["X-Two", "2"]]
    assert doc["body_bytes"] == 0 and doc["body_sha256"] == U.sha256(b"")


def test_dev_echo_bodies_and_keepalive(start_dev_echo):
    echo = start_dev_echo()
    body = U.blob(100_000)
    with U.Conn(echo.port) as c:
        r1 = c.request(b"POST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        r2 = c.request(b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + U.chunk_encode(body, 3333))
        r3 = c.request(b"GET /d HTTP/1.1\r\nHost: x\r\n\r\n")
    for r in (r1, r2):
        doc = json.loads(r.body)
        assert r.status == 200 and doc["method"] == "POST"
        assert doc["body_bytes"] == len(body) and doc["body_sha256"] == U.sha256(body)
    assert json.loads(r3.body)["target"] == "/d"


def test_dev_echo_with_http_client(start_dev_echo):
    echo = start_dev_echo()
    conn = http.client.HTTPConnection("127.0.0.1", echo.port, timeout=10)
    try:
        for i in range(3):
            conn.request("PUT", f"/p/{i}", body=b"abc", headers={"X-I": str(i)})
            resp = conn.getresponse()
            doc = json.loads(resp.read())
            assert resp.status == 200 and doc["method"] == "PUT" and doc["target"] == f"/p/{i}"
            assert ["X-I", str(i)] in doc["headers"] and doc["body_bytes"] == 3
    finally:
        conn.close()
