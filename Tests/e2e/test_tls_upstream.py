"""TLS to upstreams (`url: https://…`, optional `ca_file`): the real gateway in front of a Python HTTPS upstream with a
certificate from a test CA; requests and bodies arrive intact over pooled connections, and an upstream whose
certificate does not verify gets 502 without a byte of the request."""

from __future__ import annotations

import hashlib
import json
from http.server import BaseHTTPRequestHandler

import pytest

import upstreams as U
from apple_fakes import make_tls, serve_https
from harness import free_port, gateway_config, run_cli


class HTTPSEcho:
    def __init__(self, tls):
        self.requests: list[dict] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                owner.connections += 1
                super().setup()

            def _echo(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else b""
                owner.requests.append({"path": self.path, "headers": dict(self.headers), "sha": hashlib.sha256(body).hexdigest()})
                data = json.dumps({"path": self.path, "body_sha256": hashlib.sha256(body).hexdigest()}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _echo
            do_POST = _echo

        self.server = serve_https(Handler, tls)
        self.port = self.server.server_address[1]

    def kill(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def env(factory, tmp_path):
    tls = make_tls(tmp_path / "pki")
    other = make_tls(tmp_path / "other")
    up = HTTPSEcho(tls)
    factory.items.append(up)
    return type("Env", (), dict(tls=tls, other=other, up=up, factory=factory, tmp=tmp_path))


def start(env, ca) -> int:
    port = free_port()
    env.factory.gateway(gateway_config(port, {"api": {"url": f"https://127.0.0.1:{env.up.port}/base", "ca_file": str(ca)}}))
    return port


def test_requests_and_bodies_reach_an_https_upstream_over_pooled_connections(env):
    port = start(env, env.tls.ca)
    body = bytes(range(256)) * 4096
    with U.Conn(port) as c:
        for i in range(3):
            r = c.request(f"GET /g{i}?q=1 HTTP/1.1\r\nHost: gw.test\r\n\r\n".encode())
            assert r.status == 200 and json.loads(r.body)["path"] == f"/base/g{i}?q=1"
        r = c.request(b"POST /p HTTP/1.1\r\nHost: gw.test\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert r.status == 200 and json.loads(r.body)["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert env.up.connections == 1, "the TLS connection to the upstream was not reused"
    assert env.up.requests[0]["headers"]["X-Forwarded-Proto"] == "http"


def test_an_upstream_certificate_that_does_not_verify_is_502(env):
    port = start(env, env.other.ca)
    r = U.one_shot(port, b"GET /x HTTP/1.1\r\nHost: gw.test\r\n\r\n")
    assert r.status == 502
    assert env.up.requests == []


def test_ca_file_needs_an_https_url(env, gateway_bin, tmp_path):
    cfg = tmp_path / "gw.yml"
    cfg.write_text(gateway_config(free_port(), {"api": {"url": "http://127.0.0.1:9", "ca_file": str(env.tls.ca)}}))
    out = run_cli(gateway_bin, "check-config", "--config", str(cfg))
    assert out.returncode == 1 and b"ca_file needs an https:// url" in out.stderr
