"""Raw-socket HTTP/1.1 helpers for the attest-gateway end-to-end suite.

* ``Reader``       – buffered reader over a socket (line / exact-length / until-EOF reads, streaming sinks).
* ``read_request`` – parses one request the way a strict upstream would (used by ``Upstream``).
* ``read_response``– parses one response on the client side (1xx, CL, chunked, close-delimited, HEAD/204/304).
* ``Upstream``     – a threaded recording upstream on 127.0.0.1 whose answer is a programmable behaviour:
                     ``echo`` (JSON like ``attest-gateway-dev echo``), ``slow``, ``garbage``, ``close``, ``raw``
                     (exact bytes), ``chunked``, ``close_delimited``, ``interim`` (1xx then 200), ``routes``
                     (dispatch on path), or any callable ``handler(req, ctx)``.

Everything is bounded: every socket has a timeout, every loop a count or a deadline.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field

SOCK_TIMEOUT = 30.0
RECORD_CAP = 1 << 20          # raw bytes kept per upstream connection
KEEP_BODY_CAP = 2 << 20       # request/response bodies kept in memory up to this size (hash always computed)
MAX_LINE = 1 << 20

_blob_lock = threading.Lock()
_blob: bytes | None = None


def blob(n: int) -> bytes:
    """Deterministic (per process) incompressible bytes of length n (n <= 64 MiB)."""
    global _blob
    with _blob_lock:
        if _blob is None:
            _blob = os.urandom(64 << 20)
    assert n <= len(_blob)
    return _blob[:n]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Reader:
    """Buffered socket reader. ``on_data`` sees every byte received (recording)."""

    def __init__(self, sock: socket.socket, on_data=None):
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0
        self.on_data = on_data
        self.eof = False

    def _fill(self) -> bool:
        if self.eof:
            return False
        data = self.sock.recv(262144)
        if not data:
            self.eof = True
            return False
        if self.on_data:
            self.on_data(data)
        if self.pos > (1 << 20):
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data
        return True

    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def readline(self, limit: int = MAX_LINE) -> bytes:
        """Up to and including b"\\n"; b"" at EOF with nothing buffered; raises on EOF mid-line."""
        scanned = 0  # bytes after self.pos known to hold no LF (self.pos may move when _fill compacts)
        while True:
            i = self.buf.find(b"\n", self.pos + scanned)
            if i >= 0:
                line = bytes(self.buf[self.pos : i + 1])
                self.pos = i + 1
                return line
            scanned = len(self.buf) - self.pos
            if scanned > limit:
                raise ValueError("line too long")
            if not self._fill():
                if self.buffered() == 0:
                    return b""
                raise EOFError("EOF in the middle of a line: %r" % bytes(self.buf[self.pos : self.pos + 200]))

    def read_into(self, n: int, sink) -> None:
        """Exactly n bytes, handed to sink(piece) as they come; raises EOFError if the peer closes early."""
        while n > 0:
            if self.buffered() == 0 and not self._fill():
                raise EOFError("EOF with %d body bytes still expected" % n)
            take = min(n, self.buffered())
            sink(bytes(self.buf[self.pos : self.pos + take]))
            self.pos += take
            n -= take

    def read_exact(self, n: int) -> bytes:
        parts: list[bytes] = []
        self.read_into(n, parts.append)
        return b"".join(parts)

    def read_to_eof(self, sink, limit: int = 1 << 30) -> None:
        total = 0
        while True:
            if self.buffered():
                piece = bytes(self.buf[self.pos :])
                self.pos = len(self.buf)
                total += len(piece)
                sink(piece)
                if total > limit:
                    raise ValueError("too much data")
            if not self._fill():
                return


class BodySink:
    def __init__(self, keep_cap: int = KEEP_BODY_CAP):
        self.h = hashlib.sha256()
        self.n = 0
        self.parts: list[bytes] | None = []
        self.keep_cap = keep_cap

    def __call__(self, piece: bytes) -> None:
        self.h.update(piece)
        self.n += len(piece)
        if self.parts is not None:
            if self.n > self.keep_cap:
                self.parts = None
            else:
                self.parts.append(piece)

    @property
    def body(self) -> bytes | None:
        return None if self.parts is None else b"".join(self.parts)

    @property
    def sha(self) -> str:
        return self.h.hexdigest()


def parse_fields(reader: Reader) -> list[tuple[str, str]]:
    headers = []
    for _ in range(10000):
        line = reader.readline()
        if line == b"":
            raise EOFError("EOF inside header section")
        if line in (b"\r\n", b"\n"):
            return headers
        text = line.rstrip(b"\r\n").decode("latin-1")
        name, sep, value = text.partition(":")
        if not sep:
            raise ValueError("header line without colon: %r" % text)
        headers.append((name, value.strip(" \t")))
    raise ValueError("too many header lines")


def hget(headers, name: str) -> list[str]:
    name = name.lower()
    return [v for (k, v) in headers if k.lower() == name]


def hone(headers, name: str) -> str | None:
    vals = hget(headers, name)
    return vals[0] if vals else None


def read_chunked(reader: Reader, sink) -> tuple[int, list[tuple[str, str]]]:
    """Decodes a chunked body strictly; returns (number of chunks, trailers)."""
    chunks = 0
    for _ in range(10_000_000):
        line = reader.readline(65536)
        if not line.endswith(b"\r\n"):
            raise ValueError("chunk-size line not CRLF terminated: %r" % line[:100])
        size_text = line[:-2].split(b";", 1)[0]
        size = int(size_text, 16)
        if size == 0:
            return chunks, parse_fields(reader)
        chunks += 1
        reader.read_into(size, sink)
        if reader.read_exact(2) != b"\r\n":
            raise ValueError("chunk data not followed by CRLF")
    raise ValueError("too many chunks")


# --------------------------------------------------------------------------------------------------------------
# Server side (the recording upstream)


@dataclass
class Req:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    raw_head: bytes
    chunked: bool = False
    content_length: int | None = None
    body_len: int = 0
    body_sha256: str = sha256(b"")
    body: bytes | None = b""
    trailers: list[tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    received_at: float = 0.0

    def get(self, name: str) -> list[str]:
        return hget(self.headers, name)

    def one(self, name: str) -> str | None:
        return hone(self.headers, name)


def read_request(reader: Reader) -> Req | None:
    line = reader.readline()
    if line == b"":
        return None
    raw = bytearray(line)
    parts = line.rstrip(b"\r\n").decode("latin-1").split(" ")
    if len(parts) != 3:
        raise ValueError("bad request line %r" % line[:200])
    headers = []
    for _ in range(10000):
        hl = reader.readline()
        if hl == b"":
            raise EOFError("EOF inside request head")
        raw += hl
        if hl in (b"\r\n", b"\n"):
            break
        text = hl.rstrip(b"\r\n").decode("latin-1")
        name, sep, value = text.partition(":")
        if not sep:
            raise ValueError("bad header line %r" % text)
        headers.append((name, value.strip(" \t")))
    req = Req(parts[0], parts[1], parts[2], headers, bytes(raw), received_at=time.monotonic())
    sink = BodySink()
    te = hget(headers, "transfer-encoding")
    cl = hget(headers, "content-length")
    if te:
        req.chunked = True
        req.chunks, req.trailers = read_chunked(reader, sink)
    elif cl:
        req.content_length = int(cl[0])
        reader.read_into(req.content_length, sink)
    req.body_len, req.body_sha256, req.body = sink.n, sink.sha, sink.body
    return req


class Ctx:
    """What a behaviour gets: the connection socket and the upstream."""

    def __init__(self, upstream: "Upstream", sock: socket.socket, conn_index: int):
        self.upstream = upstream
        self.sock = sock
        self.conn_index = conn_index
        self.close = False            # set by a behaviour to close the connection after answering

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


def echo_payload(req: Req, upstream_name: str) -> bytes:
    return json.dumps(
        {
            "method": req.method,
            "target": req.target,
            "version": req.version,
            "headers": [[k, v] for (k, v) in req.headers],
            "body_bytes": req.body_len,
            "body_sha256": req.body_sha256,
            "chunked": req.chunked,
            "upstream": upstream_name,
        }
    ).encode()


def b_echo(req: Req, ctx: Ctx) -> None:
    """JSON echo; with ``X-Reply-Size: N`` answers N blob bytes instead (``X-Reply-Chunked: 1`` for chunked)."""
    size = req.one("x-reply-size")
    if size is not None:
        body = blob(int(size))
        if req.one("x-reply-chunked") == "1":
            ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n"
                     b"X-Body-Sha256: " + sha256(body).encode() + b"\r\n\r\n")
            if req.method != "HEAD":
                step = 65536 + 7  # odd chunk size so re-framing is exercised
                for i in range(0, len(body), step):
                    piece = body[i : i + step]
                    ctx.send(b"%x\r\n" % len(piece) + piece + b"\r\n")
                ctx.send(b"0\r\n\r\n")
        else:
            ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n"
                     b"X-Body-Sha256: %s\r\n\r\n" % (len(body), sha256(body).encode()))
            if req.method != "HEAD":
                ctx.send(body)
    else:
        payload = echo_payload(req, ctx.upstream.name)
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"X-Upstream: %s\r\n\r\n" % (len(payload), ctx.upstream.name.encode()))
        ctx.send(head if req.method == "HEAD" else head + payload)
    if any(v.lower() == "close" for v in req.get("connection")):
        ctx.close = True


def b_slow(delay: float):
    def handler(req: Req, ctx: Ctx) -> None:
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and not ctx.upstream.closed:
            time.sleep(0.02)
        b_echo(req, ctx)
    return handler


def b_garbage(req: Req, ctx: Ctx) -> None:
    ctx.send(b"SPLORK \x00\x01 this is not HTTP\r\n\r\n")
    ctx.close = True


def b_raw(data: bytes, close: bool = False):
    def handler(req: Req, ctx: Ctx) -> None:
        ctx.send(data)
        ctx.close = close
    return handler


def b_chunked(body: bytes, chunk: int = 5, extra_headers: bytes = b""):
    def handler(req: Req, ctx: Ctx) -> None:
        out = bytearray(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n" + extra_headers + b"\r\n")
        if req.method != "HEAD":
            for i in range(0, len(body), chunk):
                piece = body[i : i + chunk]
                out += b"%x\r\n" % len(piece) + piece + b"\r\n"
            out += b"0\r\n\r\n"
        ctx.send(bytes(out))
    return handler


def b_close_delimited(body: bytes):
    def handler(req: Req, ctx: Ctx) -> None:
        ctx.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
        for i in range(0, len(body), 4096):
            ctx.send(body[i : i + 4096])
        ctx.close = True
    return handler


def b_interim(interim: bytes = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"):
    def handler(req: Req, ctx: Ctx) -> None:
        ctx.send(interim)
        time.sleep(0.05)
        b_echo(req, ctx)
    return handler


def b_routes(table: dict, default=b_echo):
    """Dispatch on the request path (query stripped); values are handlers."""
    def handler(req: Req, ctx: Ctx) -> None:
        path = req.target.split("?", 1)[0]
        table.get(path, default)(req, ctx)
    return handler


BEHAVIOURS = {"echo": lambda: b_echo, "garbage": lambda: b_garbage}


class Upstream:
    """A recording upstream. ``behaviour`` is a name ("echo", "garbage", "close"), ("slow", delay) or a callable;
    ``port`` 0 picks a free one (a given port lets a test start an upstream where a gateway found nothing).

    Records: ``bytes_received`` (total), ``connections`` (accepted), ``raw`` (first RECORD_CAP bytes per
    connection), ``requests`` (parsed ``Req`` objects), ``errors`` (parse/IO problems seen).
    """

    def __init__(self, behaviour="echo", name: str = "up", port: int = 0, host: str = "127.0.0.1"):
        self.name = name
        self.host = host
        self.close_at_once = behaviour == "close"
        if callable(behaviour):
            self.handler = behaviour
        elif isinstance(behaviour, tuple) and behaviour[0] == "slow":
            self.handler = b_slow(float(behaviour[1]))
        elif behaviour == "close":
            self.handler = b_echo
        else:
            self.handler = BEHAVIOURS[behaviour]()
        self.lock = threading.Lock()
        self.bytes_received = 0
        self.connections = 0
        self.raw: list[bytearray] = []
        self.requests: list[Req] = []
        self.errors: list[str] = []
        self.closed = False
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((host, port))
        self.lsock.listen(256)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        t = threading.Thread(target=self._accept_loop, name=f"upstream-{name}-accept", daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return (self.bytes_received, self.connections, len(self.requests))

    def wait_requests(self, n: int, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return True
            time.sleep(0.01)
        return False

    def wait_bytes(self, n: int, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.bytes_received >= n:
                    return True
            time.sleep(0.01)
        return False

    def last(self) -> Req:
        with self.lock:
            assert self.requests, "the upstream received no request"
            return self.requests[-1]

    def _accept_loop(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.close_at_once:
                with self.lock:
                    self.connections += 1
                conn.close()
                continue
            conn.settimeout(SOCK_TIMEOUT)
            with self.lock:
                self.connections += 1
                index = len(self.raw)
                self.raw.append(bytearray())
                self._socks.append(conn)
            t = threading.Thread(target=self._serve, args=(conn, index), daemon=True)
            t.start()
            self._threads.append(t)

    def _record(self, index: int, data: bytes) -> None:
        with self.lock:
            self.bytes_received += len(data)
            rec = self.raw[index]
            if len(rec) < RECORD_CAP:
                rec += data[: RECORD_CAP - len(rec)]

    def _serve(self, conn: socket.socket, index: int) -> None:
        reader = Reader(conn, on_data=lambda d: self._record(index, d))
        ctx = Ctx(self, conn, index)
        try:
            for _ in range(100000):
                if self.closed:
                    break
                req = read_request(reader)
                if req is None:
                    break
                with self.lock:
                    self.requests.append(req)
                self.handler(req, ctx)
                if ctx.close:
                    break
        except (OSError, EOFError, ValueError) as e:
            if not self.closed:
                with self.lock:
                    self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def close(self) -> None:
        self.closed = True
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=2)


# --------------------------------------------------------------------------------------------------------------
# Client side


@dataclass
class Resp:
    version: str
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes | None
    body_len: int
    body_sha256: str
    framing: str                      # "length" | "chunked" | "close" | "none"
    interim: list[tuple[int, list[tuple[str, str]]]] = field(default_factory=list)
    raw_head: bytes = b""

    def get(self, name: str) -> list[str]:
        return hget(self.headers, name)

    def one(self, name: str) -> str | None:
        return hone(self.headers, name)

    def json(self):
        return json.loads(self.body)


def read_head(reader: Reader):
    """Status line + fields. Returns None at a clean EOF before any byte."""
    line = reader.readline()
    if line == b"":
        return None
    raw = bytearray(line)
    text = line.rstrip(b"\r\n").decode("latin-1")
    parts = text.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError("bad status line %r" % line[:200])
    headers = []
    for _ in range(10000):
        hl = reader.readline()
        if hl == b"":
            raise EOFError("EOF inside response head")
        raw += hl
        if hl in (b"\r\n", b"\n"):
            break
        name, sep, value = hl.rstrip(b"\r\n").decode("latin-1").partition(":")
        if not sep:
            raise ValueError("bad response header line %r" % hl)
        headers.append((name, value.strip(" \t")))
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else "", headers, bytes(raw)


def read_response(reader: Reader, method: str = "GET", keep_cap: int = KEEP_BODY_CAP) -> Resp | None:
    interim = []
    for _ in range(20):
        head = read_head(reader)
        if head is None:
            return None
        version, status, reason, headers, raw = head
        if 100 <= status < 200 and status != 101:
            interim.append((status, headers))
            continue
        break
    else:
        raise ValueError("too many interim responses")
    sink = BodySink(keep_cap)
    te = hget(headers, "transfer-encoding")
    cl = hget(headers, "content-length")
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        framing = "none"
    elif te:
        if cl:
            raise ValueError("response carries both Transfer-Encoding and Content-Length")
        if te[-1].lower().split(",")[-1].strip() != "chunked":
            raise ValueError("unexpected response transfer-encoding %r" % te)
        framing = "chunked"
        read_chunked(reader, sink)
    elif cl:
        if len(set(cl)) != 1:
            raise ValueError("conflicting response content-length %r" % cl)
        framing = "length"
        reader.read_into(int(cl[0]), sink)
    else:
        framing = "close"
        reader.read_to_eof(sink)
    return Resp(version, status, reason, headers, sink.body, sink.n, sink.sha, framing, interim, raw)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


class Conn:
    """One client connection with a reader."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = connect(port, timeout)
        self.reader = Reader(self.sock)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, method: str = "GET", keep_cap: int = KEEP_BODY_CAP) -> Resp | None:
        return read_response(self.reader, method, keep_cap)

    def request(self, data: bytes, method: str | None = None) -> Resp | None:
        self.send(data)
        if method is None:
            method = data.split(b" ", 1)[0].decode("latin-1")
        return self.response(method)

    def closed_within(self, timeout: float) -> tuple[bool, bytes]:
        """True when the peer closes (EOF or reset) within timeout; also returns any bytes that arrived first."""
        extra = bytes(self.reader.buf[self.reader.pos :])
        self.reader.pos = len(self.reader.buf)
        if self.reader.eof:
            return True, extra
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.1)
        try:
            while time.monotonic() < deadline:
                try:
                    data = self.sock.recv(65536)
                except socket.timeout:
                    continue
                except (ConnectionResetError, BrokenPipeError):
                    return True, extra
                if not data:
                    return True, extra
                extra += data
            return False, extra
        finally:
            self.sock.settimeout(10.0)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def one_shot(port: int, data: bytes, timeout: float = 10.0, method: str | None = None) -> Resp | None:
    with Conn(port, timeout) as c:
        return c.request(data, method)


def chunk_encode(body: bytes, size: int = 65536) -> bytes:
    out = bytearray()
    for i in range(0, len(body), size):
        piece = body[i : i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    out += b"0\r\n\r\n"
    return bytes(out)
