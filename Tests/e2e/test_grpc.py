"""gRPC through the gateway (CONFIG.md Additions upstream `protocol: h2c | h2`, route `stream_idle_timeout`;
PROTOCOL.md Additions: trailers-only rejections with `grpc-status` and the reason in `grpc-message`).

Real parts only: PyPI's `grpcio` as the client and as the upstream server (generic handlers over raw bytes, so no
generated code), over h2c and over TLS (ALPN h2, a test CA), the real dev issuer for App Check tokens in metadata
`x-firebase-appcheck`, the real gateway binary. All four RPC shapes, status codes with details and trailing
metadata (binary ones too), rejections as gRPC statuses, one multiplexed upstream connection, and the idle limit
that replaces response_timeout for streams."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest

from apple_fakes import make_tls
from harness import app_check_verifier, free_port, gateway_config

pytestmark = pytest.mark.timeout_s(120)

H = "x-firebase-appcheck"


def _ident(b):
    return b


class EchoService:
    """`test.Echo` (and `test.Secure`, the same methods) over raw bytes. Unary echoes (b"fail" aborts with
    INVALID_ARGUMENT, details and trailing metadata; b"meta" answers the metadata it saw); ServerStream answers
    int(request) messages (b"slow:N:S": N messages S seconds apart); ClientStream answers the concatenation; Bidi
    echoes each message as it comes."""

    def __init__(self):
        self.peers: set[str] = set()
        self.metadata: list[dict] = []
        self.lock = threading.Lock()

    def _note(self, context):
        with self.lock:
            self.peers.add(context.peer())
            self.metadata.append({k: v for k, v in context.invocation_metadata()})

    def unary(self, request, context):
        self._note(context)
        context.set_trailing_metadata((("x-trailer", "yes"), ("x-bin-bin", b"\x00\x01\xfe")))
        if request == b"fail":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the request was refused by the service")
        if request == b"meta":
            return repr(sorted(self.metadata[-1].items())).encode()
        return request

    def server_stream(self, request, context):
        self._note(context)
        if request.startswith(b"slow:"):
            _, n, gap = request.split(b":")
            for i in range(int(n)):
                if i:
                    time.sleep(float(gap))
                yield b"tick %d" % i
            return
        for i in range(int(request)):
            yield b"message %d" % i

    def client_stream(self, request_iterator, context):
        self._note(context)
        return b"".join(request_iterator)

    def bidi(self, request_iterator, context):
        self._note(context)
        for m in request_iterator:
            yield b"echo:" + m

    def handlers(self):
        methods = {
            "Unary": grpc.unary_unary_rpc_method_handler(self.unary, _ident, _ident),
            "ServerStream": grpc.unary_stream_rpc_method_handler(self.server_stream, _ident, _ident),
            "ClientStream": grpc.stream_unary_rpc_method_handler(self.client_stream, _ident, _ident),
            "Bidi": grpc.stream_stream_rpc_method_handler(self.bidi, _ident, _ident),
        }
        return [grpc.method_handlers_generic_handler("test.Echo", methods),
                grpc.method_handlers_generic_handler("test.Secure", methods),
                grpc.method_handlers_generic_handler("test.Idle", methods),
                grpc.method_handlers_generic_handler("test.Open", methods)]


class GRPCServer:
    def __init__(self, tls=None):
        self.service = EchoService()
        opts = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=opts)
        self.server.add_generic_rpc_handlers(self.service.handlers())
        if tls:
            creds = grpc.ssl_server_credentials([(tls.key.read_bytes(), tls.cert.read_bytes())])
            self.port = self.server.add_secure_port("127.0.0.1:0", creds)
        else:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def kill(self):
        self.server.stop(0)


@pytest.fixture(scope="module")
def env(module_factory, tmp_path_factory):
    iss = module_factory.dev_issuer()
    tls = make_tls(tmp_path_factory.mktemp("grpc-pki"))
    plain, secure = GRPCServer(), GRPCServer(tls)
    module_factory.items += [plain, secure]
    port = free_port()
    routes = [
        {"name": "echo", "match": {"path_prefix": "/test.Echo/"}, "upstream": "grpc", "verify": ["firebase"]},
        {"name": "secure", "match": {"path_prefix": "/test.Secure/"}, "upstream": "grpcs", "verify": ["firebase"]},
        {"name": "idle", "match": {"path_prefix": "/test.Idle/"}, "upstream": "grpc-quick", "verify": [],
         "stream_idle_timeout": "1s"},
        {"name": "open", "match": {"path_prefix": "/test.Open/"}, "upstream": "grpc-quick", "verify": [],
         "stream_idle_timeout": "5s"},
    ]
    ups = {
        "grpc": {"url": f"http://127.0.0.1:{plain.port}", "protocol": "h2c"},
        "grpcs": {"url": f"https://127.0.0.1:{secure.port}", "protocol": "h2", "ca_file": str(tls.ca)},
        # response_timeout 1s: a gRPC stream is held to stream_idle_timeout instead
        "grpc-quick": {"url": f"http://127.0.0.1:{plain.port}", "protocol": "h2c", "response_timeout": "1s"},
    }
    text = gateway_config(port, ups, routes, verifiers={"firebase": app_check_verifier(iss.jwks_url)},
                          limits={"max_body_bytes": "32MiB"})
    text = text.replace(f'- address: "127.0.0.1:{port}"', f'- address: "127.0.0.1:{port}"\n    http2: true', 1)
    if "http2: true" not in text:
        text = text.replace(f"- address: 127.0.0.1:{port}", f"- address: 127.0.0.1:{port}\n    http2: true", 1)
    assert "http2: true" in text
    gw = module_factory.gateway(text)
    opts = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=opts)
    e = type("Env", (), dict(iss=iss, plain=plain, secure=secure, port=port, gw=gw, channel=channel))
    token = iss.token()
    deadline = time.monotonic() + 10
    while True:   # the key set is fetched in the background at start
        try:
            unary(e, "test.Echo")(b"ready", metadata=((H, token),), timeout=5)
            break
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    yield e
    channel.close()


def unary(env, service="test.Echo"):
    return env.channel.unary_unary(f"/{service}/Unary", request_serializer=_ident, response_deserializer=_ident)


def server_stream(env, service="test.Echo"):
    return env.channel.unary_stream(f"/{service}/ServerStream", request_serializer=_ident, response_deserializer=_ident)


def client_stream(env, service="test.Echo"):
    return env.channel.stream_unary(f"/{service}/ClientStream", request_serializer=_ident, response_deserializer=_ident)


def bidi(env, service="test.Echo"):
    return env.channel.stream_stream(f"/{service}/Bidi", request_serializer=_ident, response_deserializer=_ident)


def md(env):
    return ((H, env.iss.token()),)


@pytest.mark.parametrize("service", ["test.Echo", "test.Secure"], ids=["h2c", "h2-tls"])
def test_unary_with_trailing_metadata(env, service):
    reply, call = unary(env, service).with_call(b"hello", metadata=md(env), timeout=10)
    assert reply == b"hello"
    trailers = dict(call.trailing_metadata())
    assert trailers["x-trailer"] == "yes"
    assert trailers["x-bin-bin"] == b"\x00\x01\xfe", "a binary trailer must arrive byte for byte"
    assert call.code() == grpc.StatusCode.OK


@pytest.mark.parametrize("service", ["test.Echo", "test.Secure"], ids=["h2c", "h2-tls"])
def test_server_streaming(env, service):
    got = list(server_stream(env, service)(b"200", metadata=md(env), timeout=20))
    assert got == [b"message %d" % i for i in range(200)]


@pytest.mark.parametrize("service", ["test.Echo", "test.Secure"], ids=["h2c", "h2-tls"])
def test_client_streaming(env, service):
    parts = [bytes([i]) * 1000 for i in range(100)]
    assert client_stream(env, service)(iter(parts), metadata=md(env), timeout=20) == b"".join(parts)


@pytest.mark.parametrize("service", ["test.Echo", "test.Secure"], ids=["h2c", "h2-tls"])
def test_bidi_streaming_is_interleaved(env, service):
    """Each reply comes back before the next message is sent: neither direction is buffered to its end."""
    outbox: list[bytes] = []
    ready = threading.Event()

    def requests():
        for i in range(20):
            outbox.append(b"m%d" % i)
            yield b"m%d" % i
            assert ready.wait(10), "no reply came before the next message (the gateway buffered the stream)"
            ready.clear()

    replies = []
    for r in bidi(env, service)(requests(), metadata=md(env), timeout=30):
        replies.append(r)
        ready.set()
    assert replies == [b"echo:" + m for m in outbox]


def test_large_messages_both_ways_pass_flow_control(env):
    big = bytes(range(256)) * (16 * 4096)   # 16 MiB
    assert unary(env)(big, metadata=md(env), timeout=60) == big


def test_missing_token_is_unauthenticated_with_the_reason(env):
    with pytest.raises(grpc.RpcError) as e:
        unary(env)(b"x", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert e.value.details() == "missing_token"
    # The challenge an HTTP client gets (RFC 9110 11.6.1) is in the trailers-only answer too.
    challenge = dict(e.value.trailing_metadata()).get("www-authenticate", "")
    assert challenge.startswith("AppCheck ") and 'error="missing_token"' in challenge


def test_invalid_token_is_unauthenticated_and_never_reaches_the_service(env):
    before = len(env.plain.service.metadata)
    with pytest.raises(grpc.RpcError) as e:
        list(server_stream(env)(b"3", metadata=((H, "not.a.token"),), timeout=10))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert e.value.details() == "malformed_token"
    assert len(env.plain.service.metadata) == before


def test_status_details_and_trailers_of_a_failed_call_are_intact(env):
    with pytest.raises(grpc.RpcError) as e:
        unary(env)(b"fail", metadata=md(env), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "the request was refused by the service"
    trailers = dict(e.value.trailing_metadata())
    assert trailers["x-trailer"] == "yes" and trailers["x-bin-bin"] == b"\x00\x01\xfe"


def test_unknown_service_is_unimplemented(env):
    with pytest.raises(grpc.RpcError) as e:
        env.channel.unary_unary("/nope.Nothing/Call", request_serializer=_ident, response_deserializer=_ident)(
            b"x", timeout=10)
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_the_service_sees_te_trailers_and_the_verdict(env):
    reply = unary(env)(b"meta", metadata=md(env), timeout=10)
    seen = dict(eval(reply.decode()))   # our own repr of the metadata the service got
    assert seen.get("x-attest-verifier") == "firebase"
    assert seen.get("x-attest-verdict") == "verified"


def test_calls_share_one_multiplexed_upstream_connection(env):
    svc = env.plain.service
    with svc.lock:
        svc.peers.clear()
    with futures.ThreadPoolExecutor(8) as pool:
        calls = [pool.submit(lambda i=i: list(server_stream(env)(b"50", metadata=md(env), timeout=20)))
                 for i in range(16)]
        for c in calls:
            assert len(c.result()) == 50
    assert len(svc.peers) == 1, f"16 concurrent calls used {len(svc.peers)} upstream connections: {svc.peers}"


def test_a_stream_outlives_response_timeout_while_it_is_not_idle(env):
    """The upstream's response_timeout is 1s; the route's stream_idle_timeout (5s) is what holds a gRPC call."""
    got = list(server_stream(env, "test.Open")(b"slow:3:1.5", timeout=20))
    assert got == [b"tick 0", b"tick 1", b"tick 2"]


def test_an_idle_stream_is_ended_at_stream_idle_timeout(env):
    t0 = time.monotonic()
    got = []
    with pytest.raises(grpc.RpcError) as e:
        for m in server_stream(env, "test.Idle")(b"slow:2:4", timeout=20):
            got.append(m)
    assert got == [b"tick 0"], "the first message came before the stream went idle"
    assert e.value.code() != grpc.StatusCode.OK
    assert time.monotonic() - t0 < 3.5, "the idle stream was not ended at its 1s stream_idle_timeout"


def test_access_log_counts_grpc_calls(env):
    unary(env)(b"logged", metadata=md(env), timeout=10)
    log = env.gw.stdout()
    assert '"/test.Echo/Unary"' in log and '"HTTP/2"' in log


def _h1(env, path: str, body: bytes, headers: str) -> bytes:
    """An HTTP/1.1 request on a raw socket; everything the gateway answers until the body (chunked) ends."""
    import socket
    with socket.create_connection(("127.0.0.1", env.port), timeout=10) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/grpc\r\nTE: trailers\r\n"
                  f"Content-Length: {len(body)}\r\n{headers}\r\n".encode() + body)
        out = b""
        while not (out.endswith(b"\r\n\r\n") and (b"\r\n0\r\n" in out or b"Content-Length: 0" in out)):
            piece = s.recv(65536)
            if not piece:
                break
            out += piece
        return out


def test_an_http1_grpc_call_without_a_token_gets_the_status_in_the_head(env):
    out = _h1(env, "/test.Echo/Unary", b"\x00\x00\x00\x00\x01x", "")
    head = out.split(b"\r\n\r\n")[0].decode()
    assert head.startswith("HTTP/1.1 200 ")
    assert "grpc-status: 16" in head and "grpc-message: missing_token" in head
    assert "Content-Type: application/grpc" in head


def test_an_http1_client_gets_the_upstreams_trailers_in_the_last_chunk(env):
    message = b"\x00" + (5).to_bytes(4, "big") + b"hello"
    out = _h1(env, "/test.Echo/Unary", message, f"{H}: {env.iss.token()}\r\n")
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert b"hello" in body
    tail = body[body.rindex(b"\r\n0\r\n") + 5:]
    assert b"grpc-status: 0" in tail and b"x-trailer: yes" in tail, tail


def _connections_to(port: int) -> int:
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True, timeout=5).stdout
    return len([line for line in out.splitlines() if line.strip()])


def test_a_reload_lets_a_call_in_flight_finish_and_closes_the_old_connection(factory):
    """A reload that changes the upstream retires its pool while a server-streaming call is open on the pool's
    h2 connection: the call gets every message and its status, new calls take a new connection, and the old one
    closes after its last stream."""
    server = GRPCServer()
    factory.items.append(server)
    port = free_port()
    ups = {"grpc": {"url": f"http://127.0.0.1:{server.port}", "protocol": "h2c"}}
    routes = [{"name": "open", "match": {"path_prefix": "/test.Open/"}, "upstream": "grpc", "verify": []}]
    text = gateway_config(port, ups, routes)
    text = re.sub(r'(- address: "?127\.0\.0\.1:%d"?)' % port, r"\1\n    http2: true", text, count=1)
    gw = factory.gateway(text)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        call = channel.unary_stream("/test.Open/ServerStream", request_serializer=_ident, response_deserializer=_ident)
        got = []
        t = threading.Thread(target=lambda: got.extend(call(b"slow:6:0.4", timeout=20)))
        t.start()
        time.sleep(0.6)
        assert _connections_to(server.port) == 1
        gw.config_path.write_text(gw.config_path.read_text().replace("response_timeout: 30s", "response_timeout: 29s"))
        gw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload: configuration applied" not in gw.stderr():
            assert time.monotonic() < deadline, gw.stderr()
            time.sleep(0.05)
        assert list(call(b"2", timeout=10)) == [b"message 0", b"message 1"]   # the new pool's connection
        assert _connections_to(server.port) == 2
        t.join(20)
        assert got == [b"tick %d" % i for i in range(6)]
        deadline = time.monotonic() + 5
        while _connections_to(server.port) != 1:
            assert time.monotonic() < deadline, "the retired pool's connection stayed open after its last stream"
            time.sleep(0.05)
    finally:
        channel.close()
