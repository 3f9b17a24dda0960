"""WebSockets through the gateway (RFC 6455 over HTTP/1.1, CONFIG.md Additions `websocket`, `stream_idle_timeout`,
`token_query_parameter`; PROTOCOL.md `upgrade_not_allowed`).

Real parts only: PyPI's `websockets` as the client and as the upstream echo server (its threaded sync server), a
real dev issuer for App Check tokens, the real gateway binary. A handshake is verified like a GET; after the
upstream's 101 the gateway relays bytes both ways until a side closes, the idle limit passes or SIGTERM's drain
timeout ends it. Every way around the rule "only a route with `websocket: true` switches protocols" is tried."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time
import urllib.request

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.sync.server import serve

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config

pytestmark = pytest.mark.timeout_s(90)

H = "X-Firebase-AppCheck"


class EchoServer:
    """A websockets echo server in a thread. `info` on a connection answers its handshake's path and headers as
    JSON; `close <code>` makes the server close with that code; every close code the server received is kept."""

    def __init__(self):
        self.port = free_port()
        self.handshakes: list[dict] = []
        self.client_close_codes: list[int | None] = []
        self.server = serve(self._handler, "127.0.0.1", self.port, max_size=None, compression=None)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _handler(self, ws):
        request = {"path": ws.request.path, "headers": {k.lower(): v for k, v in ws.request.headers.raw_items()}}
        self.handshakes.append(request)
        try:
            for message in ws:
                if message == "info":
                    ws.send(json.dumps(request))
                elif isinstance(message, str) and message.startswith("close "):
                    ws.close(int(message.split()[1]), "server says bye")
                    return
                else:
                    ws.send(message)
        except ConnectionClosed:
            pass
        self.client_close_codes.append(ws.close_code)

    def kill(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def env(module_factory):
    iss = module_factory.dev_issuer()
    echo = EchoServer()
    module_factory.items.append(echo)
    plain = module_factory.upstream(name="ws-plain")
    port, admin = free_port(), free_port()
    verifiers = {"firebase": app_check_verifier(iss.jwks_url, token_query_parameter="ac")}
    routes = [
        {"name": "chat", "match": {"path_prefix": "/ws/"}, "upstream": "echo", "verify": ["firebase"],
         "websocket": True},
        {"name": "open-ws", "match": {"path_prefix": "/open/"}, "upstream": "echo", "websocket": True,
         "stream_idle_timeout": "1s"},
        {"name": "no-ws", "match": {"path_prefix": "/plain/"}, "upstream": "plain"},
        {"name": "no-ws-echo", "match": {"path_prefix": "/nows/"}, "upstream": "echo"},
    ]
    text = gateway_config(port, {"echo": f"http://127.0.0.1:{echo.port}", "plain": plain.url}, routes,
                          verifiers=verifiers, limits={"drain_timeout": "2s"})
    text = text.replace("listeners:", f"admin:\n  address: 127.0.0.1:{admin}\nlisteners:", 1)
    gw = module_factory.gateway(text)
    token = iss.token()
    deadline = time.monotonic() + 10
    while True:   # the key set is fetched in the background at start
        try:
            with connect(f"ws://127.0.0.1:{port}/ws/ready", additional_headers={H: token}, open_timeout=5):
                break
        except InvalidStatus:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return type("Env", (), dict(iss=iss, echo=echo, plain=plain, port=port, admin=admin, gw=gw))


def url(env, path: str) -> str:
    return f"ws://127.0.0.1:{env.port}{path}"


def raw(env, data: bytes, timeout: float = 5.0) -> bytes:
    """Sends `data` on a fresh connection; everything the gateway answers until it closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", env.port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                piece = s.recv(65536)
                if not piece:
                    break
                out += piece
                if b"\r\n\r\n" in out and b"Content-Length" in out:
                    head, _, body = out.partition(b"\r\n\r\n")
                    n = int(re.search(rb"Content-Length: (\d+)", head).group(1))
                    if len(body) >= n:
                        break
        except socket.timeout:
            pass
        return out


def handshake(path: str, extra: str = "", method: str = "GET", version: str = "HTTP/1.1",
              connection: str = "Upgrade", body: bytes = b"") -> bytes:
    head = (f"{method} {path} {version}\r\nHost: gw.test\r\nUpgrade: websocket\r\nConnection: {connection}\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + extra)
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return (head + "\r\n").encode() + body


def metrics(env) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{env.admin}/metrics", timeout=5) as r:
        return r.read().decode()


def sample(text: str, name: str, **labels) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_echo_with_a_valid_token_text_binary_16_mib_ping_and_close_codes(env):
    before = len(env.echo.client_close_codes)
    with connect(url(env, "/ws/room?x=1"), additional_headers={H: env.iss.token()}, max_size=None,
                 compression=None, open_timeout=5) as ws:
        ws.send("hello")
        assert ws.recv(timeout=5) == "hello"
        ws.send(b"\x00\x01\xffbinary")
        assert ws.recv(timeout=5) == b"\x00\x01\xffbinary"
        big = U.blob(16 * 1024 * 1024)
        ws.send(big)
        assert ws.recv(timeout=30) == big
        pong = ws.ping(b"are you there")
        assert pong.wait(5), "no pong through the tunnel"
        ws.send("info")
        seen = json.loads(ws.recv(timeout=5))
        ws.close(4001, "client says bye")
    # The upstream saw the verified handshake: path as sent, verdict headers, the token stripped.
    assert seen["path"] == "/ws/room?x=1"
    assert seen["headers"]["x-attest-verdict"] == "verified"
    assert H.lower() not in seen["headers"]
    assert seen["headers"]["upgrade"].lower() == "websocket"
    deadline = time.monotonic() + 5
    while 4001 not in env.echo.client_close_codes[before:] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 4001 in env.echo.client_close_codes[before:], "the client's close code did not reach the upstream"


def test_a_close_code_from_the_upstream_reaches_the_client(env):
    with connect(url(env, "/ws/x"), additional_headers={H: env.iss.token()}, open_timeout=5) as ws:
        ws.send("close 4002")
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
        assert ws.close_code == 4002
        assert ws.close_reason == "server says bye"


def test_a_handshake_without_a_token_is_refused_and_never_reaches_the_upstream(env):
    before = len(env.echo.handshakes)
    with pytest.raises(InvalidStatus) as e:
        connect(url(env, "/ws/x"), open_timeout=5)
    assert e.value.response.status_code == 401
    assert json.loads(e.value.response.body)["reason"] == "missing_token"
    with pytest.raises(InvalidStatus) as e:
        connect(url(env, "/ws/x"), additional_headers={H: env.iss.token()[:-4] + "AAAA"}, open_timeout=5)
    assert e.value.response.status_code == 401
    assert len(env.echo.handshakes) == before


def test_a_route_without_websocket_refuses_the_handshake_instead_of_downgrading_it(env):
    before = len(env.plain.requests)
    answer = raw(env, handshake("/plain/x"))
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b'"reason":"upgrade_not_allowed"' in answer
    assert len(env.plain.requests) == before, "the handshake went upstream as a plain GET"
    # The same through the websockets client, to an upstream that would have switched.
    with pytest.raises(InvalidStatus) as e:
        connect(url(env, "/nows/x"), open_timeout=5)
    assert e.value.response.status_code == 400


@pytest.mark.parametrize("variant", ["no-connection-upgrade", "post-with-body", "http10", "head-method", "case"])
def test_handshakes_not_of_the_rfc_form_are_refused(env, variant):
    before = len(env.echo.handshakes)
    data = {
        "no-connection-upgrade": handshake("/open/x", connection="keep-alive"),
        "post-with-body": handshake("/open/x", method="POST", body=b"hello"),
        "http10": handshake("/open/x", version="HTTP/1.0"),
        "head-method": handshake("/open/x", method="HEAD"),
        # Upgrade named in another case and beside another protocol is still a WebSocket attempt.
        "case": handshake("/plain/x", extra="").replace(b"Upgrade: websocket", b"Upgrade: h2c, WebSocket"),
    }[variant]
    answer = raw(env, data)
    assert answer.startswith(b"HTTP/1.1 400 ") or answer.startswith(b"HTTP/1.0 400 "), answer[:200]
    if variant != "head-method":   # a HEAD answer has no body to name the reason
        assert b"upgrade_not_allowed" in answer
    assert len(env.echo.handshakes) == before


def test_other_upgrades_are_still_removed_and_the_request_forwarded(env):
    data = b"GET /plain/h2c HTTP/1.1\r\nHost: gw.test\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
    r = U.one_shot(env.port, data)
    assert r.status == 200
    seen = env.plain.requests[-1]
    assert seen.one("upgrade") is None and seen.one("http2-settings") is None


def test_an_upstream_that_does_not_switch_is_relayed_and_one_that_switches_to_something_else_is_refused(module_factory, env):
    refuse = module_factory.upstream(U.b_raw(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 4\r\n\r\nnope"), name="ws-403")
    wrong = module_factory.upstream(U.b_raw(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"),
                                    name="ws-h2c")
    port = free_port()
    routes = [{"name": "refuse", "match": {"path_prefix": "/refuse/"}, "upstream": "refuse", "websocket": True},
              {"name": "wrong", "match": {"path_prefix": "/wrong/"}, "upstream": "wrong", "websocket": True}]
    gw = module_factory.gateway(gateway_config(port, {"refuse": refuse.url, "wrong": wrong.url}, routes))
    with pytest.raises(InvalidStatus) as e:
        connect(f"ws://127.0.0.1:{port}/refuse/x", open_timeout=5)
    assert e.value.response.status_code == 403 and e.value.response.body == b"nope"
    with pytest.raises(InvalidStatus) as e:
        connect(f"ws://127.0.0.1:{port}/wrong/x", open_timeout=5)
    assert e.value.response.status_code == 502
    assert json.loads(e.value.response.body)["reason"] == "upstream_invalid_response"
    gw.stop()


def test_the_token_may_come_from_the_query_parameter_which_never_reaches_the_upstream_or_the_log(env):
    token = env.iss.token()
    with connect(url(env, f"/ws/q?room=7&ac={token}&z=1"), open_timeout=5) as ws:
        ws.send("info")
        seen = json.loads(ws.recv(timeout=5))
    assert seen["path"] == "/ws/q?room=7&z=1"
    assert seen["headers"]["x-attest-verdict"] == "verified"
    assert H.lower() not in seen["headers"] and token not in json.dumps(seen)
    time.sleep(0.3)
    assert token not in env.gw.stdout() and token not in env.gw.stderr()
    # Header and query both: two credentials, refused as malformed rather than one picked.
    with pytest.raises(InvalidStatus) as e:
        connect(url(env, f"/ws/q?ac={token}"), additional_headers={H: token}, open_timeout=5)
    assert json.loads(e.value.response.body)["reason"] == "malformed_token"
    # Not a handshake: the query parameter is no credential, and stays in the target.
    r = U.one_shot(env.port, f"GET /ws/q?ac={token} HTTP/1.1\r\nHost: gw.test\r\n\r\n".encode())
    assert r.status == 401


def test_tunnels_and_their_bytes_are_counted_and_logged(env):
    before = metrics(env)
    with connect(url(env, "/ws/m"), additional_headers={H: env.iss.token()}, open_timeout=5, compression=None) as ws:
        ws.send("x" * 1000)
        assert len(ws.recv(timeout=5)) == 1000
        during = metrics(env)
        assert sample(during, "attest_gateway_websocket_tunnels_active", route="chat") >= 1
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        after = metrics(env)
        if sample(after, "attest_gateway_websocket_tunnels_active", route="chat") == 0:
            break
        time.sleep(0.05)
    assert sample(after, "attest_gateway_websocket_tunnels_active", route="chat") == 0
    assert sample(after, "attest_gateway_websocket_tunnels_total", route="chat") \
        == sample(before, "attest_gateway_websocket_tunnels_total", route="chat") + 1
    up = sample(after, "attest_gateway_websocket_bytes_total", route="chat", direction="upstream") \
        - sample(before, "attest_gateway_websocket_bytes_total", route="chat", direction="upstream")
    down = sample(after, "attest_gateway_websocket_bytes_total", route="chat", direction="downstream") \
        - sample(before, "attest_gateway_websocket_bytes_total", route="chat", direction="downstream")
    assert 1000 < up < 1200 and 1000 < down < 1200, (up, down)
    lines = [l for l in env.gw.log_lines() if l.get("path") == "/ws/m"]
    assert lines and lines[-1]["status"] == 101 and lines[-1]["upstream_status"] == 101
    assert lines[-1]["bytes_in"] > 1000 and lines[-1]["bytes_out"] > 1000


def test_an_idle_tunnel_is_closed_after_stream_idle_timeout(env):
    with connect(url(env, "/open/idle"), open_timeout=5) as ws:
        ws.send("still here")
        assert ws.recv(timeout=5) == "still here"
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert 0.5 < time.monotonic() - t0 < 5


def test_sigterm_keeps_an_open_tunnel_until_the_drain_timeout(module_factory):
    echo = EchoServer()
    module_factory.items.append(echo)
    port = free_port()
    routes = [{"name": "ws", "match": {"path_prefix": "/"}, "upstream": "echo", "websocket": True}]
    gw = module_factory.gateway(gateway_config(port, {"echo": f"http://127.0.0.1:{echo.port}"}, routes,
                                               limits={"drain_timeout": "2s"}))
    with connect(f"ws://127.0.0.1:{port}/x", open_timeout=5) as ws:
        gw.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        ws.send("during the drain")
        assert ws.recv(timeout=5) == "during the drain"
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert time.monotonic() - t0 < 5
    assert gw.proc.wait(timeout=10) is not None
