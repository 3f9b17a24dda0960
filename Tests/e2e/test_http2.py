"""HTTP/2 on listeners (`http2: true`): h2c with prior knowledge on a plaintext listener (HTTP/1.1 still served on
it), h2 by ALPN on a TLS listener (a TLS listener without `http2` keeps offering http/1.1 only). The real gateway
behind curl, nghttp, h2load, python-h2 and hand-built frames, real loopback upstreams, a test CA made at test time.

Checked: every h2 stream is one request through the same routing, verification and upstream path as HTTP/1.1 (same
status and body, X-Attest-* verdict headers, token header stripped; the upstream always gets HTTP/1.1 with Host from
:authority); response header names lowercase and no connection-specific fields; SETTINGS MAX_CONCURRENT_STREAMS 100
(the 101st stream refused) and MAX_HEADER_LIST_SIZE = limits.max_header_bytes; 100 concurrent streams on one
connection each answered with its own response; 50 MiB up and down byte-identical; request bodies with and without
content-length, 413 over a route's max_body_bytes; flow control (a client that stops reading does not make the
gateway buffer the response); certificates reloaded on SIGHUP for new h2 connections while an open one keeps
working; the access log. Floods (PING, SETTINGS, rapid reset, CONTINUATION, a header block over max_header_bytes)
end the connection -- a GOAWAY with a nonzero code, or EOF/reset, within a few seconds -- and the gateway keeps
serving new connections; a handful of PINGs is simply answered."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from types import SimpleNamespace

import hpack
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.exceptions import StreamClosedError
from h2 import events as ev

import upstreams as U
from apple_fakes import make_tls
from harness import app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts, wait_listening

H = "x-firebase-appcheck"            # h2 field names are lowercase on the wire
APP = "1:123456789012:ios:0123456789abcdef"
MAX_HEADER_BYTES = 16 * 1024
MIB = 1024 * 1024
CONNECTION_SPECIFIC = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}

pytestmark = pytest.mark.timeout_s(30)

# ----------------------------------------------------------------------------------------------------------------
# Configuration: several listeners in one gateway.


def listeners_yaml(specs) -> str:
    """specs: (port, http2, tls) with tls None or (certificate, private_key)."""
    out = "listeners:\n"
    for port, http2, tls in specs:
        out += f'  - address: "127.0.0.1:{port}"\n'
        if http2:
            out += "    http2: true\n"
        if tls:
            out += f'    tls:\n      certificate: "{tls[0]}"\n      private_key: "{tls[1]}"\n'
    return out


def h2_config(specs, up_url: str, jwks_url: str | None = None, limits: dict | None = None) -> str:
    routes = [{"name": "small", "match": {"path_prefix": "/small"}, "upstream": "up", "verify": [],
               "max_body_bytes": 100},
              {"name": "open", "match": {"path_prefix": "/"}, "upstream": "up", "verify": []}]
    verifiers = None
    if jwks_url:
        routes.insert(0, {"name": "ac", "match": {"path_prefix": "/ac"}, "upstream": "up", "verify": ["fb"]})
        verifiers = {"fb": app_check_verifier(jwks_url)}
    cfg = gateway_config(specs[0][0], {"up": up_url}, routes=routes, verifiers=verifiers,
                         limits=limits or {"max_body_bytes": "64MiB", "max_header_bytes": "16KiB"})
    single = f'listeners:\n  - address: "127.0.0.1:{specs[0][0]}"\n'
    assert single in cfg
    return cfg.replace(single, listeners_yaml(specs), 1)


def b_hop_by_hop(req: U.Req, ctx: U.Ctx) -> None:
    """An HTTP/1.1 answer full of connection-specific fields, chunked."""
    ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n"
             b"X-Hop: gone\r\nX-Kept: yes\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")


def b_trailers(req: U.Req, ctx: U.Ctx) -> None:
    """A chunked HTTP/1.1 answer with trailer fields: one to relay, and ones no trailer may carry."""
    ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"5\r\nhello\r\n0\r\nX-Checksum: abc123 \r\nContent-Length: 99\r\nX-Attest-Verdict: forged\r\n"
             b"Set-Cookie: s=1\r\n\r\n")


@pytest.fixture(scope="module")
def env(module_factory):
    tmp = module_factory.tmp
    pki = make_tls(tmp / "h2pki")
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(U.b_routes({"/hop": b_hop_by_hop, "/trailers": b_trailers}), name="h2-up")
    h2c, tls_h2, tls_h1 = free_port(), free_port(), free_port()
    gw = module_factory.gateway(h2_config([(h2c, True, None), (tls_h2, True, (pki.cert, pki.key)),
                                           (tls_h1, False, (pki.cert, pki.key))], up.url, iss.jwks_url))
    for p in (tls_h2, tls_h1):
        wait_listening(p, gw.proc, 10, "attest-gateway serve (second listener)")
    wait_gateway_accepts(h2c, "/ac/ready", H, iss.token())
    return SimpleNamespace(gw=gw, up=up, iss=iss, pki=pki, h2c=h2c, tls_h2=tls_h2, tls_h1=tls_h1, tmp=tmp)


def upstream_requests(up: U.Upstream, target: str) -> list[U.Req]:
    with up.lock:
        return [q for q in up.requests if q.target == target]


def run(*cmd, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# ----------------------------------------------------------------------------------------------------------------
# python-h2 client over one socket (h2c prior knowledge, or TLS with ALPN h2).


class Stream:
    def __init__(self, sid: int):
        self.sid = sid
        self.headers: list[tuple[str, str]] | None = None
        self.trailers: list[tuple[str, str]] = []
        self.sink = U.BodySink()
        self.ended = False
        self.reset: int | None = None

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None

    @property
    def status(self) -> int | None:
        v = self.one(":status")
        return int(v) if v is not None else None

    def get(self, name: str) -> list[str]:
        return [v for k, v in (self.headers or []) if k == name]

    def one(self, name: str) -> str | None:
        vals = self.get(name)
        return vals[0] if vals else None

    @property
    def body(self) -> bytes | None:
        return self.sink.body

    def json(self):
        return json.loads(self.sink.body)

    def describe(self) -> str:
        return (f"stream {self.sid}: headers={self.headers} reset={self.reset} ended={self.ended} "
                f"body[:300]={(self.sink.body or b'')[:300]!r}")


class H2:
    def __init__(self, port: int, ca=None, timeout: float = 10.0, authority: str = "h2.test"):
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if ca is not None:
            ctx = ssl.create_default_context(cafile=str(ca))
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            assert self.sock.selected_alpn_protocol() == "h2", f"ALPN chose {self.sock.selected_alpn_protocol()!r}"
        else:
            self.sock = raw
        self.timeout = timeout
        self.scheme = "https" if ca is not None else "http"
        self.authority = authority
        self.c = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8",
                                              validate_inbound_headers=False))
        self.streams: dict[int, Stream] = {}
        self.settings_seen = False
        self.ping_acks: list[bytes] = []
        self.terminated: ev.ConnectionTerminated | None = None
        self.eof = False
        self.auto_ack = True
        self.c.initiate_connection()
        self.flush()

    def flush(self) -> None:
        data = self.c.data_to_send()
        if data:
            self.sock.sendall(data)

    def _handle(self, events) -> None:
        for e in events:
            sid = getattr(e, "stream_id", None)
            st = self.streams.get(sid) if sid else None
            if isinstance(e, ev.ResponseReceived) and st:
                st.headers = list(e.headers)
            elif isinstance(e, ev.TrailersReceived) and st:
                st.trailers = list(e.headers)
            elif isinstance(e, ev.DataReceived):
                if st:
                    st.sink(e.data)
                if self.auto_ack:
                    self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, ev.StreamEnded) and st:
                st.ended = True
            elif isinstance(e, ev.StreamReset) and st:
                st.reset = e.error_code
            elif isinstance(e, ev.RemoteSettingsChanged):
                self.settings_seen = True
            elif isinstance(e, ev.PingAckReceived):
                self.ping_acks.append(e.ping_data)
            elif isinstance(e, ev.ConnectionTerminated):
                self.terminated = e

    def pump(self, timeout: float = 0.5) -> bool:
        """One read (up to timeout); False when nothing arrived."""
        self.sock.settimeout(max(timeout, 0.01))
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, ssl.SSLWantReadError):
            return False
        except (ConnectionResetError, BrokenPipeError):
            self.eof = True
            return False
        finally:
            self.sock.settimeout(self.timeout)
        if not data:
            self.eof = True
            return False
        self._handle(self.c.receive_data(data))
        self.flush()
        return True

    def wait(self, pred, timeout: float = 10.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            assert left > 0, f"timed out after {timeout}s waiting for {what}"
            assert not (self.eof or self.terminated), \
                f"connection closed while waiting for {what}: {self.terminated or 'EOF'}"
            self.pump(min(left, 0.5))

    def request(self, method: str, path: str, headers=(), body: bytes | None = None, end: bool = True,
                authority: str | None = None, frame: int | None = None) -> int:
        sid = self.c.get_next_available_stream_id()
        self.streams[sid] = Stream(sid)
        hdrs = [(":method", method), (":scheme", self.scheme), (":authority", authority or self.authority),
                (":path", path), *headers]
        self.c.send_headers(sid, hdrs, end_stream=end and not body)
        self.flush()
        if body:
            self.send_body(sid, body, end=end, frame=frame)
        return sid

    def send_body(self, sid: int, data: bytes, end: bool = True, frame: int | None = None,
                  timeout: float = 30.0) -> int:
        """Sends data as DATA frames within the flow-control windows; stops early (returning how much was sent)
        when the server has answered or reset the stream."""
        view, off = memoryview(data), 0
        deadline = time.monotonic() + timeout
        st = self.streams[sid]
        try:
            while off < len(data):
                if st.done:
                    return off
                window = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size, frame or 1 << 30)
                if window <= 0:
                    assert time.monotonic() < deadline, f"no flow-control window for stream {sid} in {timeout}s"
                    assert not (self.eof or self.terminated), f"connection closed during the upload: {self.terminated}"
                    self.pump(0.2)
                    continue
                n = min(window, len(data) - off)
                self.c.send_data(sid, bytes(view[off:off + n]), end_stream=end and off + n == len(data))
                off += n
                self.flush()
        except StreamClosedError:
            return off
        return off

    def response(self, sid: int, timeout: float = 10.0) -> Stream:
        st = self.streams[sid]
        self.wait(lambda: st.done, timeout, f"the response on stream {sid}")
        return st

    def get(self, path: str, headers=(), timeout: float = 10.0) -> Stream:
        return self.response(self.request("GET", path, headers), timeout)

    def ping(self, data: bytes) -> None:
        self.c.ping(data)
        self.flush()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def assert_h2_response_fields(st: Stream) -> None:
    """Lowercase names, exactly one :status and it first, no connection-specific fields."""
    assert st.headers, st.describe()
    names = [k for k, _ in st.headers]
    assert names[0] == ":status" and names.count(":status") == 1, st.headers
    assert all(k == k.lower() for k in names), f"uppercase field names in an h2 response: {names}"
    bad = CONNECTION_SPECIFIC & set(names)
    assert not bad, f"connection-specific fields in an h2 response: {bad}"


def h2_ok(port: int, path: str, ca=None) -> Stream:
    c = H2(port, ca=ca, timeout=5)
    try:
        st = c.get(path, timeout=5)
        assert st.status == 200, st.describe()
        return st
    finally:
        c.close()


# ----------------------------------------------------------------------------------------------------------------
# Hand-built frames (for what python-h2 will not send): a raw client on plaintext h2c.

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20
S_INITIAL_WINDOW_SIZE = 0x4


def frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload


def code_name(code: int) -> str:
    try:
        return f"{ErrorCodes(code).name} (0x{code:x})"
    except ValueError:
        return f"0x{code:x}"


class RawH2:
    """Frames by hand; reads and decodes what comes back (SETTINGS, HEADERS+CONTINUATION, DATA, RST_STREAM,
    GOAWAY, PING). Large receive windows, so small answers never wait on WINDOW_UPDATE."""

    def __init__(self, port: int, timeout: float = 5.0, preface: bool = True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = bytearray()
        self.eof = False
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.dec.max_allowed_table_size = 65536
        self.server_settings: dict[int, int] | None = None
        self.settings_acked = False
        self.status: dict[int, int] = {}
        self.headers: dict[int, list] = {}
        self.bodies: dict[int, bytearray] = {}
        self.ended: set[int] = set()
        self.resets: dict[int, int] = {}
        self.goaway: tuple[int, int] | None = None
        self.ping_acks: list[bytes] = []
        self._block: tuple[int, int, bytearray] | None = None
        if preface:
            self.send(PREFACE + frame(SETTINGS, 0, 0, S_INITIAL_WINDOW_SIZE.to_bytes(2, "big") + (1 << 20).to_bytes(4, "big"))
                      + frame(WINDOW_UPDATE, 0, 0, (16 << 20).to_bytes(4, "big")))

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def block(self, path: str, method: str = "GET", extra=(), authority: str = "h2.test") -> bytes:
        return self.enc.encode([(":method", method), (":scheme", "http"), (":authority", authority), (":path", path),
                                *extra])

    def headers_frames(self, sid: int, block: bytes, end_stream: bool, max_frame: int = 16384) -> bytes:
        pieces = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
        out = bytearray()
        for i, p in enumerate(pieces):
            last = i == len(pieces) - 1
            if i == 0:
                out += frame(HEADERS, (END_STREAM if end_stream else 0) | (END_HEADERS if last else 0), sid, p)
            else:
                out += frame(CONTINUATION, END_HEADERS if last else 0, sid, p)
        return bytes(out)

    def read_frame(self, deadline: float):
        """(type, flags, sid, payload); None at EOF; TimeoutError at the deadline; resets propagate."""
        while True:
            if len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) >= 9 + n:
                    t, fl, sid = self.buf[3], self.buf[4], int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                    payload = bytes(self.buf[9:9 + n])
                    del self.buf[:9 + n]
                    self._process(t, fl, sid, payload)
                    return t, fl, sid, payload
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(min(left, 0.5))
            try:
                data = self.sock.recv(262144)
            except socket.timeout:
                continue
            if not data:
                self.eof = True
                return None
            self.buf += data

    def _process(self, t: int, fl: int, sid: int, p: bytes) -> None:
        if t == SETTINGS:
            if fl & ACK:
                self.settings_acked = True
            else:
                self.server_settings = {int.from_bytes(p[i:i + 2], "big"): int.from_bytes(p[i + 2:i + 6], "big")
                                        for i in range(0, len(p) - 5, 6)}
        elif t in (HEADERS, CONTINUATION):
            if t == HEADERS:
                pad = p[0] if fl & PADDED else 0
                p = p[(1 if fl & PADDED else 0) + (5 if fl & PRIORITY_FLAG else 0):len(p) - pad]
                self._block = (sid, fl, bytearray(p))
            else:
                self._block[2].extend(p)
            if fl & END_HEADERS:
                bsid, bfl, data = self._block
                self._block = None
                fields = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v)
                          for k, v in self.dec.decode(bytes(data))]
                if bsid not in self.status:
                    self.headers[bsid] = fields
                    self.status[bsid] = int(dict(fields)[":status"])
                if bfl & END_STREAM:
                    self.ended.add(bsid)
        elif t == DATA:
            pad = p[0] if fl & PADDED else 0
            self.bodies.setdefault(sid, bytearray()).extend(p[(1 if fl & PADDED else 0):len(p) - pad])
            if fl & END_STREAM:
                self.ended.add(sid)
        elif t == RST_STREAM:
            self.resets[sid] = int.from_bytes(p[:4], "big")
        elif t == GOAWAY:
            self.goaway = (int.from_bytes(p[:4], "big") & 0x7FFFFFFF, int.from_bytes(p[4:8], "big"))
        elif t == PING:
            if fl & ACK:
                self.ping_acks.append(p)
            else:
                self.send(frame(PING, ACK, 0, p))

    def read_until(self, pred, timeout: float = 5.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            try:
                f = self.read_frame(deadline)
            except TimeoutError:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; goaway={self.goaway} "
                                     f"resets={dict(list(self.resets.items())[:10])}")
            assert f is not None, f"EOF while waiting for {what}; goaway={self.goaway}"

    def wait_closed(self, timeout: float = 5.0) -> str | None:
        """How the connection ended (GOAWAY with a nonzero code, EOF, reset), or None if it is still open."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self.goaway and self.goaway[1] != 0:
                    return f"GOAWAY {code_name(self.goaway[1])}"
                if self.read_frame(deadline) is None:
                    return "EOF" + (f" after GOAWAY {code_name(self.goaway[1])}" if self.goaway else "")
        except TimeoutError:
            return None
        except (ConnectionResetError, BrokenPipeError) as e:
            return f"reset ({type(e).__name__})"

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def flood(port: int, build) -> str | None:
    """Sends build(conn) after the preface in one go; returns how the connection ended (None: still open)."""
    c = RawH2(port)
    try:
        data = build(c)
        try:
            c.send(data)
        except (ConnectionResetError, BrokenPipeError) as e:
            return f"reset while sending ({type(e).__name__})"
        return c.wait_closed(5.0)
    finally:
        c.close()


# ----------------------------------------------------------------------------------------------------------------
# 1. Negotiation: ALPN, h2c prior knowledge, HTTP/1.1 beside them; curl and nghttp.


def tls_client(port: int, ca, alpn) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(ca))
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")


def test_alpn_offers_h2_only_on_an_http2_tls_listener(env):
    s = tls_client(env.tls_h2, env.pki.ca, ("h2", "http/1.1"))
    assert s.selected_alpn_protocol() == "h2"
    s.close()
    s = tls_client(env.tls_h1, env.pki.ca, ("h2", "http/1.1"))
    assert s.selected_alpn_protocol() == "http/1.1", "a TLS listener without http2 must not offer h2"
    s.sendall(b"GET /alpn-h1 HTTP/1.1\r\nHost: gw.test\r\n\r\n")
    assert U.read_response(U.Reader(s)).status == 200
    s.close()
    for alpn in (("http/1.1",), None):                  # an HTTP/1.1-only client, and one without ALPN
        s = tls_client(env.tls_h2, env.pki.ca, alpn)
        assert s.selected_alpn_protocol() in ("http/1.1", None)
        s.sendall(b"GET /alpn-fallback HTTP/1.1\r\nHost: gw.test\r\n\r\n")
        r = U.read_response(U.Reader(s))
        assert r.status == 200 and r.json()["target"] == "/alpn-fallback"
        s.close()


def test_startup_log_does_not_say_http2_is_unsupported(env):
    assert "http2 is not supported yet" not in env.gw.stderr() + env.gw.stdout(), \
        "the gateway serves HTTP/2 but its startup log says it serves HTTP/1.1 only"


def test_curl_http2_over_tls(env):
    out = run("curl", "-sS", "-i", "--noproxy", "*", "--http2", "--cacert", str(env.pki.ca),
              f"https://127.0.0.1:{env.tls_h2}/curl-h2?q=1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(b"HTTP/2 200"), out.stdout[:300]
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    doc = json.loads(body)
    assert doc["target"] == "/curl-h2?q=1" and doc["version"] == "HTTP/1.1" and doc["upstream"] == "h2-up"
    assert [v for k, v in doc["headers"] if k.lower() == "host"] == [f"127.0.0.1:{env.tls_h2}"], doc["headers"]
    assert [v for k, v in doc["headers"] if k.lower() == "x-forwarded-proto"] == ["https"], doc["headers"]
    # the same curl against the TLS listener without http2 falls back to HTTP/1.1
    out = run("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--noproxy", "*", "--http2",
              "--cacert", str(env.pki.ca), f"https://127.0.0.1:{env.tls_h1}/curl-h1")
    assert out.returncode == 0 and out.stdout == b"200 1.1", (out.stdout, out.stderr)


def test_curl_h2c_prior_knowledge_and_http11_on_the_same_listener(env):
    out = run("curl", "-sS", "-i", "--noproxy", "*", "--http2-prior-knowledge", f"http://127.0.0.1:{env.h2c}/h2c")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(b"HTTP/2 200"), out.stdout[:300]
    assert json.loads(out.stdout.partition(b"\r\n\r\n")[2])["target"] == "/h2c"
    out = run("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--noproxy", "*",
              f"http://127.0.0.1:{env.h2c}/h1-curl")
    assert out.returncode == 0 and out.stdout == b"200 1.1", (out.stdout, out.stderr)
    with U.Conn(env.h2c) as c:                             # keep-alive HTTP/1.1 on the h2c listener
        for i in range(3):
            r = c.request(f"GET /h1-raw{i} HTTP/1.1\r\nHost: gw.test\r\n\r\n".encode())
            assert r.status == 200 and r.version == "HTTP/1.1" and r.json()["target"] == f"/h1-raw{i}"


def test_nghttp_over_tls_and_h2c(env):
    for url in (f"https://127.0.0.1:{env.tls_h2}/nghttp-tls", f"http://127.0.0.1:{env.h2c}/nghttp-h2c"):
        out = run("nghttp", "-nv", "-y", "-t", "10", url, timeout=20)
        text = out.stdout.decode("utf-8", "replace")
        assert out.returncode == 0, f"{url}: rc {out.returncode}\n{text[-2000:]}\n{out.stderr[-1000:]!r}"
        assert re.search(r"recv \(stream_id=\d+\) :status: 200", text), text[-2000:]
        if url.startswith("https"):
            assert "The negotiated protocol: h2" in text, text[:2000]
    assert upstream_requests(env.up, "/nghttp-tls") and upstream_requests(env.up, "/nghttp-h2c")


def test_response_fields_lowercase_without_connection_specific_ones(env):
    c = H2(env.tls_h2, ca=env.pki.ca)
    try:
        st = c.get("/hop")
        assert st.status == 200, st.describe()
        assert_h2_response_fields(st)
        assert st.one("x-kept") == "yes" and st.get("x-hop") == [], st.headers
        assert st.body == b"hello world"
        st = c.get("/chunked-down", [("x-reply-size", "300000"), ("x-reply-chunked", "1")])
        assert st.status == 200, st.describe()
        assert_h2_response_fields(st)
        assert st.sink.n == 300000 and st.sink.sha == st.one("x-body-sha256")
    finally:
        c.close()


def test_an_http1_upstreams_chunked_trailers_reach_h2_and_http1_clients_filtered(env):
    c = H2(env.h2c)
    try:
        st = c.get("/trailers")
        assert st.status == 200 and st.body == b"hello", st.describe()
        assert st.trailers == [("x-checksum", "abc123")], st.trailers
    finally:
        c.close()
    with socket.create_connection(("127.0.0.1", env.h2c), timeout=10) as s:
        s.sendall(b"GET /trailers HTTP/1.1\r\nHost: t\r\nTE: trailers\r\nConnection: close\r\n\r\n")
        out = b""
        while piece := s.recv(65536):
            out += piece
    head, _, body = out.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head, head
    assert body.endswith(b"0\r\nx-checksum: abc123\r\n\r\n"), body


def test_an_http1_clients_request_trailers_reach_the_upstream_without_credentials(env):
    """A chunked request's trailer section is relayed in the upstream request's last chunk, filtered: framing and
    the gateway's fields never, and on a verified route no token field (only the head's token was verified)."""
    token = env.iss.token()
    with socket.create_connection(("127.0.0.1", env.h2c), timeout=10) as s:
        s.sendall(f"POST /ac/request-trailers HTTP/1.1\r\nHost: t\r\n{H}: {token}\r\nTransfer-Encoding: chunked\r\n"
                  f"Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 42\r\n{H}: forged\r\nContent-Length: 9\r\n"
                  f"X-Attest-Verdict: forged\r\n\r\n".encode())
        out = b""
        while piece := s.recv(65536):
            out += piece
    assert out.startswith(b"HTTP/1.1 200 "), out[:200]
    (req,) = upstream_requests(env.up, "/ac/request-trailers")
    assert req.body == b"hello"
    assert req.trailers == [("x-sum", "42")], req.trailers


# ----------------------------------------------------------------------------------------------------------------
# 2. Many streams on one connection.


def test_100_concurrent_streams_each_get_their_own_answer(env):
    c = H2(env.h2c)
    try:
        c.wait(lambda: c.settings_seen, 5, "the server's SETTINGS")
        assert c.c.remote_settings.max_concurrent_streams == 100
        assert c.c.remote_settings.max_header_list_size == MAX_HEADER_BYTES
        sids = {}
        for i in range(100):                            # all sent before any response is read
            body = (f"body-{i}-".encode()) * (i + 1)
            hdrs = [("x-stream-index", str(i))] + ([("content-length", str(len(body)))] if i % 2 == 0 else [])
            sids[i] = (c.request("POST", f"/s/{i}", hdrs, body), body)
        c.wait(lambda: all(c.streams[s].done for s, _ in sids.values()), 20, "100 responses")
        for i, (sid, body) in sids.items():
            st = c.streams[sid]
            assert st.status == 200 and st.ended, st.describe()
            doc = st.json()
            assert doc["target"] == f"/s/{i}", f"stream {sid} (request {i}) got the answer for {doc['target']}"
            assert doc["body_bytes"] == len(body) and doc["body_sha256"] == hashlib.sha256(body).hexdigest()
            assert doc["version"] == "HTTP/1.1"
            hdrs = {k.lower(): v for k, v in doc["headers"]}
            assert hdrs["x-stream-index"] == str(i) and hdrs["host"] == "h2.test", doc["headers"]
        for i in range(100):
            assert len(upstream_requests(env.up, f"/s/{i}")) == 1
        assert c.terminated is None and not c.eof
    finally:
        c.close()


@pytest.mark.timeout_s(60)
def test_h2load_1000_requests_100_streams_one_connection(env):
    out = run("h2load", "-n", "1000", "-c", "1", "-m", "100", f"http://127.0.0.1:{env.h2c}/load", timeout=40)
    text = out.stdout.decode("utf-8", "replace")
    assert out.returncode == 0, text[-2000:] + out.stderr.decode("utf-8", "replace")[-1000:]
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                  text)
    assert m, text[-2000:]
    assert m.groups() == ("1000", "1000", "1000", "1000", "0", "0"), m.group(0)
    assert re.search(r"status codes: 1000 2xx", text), text[-2000:]


def _concurrency_streams(c: RawH2, n: int, prefix: str) -> bytes:
    """n POSTs announcing a 4-byte body, HEADERS only: every stream stays open."""
    return b"".join(c.headers_frames(1 + 2 * i, c.block(f"{prefix}/{i}", "POST", [("content-length", "4")]), False)
                    for i in range(n))


def test_101st_stream_before_settings_ack_is_refused_and_the_100_others_complete(env):
    """Streams opened before the client acknowledged SETTINGS: the 101st gets RST_STREAM REFUSED_STREAM."""
    c = RawH2(env.h2c)
    try:
        c.send(_concurrency_streams(c, 101, "/c"))             # SETTINGS of the server not acknowledged yet
        c.read_until(lambda: 201 in c.resets or c.goaway, 5, "RST_STREAM on stream 201")
        assert c.server_settings and c.server_settings.get(0x3) == 100, c.server_settings
        assert c.goaway is None, f"GOAWAY {c.goaway} instead of refusing stream 201 alone"
        assert c.resets[201] == ErrorCodes.REFUSED_STREAM, f"stream 201 reset with {code_name(c.resets[201])}"
        c.send(frame(SETTINGS, ACK, 0) + b"".join(frame(DATA, END_STREAM, 1 + 2 * i, b"abcd") for i in range(100)))
        c.read_until(lambda: all(1 + 2 * i in c.ended or 1 + 2 * i in c.resets for i in range(100)), 15,
                     "100 responses")
        for i in range(100):
            sid = 1 + 2 * i
            assert c.status.get(sid) == 200 and sid not in c.resets, (sid, c.status.get(sid), c.resets.get(sid))
            assert json.loads(bytes(c.bodies[sid]))["target"] == f"/c/{i}"
        assert not upstream_requests(env.up, "/c/100"), "the refused stream reached the upstream"
    finally:
        c.close()


def test_101st_stream_after_settings_ack_is_not_served(env):
    """After SETTINGS are acknowledged, opening a 101st stream is refused: RST_STREAM on it, or the connection
    ends (nghttp2 treats it as a connection error); never served, and the gateway keeps serving."""
    c = RawH2(env.h2c)
    try:
        c.read_until(lambda: c.server_settings is not None, 5, "the server's SETTINGS")
        c.send(frame(SETTINGS, ACK, 0) + _concurrency_streams(c, 101, "/d"))
        deadline = time.monotonic() + 5
        how = None
        while how is None and time.monotonic() < deadline:
            if 201 in c.resets:
                how = f"RST_STREAM {code_name(c.resets[201])}"
                break
            how = c.wait_closed(0.2)
        assert how, "the 101st concurrent stream was neither reset nor the connection closed within 5 s"
        assert 201 not in c.status, "the 101st stream was answered"
    finally:
        c.close()
    time.sleep(0.2)
    assert not upstream_requests(env.up, "/d/100"), "the 101st stream reached the upstream"
    h2_ok(env.h2c, "/after-101")


# ----------------------------------------------------------------------------------------------------------------
# 3. Bodies.


@pytest.mark.timeout_s(120)
def test_50mib_upload_and_download_over_tls_byte_identical(env, tmp_path):
    size = 50 * MIB
    data = U.blob(size)
    sha = hashlib.sha256(data).hexdigest()
    src = tmp_path / "up.bin"
    src.write_bytes(data)
    base = ["curl", "-sS", "--noproxy", "*", "--http2", "--cacert", str(env.pki.ca), "-w", "%{http_code} %{http_version}"]
    out = run(*base, "-o", str(tmp_path / "up.json"), "--data-binary", f"@{src}",
              f"https://127.0.0.1:{env.tls_h2}/big-up", timeout=60)
    assert out.returncode == 0 and out.stdout == b"200 2", (out.stdout, out.stderr)
    doc = json.loads((tmp_path / "up.json").read_bytes())
    assert doc["body_bytes"] == size and doc["body_sha256"] == sha, {k: doc[k] for k in ("body_bytes", "body_sha256")}
    q = upstream_requests(env.up, "/big-up")[-1]
    assert q.version == "HTTP/1.1" and q.body_len == size and q.body_sha256 == sha
    dst, hdr = tmp_path / "down.bin", tmp_path / "down.headers"
    out = run(*base, "-o", str(dst), "-D", str(hdr), "-H", f"X-Reply-Size: {size}",
              f"https://127.0.0.1:{env.tls_h2}/big-down", timeout=60)
    assert out.returncode == 0 and out.stdout == b"200 2", (out.stdout, out.stderr)
    fields = dict(line.split(": ", 1) for line in hdr.read_text().splitlines()[1:] if ": " in line)
    assert dst.stat().st_size == size
    h = hashlib.sha256()
    with open(dst, "rb") as f:
        for piece in iter(lambda: f.read(MIB), b""):
            h.update(piece)
    assert h.hexdigest() == fields["x-body-sha256"] == hashlib.sha256(U.blob(size)).hexdigest()


def test_request_body_with_and_without_content_length(env):
    body = U.blob(3 * MIB + 12345)
    sha = hashlib.sha256(body).hexdigest()
    c = H2(env.tls_h2, ca=env.pki.ca)
    try:
        sid = c.request("POST", "/body-cl", [("content-length", str(len(body)))], body)
        st = c.response(sid, 20)
        assert st.status == 200 and st.json()["body_sha256"] == sha, st.describe()
        q = upstream_requests(env.up, "/body-cl")[-1]
        assert q.body_len == len(body) and q.body_sha256 == sha and q.content_length == len(body)
        # no content-length, the body in uneven DATA frames
        sid = c.request("POST", "/body-stream", [], body, frame=9999)
        st = c.response(sid, 20)
        assert st.status == 200 and st.json()["body_sha256"] == sha, st.describe()
        q = upstream_requests(env.up, "/body-stream")[-1]
        assert q.body_len == len(body) and q.body_sha256 == sha
        assert q.chunked or q.content_length == len(body), q.headers
        # an empty body with END_STREAM on HEADERS, and an empty DATA frame closing a POST
        st = c.response(c.request("POST", "/body-empty", [("content-length", "0")]))
        assert st.status == 200 and st.json()["body_bytes"] == 0, st.describe()
        sid = c.request("POST", "/body-empty-data", [], None, end=False)
        c.c.end_stream(sid)
        c.flush()
        st = c.response(sid)
        assert st.status == 200 and st.json()["body_bytes"] == 0, st.describe()
    finally:
        c.close()


def test_request_body_over_the_route_limit_is_413_like_http11(env):
    h1_cl = U.one_shot(env.h2c, b"POST /small/cl HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 200\r\n\r\n",
                       method="POST")
    assert h1_cl.status == 413
    with U.Conn(env.h2c) as conn:
        conn.send(b"POST /small/chunked HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + U.chunk_encode(b"z" * 150, 50))
        h1_chunked = conn.response("POST")
    assert h1_chunked.status == 413
    c = H2(env.h2c)
    try:
        st = c.response(c.request("POST", "/small/ok", [("content-length", "100")], b"x" * 100))
        assert st.status == 200, "a body of exactly the route's max_body_bytes must pass"
        st = c.response(c.request("POST", "/small/h2-cl", [("content-length", "200")], b"x" * 200))
        assert st.status == 413, st.describe()
        assert st.body == h1_cl.body and st.one("content-type") == h1_cl.one("content-type"), st.describe()
        assert_h2_response_fields(st)
        st = c.response(c.request("POST", "/small/h2-stream", [], b"y" * 150, frame=50))
        assert st.status == 413, st.describe()
        assert st.body == h1_chunked.body, st.describe()
        assert c.get("/small/after").status == 200, "the connection must stay usable after a 413 stream"
    finally:
        c.close()
    assert not upstream_requests(env.up, "/small/h2-cl"), "a too-large content-length reached the upstream"
    assert not [q for q in upstream_requests(env.up, "/small/h2-stream") if q.body_len > 100]


def test_an_early_answer_during_an_upload_reaches_curl(env, tmp_path):
    """413 (and a 401) decided before the body is read: the rest of the upload is taken in and dropped, so curl —
    which fails a request whose stream is reset during its upload, even with NO_ERROR — gets the answer, exit 0."""
    blob = tmp_path / "upload.bin"
    blob.write_bytes(b"u" * (3 * MIB))
    for path, want in (("/small/curl-413", "413"), ("/ac/curl-401", "401")):
        out = run("curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
                  "-X", "POST", "--data-binary", f"@{blob}", f"http://127.0.0.1:{env.h2c}{path}")
        assert out.returncode == 0, (path, out.returncode, out.stderr.decode()[-500:])
        assert out.stdout.decode() == f"2 {want}", (path, out.stdout)


def test_a_client_that_never_finishes_its_upload_is_reset_after_the_answer(env):
    """The discard after an early answer is bounded: a client that stops sending gets RST_STREAM(NO_ERROR) about
    2 s later — even while the connection is otherwise busy (PINGs here: traffic on the connection must not push a
    stream's deadline back) — and its connection stays usable."""
    c = H2(env.h2c)
    try:
        sid = c.request("POST", "/small/stalled-upload", [("content-length", "1000")], b"s" * 10, end=False)
        st = c.response(sid)
        assert st.status == 413, st.describe()
        t0 = time.monotonic()
        last_ping = 0.0
        while st.reset is None and time.monotonic() - t0 < 6:
            if time.monotonic() - last_ping >= 0.4:   # paced: an answer-driven ping-pong would be a PING flood
                c.ping(b"busyconn")
                last_ping = time.monotonic()
            c.pump(0.2)
        assert st.reset == ErrorCodes.NO_ERROR, st.describe()
        assert 1.0 < time.monotonic() - t0 < 5.0
        assert c.get("/small/after-stall").status == 200
    finally:
        c.close()


# ----------------------------------------------------------------------------------------------------------------
# 4. App Check over h2: the same answers as over HTTP/1.1.


def test_app_check_rejections_are_the_same_as_over_http11(env):
    t1, t2 = env.iss.token(), env.iss.token(app_id="1:123456789012:ios:fffffffffffffff0")
    h, p, _ = t2.split(".")
    cases = {
        "missing": (None, "missing_token"),
        "malformed": ("not-a-jwt", "malformed_token"),
        "expired": (env.iss.token(expired=True), "expired"),
        "bad-signature": (f"{h}.{p}.{t1.split('.')[2]}", "bad_signature"),
    }
    before = env.up.snapshot()
    c = H2(env.tls_h2, ca=env.pki.ca)
    try:
        for name, (token, reason) in cases.items():
            path = f"/ac/reject-{name}"
            h1 = U.one_shot(env.h2c, http_get(path, [("X-Firebase-AppCheck", token)] if token else []))
            assert h1.status == 401 and json.loads(h1.body)["reason"] == reason, (h1.status, h1.body)
            st = c.get(path, [(H, token)] if token else [])
            assert_h2_response_fields(st)
            assert (st.status, st.body) == (h1.status, h1.body), f"{name}: h2 {st.describe()} vs h1 {h1.body!r}"
            for field in ("www-authenticate", "content-type"):
                assert st.get(field) == h1.get(field), f"{name}: {field} h2 {st.get(field)} vs h1 {h1.get(field)}"
        time.sleep(0.05)
        assert env.up.snapshot()[2] == before[2], "a rejected request reached the upstream"
        st = c.get("/ac/valid-h2", [(H, env.iss.token()), ("x-attest-verdict", "spoofed")])
        assert st.status == 200, st.describe()
    finally:
        c.close()
    q = upstream_requests(env.up, "/ac/valid-h2")[-1]
    assert q.version == "HTTP/1.1" and q.one("host") == "h2.test"
    assert q.get("x-attest-verdict") == ["verified"], q.headers
    assert q.get("x-attest-verifier") == ["fb"] and q.get("x-attest-app-id") == [APP], q.headers
    assert q.get("x-firebase-appcheck") == [], "the token header reached the upstream"


# ----------------------------------------------------------------------------------------------------------------
# 5. Access log.


def test_access_log_has_h2_requests(env):
    c = H2(env.h2c)
    try:
        assert c.get("/log/h2-ok?x=1").status == 200
        assert c.get("/ac/log/h2-reject").status == 401
    finally:
        c.close()
    deadline = time.monotonic() + 5
    ok = rej = []
    while time.monotonic() < deadline:
        lines = env.gw.log_lines()
        ok = [l for l in lines if l.get("path") == "/log/h2-ok"]
        rej = [l for l in lines if l.get("path") == "/ac/log/h2-reject"]
        if ok and rej:
            break
        time.sleep(0.05)
    assert len(ok) == 1 and ok[0].get("status") == 200 and ok[0].get("method") == "GET", ok or env.gw.stdout()[-2000:]
    assert ok[0].get("protocol") == "HTTP/2", ok
    assert len(rej) == 1 and rej[0].get("status") == 401, rej or env.gw.stdout()[-2000:]


# ----------------------------------------------------------------------------------------------------------------
# 6. Limits and floods (plaintext h2c; each ends the connection, the gateway goes on serving).


def test_a_few_pings_are_answered_and_the_connection_stays_usable(env):
    c = H2(env.h2c)
    try:
        sent = [b"ping-%03d" % i for i in range(5)]
        for p in sent:
            c.ping(p)
        c.wait(lambda: len(c.ping_acks) >= 5, 5, "5 PING ACKs")
        assert sorted(c.ping_acks) == sent
        assert c.get("/after-pings").status == 200
        assert c.terminated is None
    finally:
        c.close()


def test_header_block_over_max_header_bytes_is_refused_not_served(env):
    h2_ok(env.h2c, "/hdr-small-warmup")
    c = RawH2(env.h2c)
    try:
        ok = c.block("/hdr-under", extra=[("x-big", "u" * 8000)])
        c.send(c.headers_frames(1, ok, True))
        c.read_until(lambda: 1 in c.ended or 1 in c.resets, 5, "the 8 KB header answer")
        assert c.status.get(1) == 200, "an 8 KB header is under max_header_bytes (16 KiB)"
        big = c.block("/hdr-over", extra=[("x-big", "v" * 20000)])
        c.send(c.headers_frames(3, big, True))
        deadline = time.monotonic() + 5
        how = None
        while how is None and time.monotonic() < deadline:
            if 3 in c.resets:
                how = f"RST_STREAM {code_name(c.resets[3])}"
            elif 3 in c.status:
                how = f"status {c.status[3]}"
            else:
                how = c.wait_closed(0.2)
        assert how, "a 20 KB header block (max_header_bytes 16 KiB) was neither refused nor answered within 5 s"
        assert c.status.get(3) in (None, 431), f"{how}: served {c.status.get(3)}"
    finally:
        c.close()
    assert not upstream_requests(env.up, "/hdr-over"), "the oversized header block reached the upstream"
    assert env.gw.proc.poll() is None
    h2_ok(env.h2c, "/after-big-header")


def test_header_block_in_a_few_continuation_frames_is_served(env):
    """Legitimate CONTINUATION use: one block over HEADERS + 6 CONTINUATION frames. (The gateway's limit is 16;
    libnghttp2 1.52.0-1+deb12u2 and later (CVE-2024-28182) already end the connection after 8.)"""
    c = RawH2(env.h2c)
    try:
        blk = c.block("/cont-ok", extra=[(f"x-part-{i}", "p" * 200) for i in range(11)])
        step = -(-len(blk) // 7)
        pieces = [blk[i:i + step] for i in range(0, len(blk), step)]
        out = frame(HEADERS, END_STREAM, 1, pieces[0])
        for i, p in enumerate(pieces[1:], 1):
            out += frame(CONTINUATION, END_HEADERS if i == len(pieces) - 1 else 0, 1, p)
        c.send(out)
        c.read_until(lambda: 1 in c.ended or 1 in c.resets, 5, "the answer to a block in CONTINUATION frames")
        assert c.status.get(1) == 200 and 1 not in c.resets, (len(pieces), c.status, c.resets, c.goaway)
        assert json.loads(bytes(c.bodies[1]))["target"] == "/cont-ok"
    finally:
        c.close()
    q = upstream_requests(env.up, "/cont-ok")[-1]
    assert [q.one(f"x-part-{i}") for i in range(11)] == ["p" * 200] * 11


def _ping_flood(c):
    return b"".join(frame(PING, 0, 0, b"%08d" % i) for i in range(1000))


def _settings_flood(c):
    return b"".join(frame(SETTINGS, 0, 0, b"") for _ in range(1000))


def _rapid_reset(c):
    out = bytearray()
    for i in range(2000):
        sid = 1 + 2 * i
        out += frame(HEADERS, END_STREAM | END_HEADERS, sid, c.block(f"/rr/{i}"))
        out += frame(RST_STREAM, 0, sid, int(ErrorCodes.CANCEL).to_bytes(4, "big"))
    return bytes(out)


def _continuation_flood(c):
    literal = b"\x00\x03x-a\x01b"                        # literal field without indexing, new name: "x-a: b"
    out = bytearray(frame(HEADERS, END_STREAM, 1, c.block("/cont")))   # no END_HEADERS
    for _ in range(5000):
        out += frame(CONTINUATION, 0, 1, literal)
    return bytes(out)


@pytest.mark.parametrize("attack", [_ping_flood, _settings_flood, _rapid_reset, _continuation_flood],
                         ids=["ping-1000", "settings-1000", "rapid-reset-2000", "continuation-5000"])
def test_flood_closes_the_connection_and_the_gateway_keeps_serving(env, attack):
    how = flood(env.h2c, attack)
    assert how is not None, f"{attack.__name__}: the connection was still open 5 s after the flood"
    assert env.gw.proc.poll() is None, f"the gateway exited during {attack.__name__}"
    h2_ok(env.h2c, f"/after{attack.__name__}")
    if attack is _continuation_flood:
        assert not upstream_requests(env.up, "/cont")


# ----------------------------------------------------------------------------------------------------------------
# 7. Own gateways: flow control against a stalled reader, certificate reload.


@pytest.mark.timeout_s(60)
def test_stalled_reader_does_not_make_the_gateway_buffer_the_response(start_gateway, start_upstream):
    up = start_upstream("echo", name="slow-reader-up")
    port = free_port()
    gw = start_gateway(h2_config([(port, True, None)], up.url))
    warm = H2(port)
    try:                                             # allocate what a served h2 download allocates anyway
        st = warm.get("/warm", [("x-reply-size", str(2 * MIB))])
        assert st.status == 200 and st.sink.n == 2 * MIB
    finally:
        warm.close()
    base = rss_kib(gw.proc.pid)
    size = 32 * MIB
    c = H2(port)                                     # default windows: 65535 bytes per stream and connection
    c.auto_ack = False
    try:
        sid = c.request("GET", "/stalled", [("x-reply-size", str(size))])
        st = c.streams[sid]
        c.wait(lambda: st.sink.n >= 16384 or st.done, 10, "the first bytes of the response")
        assert not st.done, st.describe()
        peak = base
        t_end = time.monotonic() + 2.0               # the client stalls: reads (nothing more can come), never acks
        while time.monotonic() < t_end:
            c.pump(0.1)
            peak = max(peak, rss_kib(gw.proc.pid))
        assert st.sink.n <= 65535, f"{st.sink.n} bytes sent beyond the client's window"
        growth = (peak - base) / 1024
        assert growth < 16, f"gateway RSS grew {growth:.1f} MiB ({base} -> {peak} KiB) for a 32 MiB response to a " \
                            f"stalled client: the response is buffered instead of flow-controlled"
        c.auto_ack = True
        c.c.increment_flow_control_window(size)
        c.c.increment_flow_control_window(size, stream_id=sid)
        c.c.acknowledge_received_data(st.sink.n, sid)
        c.flush()
        c.response(sid, 30)
        assert st.status == 200 and st.ended, st.describe()
        assert st.sink.n == size and st.sink.sha == st.one("x-body-sha256") == hashlib.sha256(U.blob(size)).hexdigest()
    finally:
        c.close()


class StallingUpstream:
    """One-connection upstream: once a request head has arrived it stops reading (a small receive buffer) until
    release(); then reads the request and answers with the body's size and sha256 as JSON."""

    def __init__(self):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        self.got_head, self.released, self.closed = threading.Event(), threading.Event(), False
        self.req: U.Req | None = None
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        deadline = time.monotonic() + 60
        conn = None
        while conn is None and not self.closed and time.monotonic() < deadline:
            try:
                conn, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
        if conn is None:
            return
        try:
            conn.settimeout(30)
            while b"\r\n\r\n" not in conn.recv(65536, socket.MSG_PEEK) and time.monotonic() < deadline:
                time.sleep(0.01)
            self.got_head.set()
            self.released.wait(30)
            self.req = U.read_request(U.Reader(conn))
            payload = json.dumps({"body_bytes": self.req.body_len, "body_sha256": self.req.body_sha256}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                         % len(payload) + payload)
        except (OSError, ValueError, EOFError) as e:
            self.errors.append(repr(e))
        finally:
            conn.close()

    def close(self) -> None:
        self.closed = True
        self.released.set()
        try:
            self.lsock.close()
        except OSError:
            pass
        self.thread.join(timeout=2)


@pytest.mark.timeout_s(60)
def test_upload_to_a_stalled_upstream_is_flow_controlled(start_gateway):
    """The gateway opens the client's window only as it forwards bytes upstream: with an upstream that stops
    reading, the client can send only a bounded part of a 32 MiB body and the gateway's RSS stays bounded."""
    up = StallingUpstream()
    try:
        port = free_port()
        gw = start_gateway(h2_config([(port, True, None)], up.url))
        warm = H2(port)
        try:                                         # an h2 session allocated once before measuring
            warm.ping(b"warm-up!")
            warm.wait(lambda: warm.ping_acks, 5, "a PING ACK")
        finally:
            warm.close()
        size = 32 * MIB
        data = U.blob(size)
        base = rss_kib(gw.proc.pid)
        c = H2(port)
        try:
            sid = c.request("POST", "/upload-stalled", [("content-length", str(size))], None, end=False)
            assert up.got_head.wait(5), "the request head did not reach the upstream"
            sent, peak = 0, base
            t_end = time.monotonic() + 2.0
            while time.monotonic() < t_end:
                window = min(c.c.local_flow_control_window(sid), c.c.max_outbound_frame_size)
                if window > 0:
                    c.c.send_data(sid, data[sent:sent + window])
                    sent += window
                    c.flush()
                else:
                    c.pump(0.05)
                peak = max(peak, rss_kib(gw.proc.pid))
            assert sent < 16 * MIB, f"the client could send {sent / MIB:.1f} MiB while the upstream read nothing"
            growth = (peak - base) / 1024
            assert growth < 16, f"gateway RSS grew {growth:.1f} MiB ({base} -> {peak} KiB) holding an upload the " \
                                f"upstream does not read"
            up.released.set()
            assert c.send_body(sid, data[sent:]) == size - sent
            st = c.response(sid, 30)
            assert st.status == 200, st.describe()
            assert st.json() == {"body_bytes": size, "body_sha256": hashlib.sha256(data).hexdigest()}
        finally:
            c.close()
    finally:
        up.close()
    assert not up.errors, up.errors


def test_sighup_reloads_the_certificate_for_new_h2_connections(start_gateway, start_upstream, tmp_path):
    pki = make_tls(tmp_path / "pki")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    shutil.copy(pki.cert, cert)
    shutil.copy(pki.key, key)
    up = start_upstream("echo", name="reload-up")
    port = free_port()
    gw = start_gateway(h2_config([(port, True, (cert, key))], up.url))
    old = H2(port, ca=pki.ca)
    try:
        assert old.get("/before").status == 200
        new_pki = make_tls(tmp_path / "pki2")
        shutil.copy(new_pki.cert, cert)
        shutil.copy(new_pki.key, key)
        gw.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reload: configuration applied" not in gw.stderr():
            assert time.monotonic() < deadline, gw.stderr()[-2000:]
            time.sleep(0.05)
        fresh = H2(port, ca=new_pki.ca)                # verifies only against the new CA, ALPN h2
        try:
            assert fresh.get("/after").status == 200
        finally:
            fresh.close()
        with pytest.raises(ssl.SSLCertVerificationError):
            H2(port, ca=pki.ca)
        st = old.get("/old-still")                      # the connection from before the reload keeps working
        assert st.status == 200 and st.json()["target"] == "/old-still", st.describe()
        assert old.terminated is None
    finally:
        old.close()


def test_sigterm_sends_goaway_lets_the_stream_in_flight_finish_and_exits(factory):
    """Graceful drain over h2: GOAWAY(NO_ERROR) reaches the open connection, the stream already sent finishes with
    its 200, and the process exits once it is done. (nghttp, not python-h2: that library drops a connection's
    remaining streams as soon as a GOAWAY arrives.)"""
    up = factory.upstream(U.b_routes({"/slow": U.b_slow(1.0)}), name="h2-drain-up")
    port = free_port()
    gw = factory.gateway(h2_config([(port, True, None)], up.url))
    client = subprocess.Popen(["nghttp", "-v", f"http://127.0.0.1:{port}/slow"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        assert up.wait_requests(1, 5), "the slow request never reached the upstream"
        t_sig = time.monotonic()
        gw.send_signal(signal.SIGTERM)
        out, _ = client.communicate(timeout=10)
        text = out.decode(errors="replace")
        assert client.returncode == 0, text[-2000:]
        assert re.search(r"recv GOAWAY frame.*\n.*error_code=NO_ERROR", text), text[-2000:]
        assert ":status: 200" in text, text[-2000:]
        assert text.index("recv GOAWAY") < text.index(":status: 200"), "GOAWAY came after the response, not before"
        rc = gw.proc.wait(timeout=8)
        assert rc == 0, f"exit code {rc} (stderr: {gw.stderr()[-500:]})"
        assert time.monotonic() - t_sig < 6, "the drain waited past its only stream"
    finally:
        if client.poll() is None:
            client.kill()


def test_floods_are_counted_in_metrics(factory):
    """attest_gateway_h2_connections_closed_total{reason} counts the connections ended for abuse, one per flood."""
    up = factory.upstream(name="h2-metrics-up")
    port, aport = free_port(), free_port()
    gw = factory.gateway(h2_config([(port, True, None)], up.url) + f"admin:\n  address: 127.0.0.1:{aport}\n")
    wait_listening(aport, gw.proc, 10, "admin listener")

    def counts() -> dict[str, int]:
        with urllib.request.urlopen(f"http://127.0.0.1:{aport}/metrics", timeout=5) as r:
            text = r.read().decode()
        found = dict(re.findall(r'^attest_gateway_h2_connections_closed_total\{reason="([a-z_]+)"\} (\d+)$', text, re.M))
        return {k: int(v) for k, v in found.items()}

    assert counts() == {"ping_flood": 0, "protocol_error": 0, "rapid_reset": 0, "settings_flood": 0}
    for attack in (_ping_flood, _rapid_reset, _continuation_flood):
        assert flood(port, attack) is not None, f"{attack.__name__} did not close the connection"
    want = {"ping_flood": 1, "protocol_error": 1, "rapid_reset": 1, "settings_flood": 0}
    deadline = time.monotonic() + 5
    while counts() != want and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counts() == want


def test_the_stream_limit_is_configurable(factory):
    """limits.http2_max_concurrent_streams (an extension) is what SETTINGS announces."""
    up = factory.upstream(name="h2-limit-up")
    port = free_port()
    gw = factory.gateway(h2_config([(port, True, None)], up.url,
                                   limits={"max_body_bytes": "1MiB", "http2_max_concurrent_streams": 5}))
    c = H2(gw.port)
    try:
        assert c.get("/limit").status == 200
        assert c.c.remote_settings.max_concurrent_streams == 5
    finally:
        c.close()
