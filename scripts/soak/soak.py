#!/usr/bin/env python3
"""Soak test for attest-gateway (issue 9, scope 5): a bounded, mixed load for a long time, watching for leaks.

What runs (all on 127.0.0.1, every process in its own process group, killed by that group's id at the end):
  upstream  `attest-gateway-dev echo`
  issuer    `attest-gateway-dev issuer` (App Check tokens; the gateway fetches its JWKS over HTTP)
  state     SQLite (default) or redis-server (SOAK_STATE=redis, no persistence)
  gateway   `attest-gateway serve` with an admin listener, its client listener `http2: true` (h2c with prior knowledge
            and HTTP/1.1 on the same port; not with SOAK_H2_CONNECTIONS=0), and five routes:
              /ac/     app_check verifier `fb`
              /lu/     the same verifier, limited_use: true
              /aa/     app_attest verifier `aa` (binding: request; simulated devices under a test CA)
              /open/   verify: [] (plain proxy)
              /abort/  verify: [] (only clients that go away; never compared)

Load: SOAK_CONNECTIONS client threads (default 24); even-numbered ones keep their connection alive (and replace it
every few hundred requests), odd-numbered ones connect, send one request and close (half of them with
`Connection: close`, so the gateway closes first). SOAK_H2_CONNECTIONS more threads (default 4; 0: none, the load
before HTTP/2) each keep one h2c connection (prior knowledge; python-h2), send their requests as streams in batches of
1..SOAK_H2_STREAMS (default 8) in flight at once, and replace the connection every few hundred streams (or when the
gateway closes it); their "aborted" requests are streams reset by the client (RST_STREAM CANCEL after the HEADERS of a
POST whose body is not all sent). Each thread is paced to SOAK_RATE / (SOAK_CONNECTIONS + SOAK_H2_CONNECTIONS)
requests per second and picks each request from MIX below; every answer is checked (status, reason code, echo target).

Phases: warm-up (SOAK_WARMUP_SECONDS of load) -> idle checkpoint (clients closed, SOAK_IDLE_SECONDS of quiet so the
gateway's pooled upstream connections, idle for 30 s, are closed too) -> measured load (until SOAK_SECONDS of load in
all, or SOAK_MAX_REQUESTS) -> idle checkpoint. The gateway's VmRSS / VmHWM / FD count / threads / CPU are sampled every
SOAK_SAMPLE_SECONDS into samples.csv.

Pass rule (exit 0), else exit 1:
  * no unexpected answer: every accepted-class request 200 with its own echo, every rejected or replayed one 401 with
    its reason code, no 5xx, no dropped connection or reset stream (the /abort/ requests excepted)
  * RSS at the end checkpoint - RSS at the warm-up checkpoint < SOAK_RSS_SLACK_MIB (default 5)
  * FDs at the end checkpoint <= FDs at the warm-up checkpoint + SOAK_FD_SLACK (default 0)
  * threads at the end checkpoint <= threads at the warm-up checkpoint
  * /metrics agrees with the client's counts (requests per route and status, replays per verifier) and so does the
    access log (lines per route, status and reason; the h2 streams' own lines too), active connections 0 at the
    checkpoints, no h2 connection ended by the gateway for abuse (attest_gateway_h2_connections_closed_total 0),
    SIGTERM exits 0
Exit 2: something failed to start.
"""

from __future__ import annotations

import collections
import csv
import json
import math
import os
import queue
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Tests" / "e2e"))
import harness as H  # noqa: E402  (the e2e suite's process helpers)
import upstreams as U  # noqa: E402  (its raw HTTP/1.1 client)


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        sys.exit(f"soak: {name}={raw!r} is not an integer")
    if v < minimum:
        sys.exit(f"soak: {name} must be at least {minimum}")
    return v


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        sys.exit(f"soak: {name}={raw!r} is not a number")


GATEWAY_BIN = os.environ.get("GATEWAY_BIN") or str(REPO / ".build" / "release" / "attest-gateway")
DEV_BIN = H.GATEWAY_DEV_BIN                                # attest-gateway-dev: echo, issuer, simulated devices
SECONDS = env_int("SOAK_SECONDS", 600, 10)                 # load in all, warm-up included
WARMUP = env_int("SOAK_WARMUP_SECONDS", 60, 1)
IDLE = env_int("SOAK_IDLE_SECONDS", 35, 0)                 # > the gateway's 30 s upstream idle timeout
MAX_REQUESTS = env_int("SOAK_MAX_REQUESTS", 1_000_000, 1)
RATE = env_float("SOAK_RATE", 400.0)                       # requests/s, all connections together
CONNECTIONS = env_int("SOAK_CONNECTIONS", 24, 2)
H2_CONNECTIONS = env_int("SOAK_H2_CONNECTIONS", 4, 0)      # h2c client connections besides those (0: none)
H2_STREAMS = env_int("SOAK_H2_STREAMS", 8, 1)              # most streams in flight on one h2c connection
LANES = CONNECTIONS + H2_CONNECTIONS                       # client threads, each paced to RATE / LANES
SAMPLE = env_float("SOAK_SAMPLE_SECONDS", 10.0)
STATE = os.environ.get("SOAK_STATE", "sqlite")
GW_WORKERS = env_int("SOAK_GATEWAY_WORKERS", 2, 1)
TOKEN_CACHE = env_int("SOAK_TOKEN_CACHE", 500, 0)          # verified_token_cache_size (the gateway's default: 10000)
RSS_SLACK_MIB = env_float("SOAK_RSS_SLACK_MIB", 5.0)
FD_SLACK = env_int("SOAK_FD_SLACK", 0, 0)
SEED = env_int("SOAK_SEED", 1, 0)
OUT = Path(os.environ.get("SOAK_OUT") or REPO / ".build" / "soak" / time.strftime("%Y%m%d-%H%M%S"))
if STATE not in ("sqlite", "redis"):
    sys.exit("soak: SOAK_STATE must be sqlite or redis")
if WARMUP >= SECONDS:
    sys.exit("soak: SOAK_WARMUP_SECONDS must be below SOAK_SECONDS")
if RATE <= 0 or SAMPLE <= 0:
    sys.exit("soak: SOAK_RATE and SOAK_SAMPLE_SECONDS must be positive")
if H2_STREAMS > 100:
    sys.exit("soak: SOAK_H2_STREAMS must be at most 100 (the gateway's SETTINGS_MAX_CONCURRENT_STREAMS)")

TEAM, BUNDLE, REG = "SOAK123456", "com.example.soak", "/.attest/ios"
AA_TARGET = "/aa/soak"          # every assertion is bound to GET /aa/soak at one timestamp

# kind: (weight, route, expected status, expected reason, class)
MIX = {
    "ac_valid":   (28, "ac", 200, None, "accepted"),
    "ac_missing": (5, "ac", 401, "missing_token", "rejected"),
    "ac_expired": (5, "ac", 401, "expired", "rejected"),
    "ac_forged":  (5, "ac", 401, "bad_signature", "rejected"),
    "lu_first":   (12, "lu", 200, None, "accepted"),
    "lu_replay":  (6, "lu", 401, "token_replayed", "replayed"),
    "aa_valid":   (14, "aa", 200, None, "accepted"),
    "aa_replay":  (5, "aa", 401, "counter_not_increasing", "replayed"),
    "open":       (15, "open", 200, None, "accepted"),
    "slow":       (1, "open", 200, None, "accepted"),     # head sent in three pieces 0.2 s apart
    "abort":      (4, "abort", None, None, "aborted"),    # the client goes away; no answer expected
}
KINDS = list(MIX)
WEIGHTS = [MIX[k][0] for k in KINDS]
ABORTS = ("partial_head", "no_read", "short_body", "connect_only")
# h2 streams the client resets (RST_STREAM CANCEL): a POST with content-length 4096 and no DATA, or 100 bytes of
# it, or 100 bytes without content-length (sent upstream chunked). The gateway has the whole head each time.
H2_ABORTS = ("h2_rst_nobody", "h2_rst_short_body", "h2_rst_chunked")
H2_RST_PER_S, H2_RST_BURST = 5.0, 20    # the client's own cap on resets per connection (the gateway's: 20/s, 200)
if H2_CONNECTIONS:
    try:
        from h2.config import H2Configuration
        from h2.connection import H2Connection
        from h2.errors import ErrorCodes
        from h2.exceptions import H2Error
        from h2 import events as h2ev
    except ImportError:
        print("soak: SOAK_H2_CONNECTIONS needs Python's h2 package (scripts/install-deps.sh soak), "
              "or SOAK_H2_CONNECTIONS=0", file=sys.stderr)
        sys.exit(2)


def log(msg: str) -> None:
    print(f"soak: {msg}", flush=True)


# ----------------------------------------------------------------------------------------------------------------
# Processes and setup

def run_dev(*args: str, timeout: float = 60.0) -> str:
    p = subprocess.run([DEV_BIN, *args], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise RuntimeError(f"attest-gateway-dev {' '.join(args[:2])} exited {p.returncode}: {p.stderr.decode()[-500:]}")
    return p.stdout.decode()


def http_admin(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    r = U.one_shot(port, f"GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n".encode(), timeout=timeout)
    if r is None:
        raise OSError(f"admin {path}: no answer")
    return r.status, (r.body or b"").decode("utf-8", "replace")


def post(port: int, target: str, body: bytes = b"", ctype: str | None = None) -> U.Resp:
    head = f"POST {target} HTTP/1.1\r\nHost: soak\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    if ctype:
        head += f"Content-Type: {ctype}\r\n"
    r = U.one_shot(port, (head + "\r\n").encode() + body, timeout=10)
    if r is None:
        raise OSError(f"POST {target}: no answer")
    return r


class Device:
    """A simulated App Attest device (`attest-gateway-dev appattest attest`), registered with the gateway, and its
    assertions."""

    def __init__(self, home: Path, ca: Path):
        self.home, self.ca = home, ca
        self.assertions: list[dict] = []
        self.next = 0

    def register(self, port: int) -> None:
        r = post(port, REG + "/challenge")
        if r.status != 200:
            raise RuntimeError(f"POST {REG}/challenge answered {r.status}: {r.body[:200]!r}")
        chal = json.loads(r.body)["challenge"]
        body = run_dev("appattest", "attest", "--dir", str(self.home), "--ca", str(self.ca), "--team-id", TEAM,
                       "--bundle-id", BUNDLE, "--challenge", chal).strip().encode()
        r = post(port, REG + "/attest", body, "application/json")
        if r.status != 201:
            raise RuntimeError(f"registering {self.home.name} answered {r.status}: {r.body[:300]!r}")

    def generate(self, count: int, timestamp: int) -> None:
        lines: list[str] = []
        counter = 1
        while counter <= count:                       # `assert --count` prints at most 10 000 per call
            k = min(10_000, count - counter + 1)
            out = run_dev("appattest", "assert", "--dir", str(self.home), "--method", "GET", "--target", AA_TARGET,
                          "--timestamp", str(timestamp), "--count", str(k), "--counter", str(counter))
            lines += out.splitlines()
            counter += k
        self.assertions = [json.loads(l) for l in lines]
        if len(self.assertions) != count:
            raise RuntimeError(f"{self.home.name}: {len(self.assertions)} assertions, wanted {count}")


class Minter(threading.Thread):
    """Keeps a queue of fresh limited-use tokens from the dev issuer (one RSA signature each)."""

    def __init__(self, issuer: H.DevIssuer, size: int):
        super().__init__(daemon=True, name="minter")
        self.issuer, self.q, self.stop = issuer, queue.Queue(maxsize=size), threading.Event()
        self.minted = 0
        self.errors = 0

    def run(self) -> None:
        while not self.stop.is_set():
            if self.q.full():
                self.stop.wait(0.05)
                continue
            try:
                tok = self.issuer.token(limited_use=True, ttl=3600)
            except OSError:
                self.errors += 1
                self.stop.wait(0.2)
                continue
            self.minted += 1
            try:
                self.q.put(tok, timeout=1)
            except queue.Full:
                pass


def forge(token: str) -> str:
    """The same header and claims with one signature byte changed (a character in the middle of the segment)."""
    h, p, s = token.split(".")
    i = len(s) // 2
    return f"{h}.{p}.{s[:i]}{'A' if s[i] != 'A' else 'B'}{s[i + 1:]}"


# ----------------------------------------------------------------------------------------------------------------
# Load

class Stats:
    def __init__(self):
        self.sent = collections.Counter()           # kind -> requests sent
        self.ok = collections.Counter()             # kind -> answered as expected
        self.by_route_status = collections.Counter()  # (route, status) of answered, non-abort requests
        self.by_reason = collections.Counter()      # (route, status, reason) as the client saw them
        self.unexpected: list[str] = []
        self.unexpected_n = 0
        self.fallbacks = collections.Counter()      # lu_starved, aa_exhausted, …
        self.latency = collections.defaultdict(list)  # class -> seconds
        self.reconnects = 0
        self.conns_opened = 0
        self.h2_sent = collections.Counter()        # kind -> of `sent`, the ones sent as h2 streams
        self.h2_by_reason = collections.Counter()   # (route, status, reason) of h2 streams on /ac/, /lu/, /open/
        self.h2_conns_opened = 0
        self.h2_batches = collections.Counter()     # streams in flight at once -> batches
        self.h2_resets = 0                          # RST_STREAM CANCEL sent (the h2 "aborted" kind)

    def merge(self, o: "Stats") -> None:
        self.sent += o.sent
        self.ok += o.ok
        self.by_route_status += o.by_route_status
        self.by_reason += o.by_reason
        self.unexpected += o.unexpected[: max(0, 50 - len(self.unexpected))]
        self.unexpected_n += o.unexpected_n
        self.fallbacks += o.fallbacks
        for k, v in o.latency.items():
            self.latency[k] += v
        self.reconnects += o.reconnects
        self.conns_opened += o.conns_opened
        self.h2_sent += o.h2_sent
        self.h2_by_reason += o.h2_by_reason
        self.h2_conns_opened += o.h2_conns_opened
        self.h2_batches += o.h2_batches
        self.h2_resets += o.h2_resets


class Budget:
    """The shared request budget (SOAK_MAX_REQUESTS) and a running total for the sampler."""

    def __init__(self, limit: int):
        self.limit, self.used, self.lock = limit, 0, threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.used >= self.limit:
                return False
            self.used += 1
            return True


class Worker:
    def __init__(self, idx: int, port: int, device: Device, tokens: list[str], expired: list[str],
                 minter: Minter, budget: Budget):
        self.idx, self.port, self.device = idx, port, device
        self.keepalive = idx % 2 == 0
        self.tokens, self.expired, self.minter, self.budget = tokens, expired, minter, budget
        self.rng = random.Random(SEED * 1000 + idx)
        self.conn: U.Conn | None = None
        self.conn_left = 0
        self.lu_accepted: collections.deque[str] = collections.deque(maxlen=32)
        self.aa_accepted: collections.deque[dict] = collections.deque(maxlen=8)
        self.n = 0
        self.stats = Stats()
        self.h2 = False

    # -- connections
    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _conn(self) -> U.Conn:
        if self.conn is None:
            self.conn = U.Conn(self.port, timeout=15)
            self.conn_left = self.rng.randint(100, 1000)   # keep-alive connections are replaced now and then
            self.stats.conns_opened += 1
        return self.conn

    # -- one request
    def _build(self, kind: str) -> tuple[str, str, list[tuple[str, str]]]:
        """-> (kind actually sent, target, headers)"""
        self.n += 1
        n = self.n
        if kind == "lu_replay" and not self.lu_accepted:
            kind = "lu_first"
        if kind == "aa_replay" and not self.aa_accepted:
            kind = "aa_valid"
        if kind == "lu_first":
            try:
                tok = self.minter.q.get_nowait()
            except queue.Empty:
                self.stats.fallbacks["lu_starved"] += 1
                kind = "ac_valid"
            else:
                return kind, f"/lu/{self.idx}/{n}", [("X-Firebase-AppCheck", tok)]
        if kind == "aa_valid":
            d = self.device
            if d.next >= len(d.assertions):
                self.stats.fallbacks["aa_exhausted"] += 1
                kind = "open"
            else:
                a = d.assertions[d.next]
                d.next += 1
                return kind, AA_TARGET, list(a.items())
        if kind == "ac_valid":
            return kind, f"/ac/{self.idx}/{n}", [("X-Firebase-AppCheck", self.rng.choice(self.tokens))]
        if kind == "ac_missing":
            return kind, f"/ac/{self.idx}/{n}", []
        if kind == "ac_expired":
            return kind, f"/ac/{self.idx}/{n}", [("X-Firebase-AppCheck", self.rng.choice(self.expired))]
        if kind == "ac_forged":
            return kind, f"/ac/{self.idx}/{n}", [("X-Firebase-AppCheck", forge(self.rng.choice(self.tokens)))]
        if kind == "lu_replay":
            return kind, f"/lu/{self.idx}/{n}", [("X-Firebase-AppCheck", self.rng.choice(self.lu_accepted))]
        if kind == "aa_replay":
            return kind, AA_TARGET, list(self.rng.choice(self.aa_accepted).items())
        if kind in ("open", "slow"):
            return kind, f"/open/{self.idx}/{n}", []
        raise AssertionError(kind)

    def _check(self, kind: str, target: str, r: U.Resp | None) -> str | None:
        """None when the answer is the expected one, else what was wrong."""
        _, route, status, reason, _ = MIX[kind]
        if r is None:
            return "connection closed without an answer"
        got_reason = None
        if r.status != 200:
            try:
                got_reason = json.loads(r.body).get("reason")
            except (ValueError, TypeError, AttributeError):
                got_reason = "<not json>"
        self.stats.by_route_status[(route, r.status)] += 1
        self.stats.by_reason[(route, r.status, got_reason)] += 1
        if self.h2 and route != "aa":       # /aa/soak is every connection's target: the log cannot tell them apart
            self.stats.h2_by_reason[(route, r.status, got_reason)] += 1
        if r.status != status or got_reason != reason:
            return f"status {r.status} reason {got_reason} (wanted {status} {reason}): {(r.body or b'')[:160]!r}"
        if status == 200:
            try:
                doc = json.loads(r.body)
            except ValueError:
                return f"200 without the echo's JSON: {(r.body or b'')[:160]!r}"
            if doc.get("target") != target:
                return f"echo of {doc.get('target')!r} for {target!r}"
            hdrs = {k.lower() for k, _ in doc.get("headers", [])} if isinstance(doc.get("headers"), list) else \
                {k.lower() for k in (doc.get("headers") or {})}
            if "x-firebase-appcheck" in hdrs or "x-app-attest-assertion" in hdrs:
                return "a token header reached the upstream"
        return None

    def one(self, kind: str) -> None:
        if kind == "abort":
            self._abort(self.rng.choice(ABORTS))
            return
        kind, target, headers = self._build(kind)
        self.stats.sent[kind] += 1
        fresh = not self.keepalive
        head = f"GET {target} HTTP/1.1\r\nHost: soak\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        if fresh and self.n % 2 == 0:
            head += "Connection: close\r\n"
        data = (head + "\r\n").encode("latin-1")
        t0 = time.monotonic()
        r = None
        err = None
        try:
            c = U.Conn(self.port, timeout=15) if fresh else self._conn()
            if fresh:
                self.stats.conns_opened += 1
            try:
                if kind == "slow":
                    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
                    for a, b in zip(cut, cut[1:]):
                        c.send(data[a:b])
                        if b < len(data):
                            time.sleep(0.2)
                else:
                    c.send(data)
                r = c.response("GET")
            finally:
                if fresh:
                    c.close()
        except (OSError, ValueError, EOFError) as e:
            err = f"{type(e).__name__}: {e}"
            self.close()
        dt = time.monotonic() - t0
        wrong = err or self._check(kind, target, r)
        if wrong is None:
            self.stats.ok[kind] += 1
            self.stats.latency["slow" if kind == "slow" else MIX[kind][4]].append(dt)
            if kind == "lu_first":
                self.lu_accepted.append(headers[0][1])
            elif kind == "aa_valid":
                self.aa_accepted.append(dict(headers))
        else:
            self.stats.unexpected_n += 1
            if len(self.stats.unexpected) < 50:
                self.stats.unexpected.append(f"{time.strftime('%H:%M:%S')} conn {self.idx} "
                                             f"({'keep-alive' if self.keepalive else 'fresh'}) {kind} {target}: {wrong}")
        if not fresh and self.conn is not None:
            self.conn_left -= 1
            closing = r is not None and (r.one("connection") or "").lower() == "close"
            if closing or self.conn_left <= 0 or r is None:
                if closing:
                    self.stats.reconnects += 1
                self.close()

    def _abort(self, how: str) -> None:
        """A client that goes away: on its own connection, never the keep-alive one."""
        self.stats.sent["abort"] += 1
        rst = how != "connect_only" and self.rng.random() < 0.5     # half of them reset instead of closing
        self.stats.fallbacks[f"abort_{how}{'_rst' if rst else ''}"] += 1
        try:
            s = U.connect(self.port, timeout=5)
            try:
                if how == "partial_head":
                    s.sendall(b"GET /abort/partial HTTP/1.1\r\nHost: soak\r\nX-Half: ")
                elif how == "no_read":
                    s.sendall(b"GET /abort/noread HTTP/1.1\r\nHost: soak\r\n\r\n")
                elif how == "short_body":
                    s.sendall(b"POST /abort/body HTTP/1.1\r\nHost: soak\r\nContent-Length: 4096\r\n\r\n" + b"x" * 100)
                    time.sleep(0.01)
                if rst:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            finally:
                s.close()
            self.stats.ok["abort"] += 1
        except OSError as e:
            self.stats.unexpected_n += 1
            self.stats.unexpected.append(f"conn {self.idx} abort {how}: could not connect: {e}")

    def run(self, deadline: float, stop: threading.Event) -> None:
        interval = LANES / RATE
        nxt = time.monotonic() + self.rng.random() * interval
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                if nxt > now:
                    stop.wait(min(nxt - now, deadline - now))
                    continue
                nxt += interval * (0.5 + self.rng.random())     # jittered pacing, mean = interval
                if nxt < now - 1.0:                            # fell behind (a slow moment): don't burst
                    nxt = now
                if not self.budget.take():
                    break
                kind = self.rng.choices(KINDS, WEIGHTS)[0]
                try:
                    self.one(kind)
                except Exception as e:  # noqa: BLE001 — a driver bug must fail the soak, not thin out the load
                    self.close()
                    self.stats.unexpected_n += 1
                    if len(self.stats.unexpected) < 50:
                        self.stats.unexpected.append(f"conn {self.idx} {kind}: driver error {type(e).__name__}: {e}")
        finally:
            self.close()


# ----------------------------------------------------------------------------------------------------------------
# HTTP/2: h2c with prior knowledge (python-h2 over one socket)

class H2Stream:
    """One stream: what was sent, and the answer as far as it came (status, body, END_STREAM or RST_STREAM)."""

    def __init__(self, sid: int, kind: str, target: str, headers: list[tuple[str, str]]):
        self.sid, self.kind, self.target, self.headers = sid, kind, target, headers
        self.t0 = time.monotonic()
        self.t_done = 0.0
        self.resp: list[tuple[str, str]] | None = None
        self.data = bytearray()
        self.ended = False
        self.reset: int | None = None

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None

    @property
    def status(self) -> int | None:
        for k, v in self.resp or []:
            if k == ":status":
                return int(v)
        return None

    @property
    def body(self) -> bytes:
        return bytes(self.data)


class H2Conn:
    """An h2c client connection: streams out, events in. Loop-free: the owner pumps it while it waits."""

    def __init__(self, port: int, timeout: float = 15.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.c = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8",
                                              validate_inbound_headers=False))
        self.streams: dict[int, H2Stream] = {}
        self.ended: str | None = None      # why the connection is gone: GOAWAY from the gateway, EOF, an h2 error
        self.c.initiate_connection()
        self.flush()

    @property
    def closed(self) -> bool:
        return self.ended is not None

    def flush(self, pieces: int = 1, pause: float = 0.0) -> None:
        """Writes what python-h2 has queued; in `pieces` writes `pause` s apart (a slow client) if asked, reading
        the answers of the other streams meanwhile (and holding its own output, which would split a frame)."""
        data = self.c.data_to_send()
        if not data:
            return
        cut = [len(data) * i // pieces for i in range(pieces + 1)]
        for a, b in zip(cut, cut[1:]):
            self.sock.sendall(data[a:b])
            until = time.monotonic() + (pause if b < len(data) else 0)
            while not self.closed and time.monotonic() < until:
                self.pump(until - time.monotonic(), hold=True)
        if pieces > 1 and not self.closed:
            self.flush()

    def send_headers(self, st: H2Stream, end_stream: bool) -> None:
        self.streams[st.sid] = st
        self.c.send_headers(st.sid, st.headers, end_stream=end_stream)

    def pump(self, timeout: float, hold: bool = False) -> None:
        """One read (up to timeout) and its events; acknowledges DATA so that the windows stay open (the
        WINDOW_UPDATEs and any other output are written now, or with the next flush when `hold`)."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(1 << 18)
        except socket.timeout:
            return
        except OSError as e:
            self.ended = f"{type(e).__name__}: {e}"
            return
        finally:
            if self.ended is None:
                self.sock.settimeout(15)
        if not data:
            self.ended = "EOF from the gateway"
            return
        try:
            events = self.c.receive_data(data)
        except H2Error as e:
            self.ended = f"python-h2 refused what the gateway sent: {type(e).__name__}: {e}"
            return
        now = time.monotonic()
        for e in events:
            st = self.streams.get(getattr(e, "stream_id", None) or 0)
            if isinstance(e, h2ev.ResponseReceived) and st:
                st.resp = list(e.headers)
            elif isinstance(e, h2ev.DataReceived):
                if st:
                    st.data += e.data
                self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2ev.StreamEnded) and st:
                st.ended, st.t_done = True, now
            elif isinstance(e, h2ev.StreamReset) and st:
                st.reset, st.t_done = e.error_code, now
            elif isinstance(e, h2ev.ConnectionTerminated):
                # python-h2 drops the streams still open once a GOAWAY arrives: they count as unanswered.
                self.ended = (f"GOAWAY {code_name(e.error_code)} last_stream_id={e.last_stream_id}"
                              f"{' ' + repr(e.additional_data[:100]) if e.additional_data else ''}")
        if hold:
            return
        try:
            self.flush()
        except OSError as e:
            self.ended = self.ended or f"{type(e).__name__}: {e}"

    def close(self, goaway: bool) -> None:
        try:
            if goaway and not self.closed:
                self.c.close_connection()
                self.flush()
        except (OSError, H2Error):
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def code_name(code) -> str:
    try:
        return f"{ErrorCodes(code).name} (0x{int(code):x})"
    except ValueError:
        return f"0x{int(code):x}"


class H2Worker(Worker):
    """One h2c connection at a time (replaced every few hundred streams, or when the gateway ends it); its requests
    go out as streams in batches of 1..H2_STREAMS in flight together, and each batch is answered before the next.
    One App Attest device per stream slot, used in turn, so that two assertions of one device are never in flight
    together (the gateway must see a device's counters in order). Its "aborted" requests are streams it resets."""

    def __init__(self, idx: int, port: int, devices: list[Device], tokens: list[str], expired: list[str],
                 minter: Minter, budget: Budget):
        super().__init__(idx, port, devices[0], tokens, expired, minter, budget)
        self.devices = devices
        self.aa_turn = 0
        self.keepalive = True
        self.h2 = True
        self.hc: H2Conn | None = None
        self.rst_tokens, self.rst_at = float(H2_RST_BURST), time.monotonic()

    def close(self) -> None:
        if self.hc is not None:
            self.hc.close(goaway=self.n % 2 == 0)     # half with a GOAWAY first, half just closed
            self.hc = None

    def _hconn(self) -> H2Conn:
        if self.hc is None:
            self.hc = H2Conn(self.port, timeout=15)
            self.conn_left = self.rng.randint(200, 2000)  # streams before the connection is replaced
            self.stats.conns_opened += 1
            self.stats.h2_conns_opened += 1
        return self.hc

    def _build(self, kind: str) -> tuple[str, str, list[tuple[str, str]]]:
        if kind == "aa_valid" or (kind == "aa_replay" and not self.aa_accepted):
            self.device = self.devices[self.aa_turn % len(self.devices)]
            self.aa_turn += 1
        return super()._build(kind)

    def _wrong(self, st: H2Stream, wrong: str) -> None:
        self.stats.unexpected_n += 1
        if len(self.stats.unexpected) < 50:
            self.stats.unexpected.append(f"{time.strftime('%H:%M:%S')} conn {self.idx} (h2 stream {st.sid}) "
                                         f"{st.kind} {st.target}: {wrong}")

    def batch(self, kinds: list[str]) -> None:
        now = time.monotonic()
        self.rst_tokens = min(H2_RST_BURST, self.rst_tokens + (now - self.rst_at) * H2_RST_PER_S)
        self.rst_at = now
        plan: list[tuple[str, str, list[tuple[str, str]], bool]] = []     # kind, target, fields, end_stream
        for kind in kinds:
            if kind == "abort" and self.rst_tokens < 1:
                self.stats.fallbacks["h2_abort_throttled"] += 1       # never at the default rates
                kind = "open"
            if kind == "abort":
                self.rst_tokens -= 1
                self.n += 1
                how = self.rng.choice(H2_ABORTS)
                self.stats.fallbacks[f"abort_{how}"] += 1
                target = f"/abort/{how.replace('_', '-')}/{self.idx}/{self.n}"
                fields = [("content-length", "4096")] if how != "h2_rst_chunked" else []
                plan.append((f"abort:{how}", target, fields, False))
            else:
                kind, target, headers = self._build(kind)
                plan.append((kind, target, [(k.lower(), v) for k, v in headers], True))
            self.stats.sent["abort" if kind == "abort" else plan[-1][0]] += 1
            self.stats.h2_sent["abort" if kind == "abort" else plan[-1][0]] += 1
        plan.sort(key=lambda p: (p[0] == "slow", p[0].startswith("abort:")))   # the slow ones last
        self.stats.h2_batches[len(plan)] += 1
        checked: list[H2Stream] = []
        aborts: list[H2Stream] = []
        c: H2Conn | None = None
        try:
            c = self._hconn()
            for kind, target, fields, end in plan:
                method = "POST" if kind.startswith("abort:") else "GET"
                st = H2Stream(c.c.get_next_available_stream_id(), kind, target,
                              [(":method", method), (":scheme", "http"), (":authority", "soak"), (":path", target),
                               *fields])
                (aborts if kind.startswith("abort:") else checked).append(st)
                if kind == "slow":
                    c.flush()
                    st.t0 = time.monotonic()
                    c.send_headers(st, end)
                    c.flush(3, 0.2)                  # its HEADERS frame in three pieces 0.2 s apart
                    continue
                c.send_headers(st, end)
                if kind != "abort:h2_rst_nobody" and not end:
                    c.c.send_data(st.sid, b"x" * 100, end_stream=False)
            c.flush()
            deadline = time.monotonic() + 15
            while not c.closed and any(not st.done for st in checked) and time.monotonic() < deadline:
                c.pump(min(0.5, deadline - time.monotonic()))
            if aborts and not c.closed:
                until = time.monotonic() + self.rng.uniform(0.0, 0.02)   # let the gateway start on them (or not)
                while not c.closed and time.monotonic() < until:
                    c.pump(until - time.monotonic())
                for st in aborts:
                    if not (st.done or st.resp or c.closed):
                        c.c.reset_stream(st.sid, ErrorCodes.CANCEL)
                        self.stats.h2_resets += 1
                c.flush()
        except (OSError, H2Error) as e:
            if c is not None:
                c.ended = c.ended or f"{type(e).__name__}: {e}"
            else:
                for kind, target, _, _ in plan:
                    self._wrong(H2Stream(0, kind, target, []), f"could not connect: {type(e).__name__}: {e}")
                return
        timed_out = False
        for st in checked:
            if st.ended and st.reset is None:
                wrong = self._check(st.kind, st.target, st)
            elif st.reset is not None:
                wrong = f"stream reset by the gateway with {code_name(st.reset)} (status {st.status})"
            elif c.closed:
                wrong = f"no answer: the connection ended ({c.ended})"
            else:
                wrong, timed_out = f"no answer in 15 s (status {st.status}, {len(st.data)} body bytes)", True
            if wrong is None:
                self.stats.ok[st.kind] += 1
                self.stats.latency["slow" if st.kind == "slow" else MIX[st.kind][4]].append(st.t_done - st.t0)
                if MIX[st.kind][4] == "accepted" and st.kind != "slow":
                    self.stats.latency["h2_accepted"].append(st.t_done - st.t0)
                if st.kind == "lu_first":
                    self.lu_accepted.append(dict(st.headers)["x-firebase-appcheck"])
                elif st.kind == "aa_valid":
                    self.aa_accepted.append({k: v for k, v in st.headers if not k.startswith(":")})
            else:
                self._wrong(st, wrong)
        for st in aborts:
            if st.resp is not None or st.done:
                self._wrong(st, f"answered before the client reset it: status {st.status}, reset "
                                f"{code_name(st.reset) if st.reset is not None else None}, {bytes(st.data[:120])!r}")
            elif c.closed:
                self._wrong(st, f"the connection ended before the client reset the stream ({c.ended})")
            else:
                self.stats.ok["abort"] += 1
        c.streams.clear()
        self.conn_left -= len(plan)
        if c.closed:
            self.stats.reconnects += 1
            self.close()
        elif timed_out or self.conn_left <= 0:
            self.close()

    def run(self, deadline: float, stop: threading.Event) -> None:
        interval = LANES / RATE
        nxt = time.monotonic() + self.rng.random() * interval
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                if nxt > now:
                    stop.wait(min(nxt - now, deadline - now))
                    continue
                want = self.rng.randint(1, H2_STREAMS)
                kinds = []
                while len(kinds) < want and self.budget.take():
                    kinds.append(self.rng.choices(KINDS, WEIGHTS)[0])
                if not kinds:
                    break
                nxt += interval * len(kinds) * (0.5 + self.rng.random())     # jittered, mean = interval each
                if nxt < now - 1.0:
                    nxt = now
                try:
                    self.batch(kinds)
                except Exception as e:  # noqa: BLE001 — a driver bug must fail the soak, not thin out the load
                    self.close()
                    self.stats.unexpected_n += 1
                    if len(self.stats.unexpected) < 50:
                        self.stats.unexpected.append(f"conn {self.idx} h2 batch {kinds}: driver error "
                                                     f"{type(e).__name__}: {e}")
                if len(kinds) < want:
                    break                                              # the budget ran out
        finally:
            self.close()


def h2_get(port: int, target: str, fields: list[tuple[str, str]]) -> H2Stream:
    """One GET on a connection of its own (the check after the load)."""
    c = H2Conn(port, timeout=10)
    try:
        st = H2Stream(c.c.get_next_available_stream_id(), "final", target,
                      [(":method", "GET"), (":scheme", "http"), (":authority", "soak"), (":path", target), *fields])
        c.send_headers(st, True)
        c.flush()
        deadline = time.monotonic() + 10
        while not st.done and not c.closed and time.monotonic() < deadline:
            c.pump(0.5)
        return st
    finally:
        c.close(goaway=True)


# ----------------------------------------------------------------------------------------------------------------
# Sampling

def proc_sample(pid: int) -> dict:
    st = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            st[k] = v.strip()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return {
        "rss_kib": int(st["VmRSS"].split()[0]),
        "hwm_kib": int(st["VmHWM"].split()[0]),
        "anon_kib": int(st.get("RssAnon", "0 kB").split()[0]),     # heap and stacks
        "file_kib": int(st.get("RssFile", "0 kB").split()[0]),     # mapped files: the binary, libraries
        "shmem_kib": int(st.get("RssShmem", "0 kB").split()[0]),   # shared mappings: SQLite's WAL index
        "threads": int(st["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "cpu_s": round((int(fields[11]) + int(fields[12])) / tck, 2),
    }


class Sampler(threading.Thread):
    def __init__(self, pid: int, path: Path, budget: Budget, t0: float):
        super().__init__(daemon=True, name="sampler")
        self.pid, self.budget, self.t0 = pid, budget, t0
        self.phase = "setup"
        self.rows: list[dict] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, ["t_s", "phase", "rss_kib", "hwm_kib", "anon_kib", "file_kib",
                                         "shmem_kib", "fds", "threads", "cpu_s", "requests",
                                         "loadavg1"])
        self.w.writeheader()

    def sample(self, phase: str | None = None) -> dict:
        row = {"t_s": round(time.monotonic() - self.t0, 1), "phase": phase or self.phase, **proc_sample(self.pid),
               "requests": self.budget.used, "loadavg1": os.getloadavg()[0]}
        with self.lock:
            self.rows.append(row)
            self.w.writerow(row)
            self.f.flush()
        return row

    progress = None   # () -> str, printed with every sample that closes a minute

    def run(self) -> None:
        last_print = time.monotonic()
        while not self.stop.wait(SAMPLE):
            try:
                row = self.sample()
            except (OSError, KeyError, ValueError):
                return
            if time.monotonic() - last_print >= 59 and self.phase != "idle":
                last_print = time.monotonic()
                log(f"t={row['t_s']:.0f}s {row['phase']}: RSS {row['rss_kib'] / 1024:.1f} MiB, {row['fds']} FDs, "
                    f"{row['threads']} threads, {row['requests']} requests"
                    + (f", {self.progress()}" if self.progress else "") + f", load {row['loadavg1']:.2f}")


TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
              "0A": "LISTEN"}


def tcp_sockets(pid: int) -> dict[str, str]:
    """socket inode -> "local -> remote STATE" (IPv4 loopback is all this soak uses)."""
    out = {}
    for name in ("tcp", "tcp6"):
        try:
            rows = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) < 10:
                continue

            def addr(a: str) -> str:
                h, p = a.split(":")
                if len(h) == 8:
                    return f"{socket.inet_ntoa(bytes.fromhex(h)[::-1])}:{int(p, 16)}"
                return f"[v6]:{int(p, 16)}"
            out[f[9]] = f"{addr(f[1])} -> {addr(f[2])} {TCP_STATES.get(f[3], f[3])}"
    return out


def dump_fds_threads(pid: int, path: Path, ports: dict[int, str]) -> None:
    """What each FD points at (TCP peers named) and each thread's name, so checkpoints can be compared."""
    socks = tcp_sockets(pid)
    lines = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m and m.group(1) in socks:
            desc = socks[m.group(1)]
            names = [ports[int(p)] for p in re.findall(r":(\d+)", desc) if int(p) in ports]
            target += f" tcp {desc}" + (f" ({', '.join(names)})" if names else "")
        lines.append(f"fd {fd} -> {target}")
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            lines.append(f"thread {tid} {Path(f'/proc/{pid}/task/{tid}/comm').read_text().strip()}")
        except OSError:
            pass
    path.write_text("\n".join(lines) + "\n")


def slope_mib_per_hour(rows: list[dict], key: str = "rss_kib") -> float | None:
    if len(rows) < 3:
        return None
    xs = [r["t_s"] for r in rows]
    ys = [r[key] / 1024 for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx * 3600


def parse_metrics(text: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list[tuple[dict, float]]] = collections.defaultdict(list)
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$', line)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[m.group(1)].append((labels, float(m.group(3))))
    return out


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(p / 100 * len(xs))) - 1)]


# ----------------------------------------------------------------------------------------------------------------

def main() -> int:
    if not os.access(GATEWAY_BIN, os.X_OK):
        log(f"gateway binary {GATEWAY_BIN} not found (make build)")
        return 2
    if not os.access(DEV_BIN, os.X_OK):
        log(f"development tools {DEV_BIN} not found (make build)")
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    log(f"output in {OUT}")
    procs: list = []
    failures: list[str] = []
    notes: list[str] = []
    started = time.time()
    try:
        echo = H.DevEcho(DEV_BIN, OUT)
        procs.append(echo)
        issuer = H.DevIssuer(DEV_BIN, OUT)
        procs.append(issuer)
        if STATE == "redis":
            redis = H.RedisServer(OUT / "redis")
            procs.append(redis)
            state = {"backend": "redis", "url": redis.url, "key_prefix": "soak:", "timeout": "2s"}
        else:
            state = {"backend": "sqlite", "path": str(OUT / "state.db"), "timeout": "2s"}
        ca = OUT / "ca"
        root = run_dev("appattest", "ca", "--dir", str(ca)).strip()
        port, admin = H.free_port(), H.free_port()
        fresh = {"url": echo.url, "connect_timeout": "2s", "response_timeout": "30s", "max_idle_connections": 64}
        cfg = {
            "version": 1,
            "listeners": [{"address": f"127.0.0.1:{port}", **({"http2": True} if H2_CONNECTIONS else {})}],
            "admin": {"address": f"127.0.0.1:{admin}"},
            "limits": {"header_timeout": "5s", "idle_timeout": "60s", "max_connections": 1024},
            "state": state,
            "upstreams": {"echo": fresh},
            "verifiers": {
                "fb": H.app_check_verifier(issuer.jwks_url, verified_token_cache_size=TOKEN_CACHE),
                "aa": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "root_ca": root,
                       "binding": "request", "max_skew": f"{SECONDS + WARMUP + 3 * IDLE + 3600}s",
                       "registration_path": REG},
            },
            "routes": [
                {"name": "ac", "match": {"path_prefix": "/ac/"}, "upstream": "echo", "verify": ["fb"]},
                {"name": "lu", "match": {"path_prefix": "/lu/"}, "upstream": "echo", "verify": ["fb"],
                 "limited_use": True},
                {"name": "aa", "match": {"path_prefix": "/aa/"}, "upstream": "echo", "verify": ["aa"]},
                {"name": "open", "match": {"path_prefix": "/open/"}, "upstream": "echo", "verify": []},
                {"name": "abort", "match": {"path_prefix": "/abort/"}, "upstream": "echo", "verify": []},
            ],
        }
        cfg_text = H.yaml_dump(cfg) + "\n"
        ports = {port: "listener", admin: "admin", echo.port: "dev echo", issuer.port: "dev issuer"}
        if STATE == "redis":
            ports[redis.port] = "redis"
        gw = H.Gateway(GATEWAY_BIN, cfg_text, OUT / "gateway", workers=GW_WORKERS)
        procs.append(gw)
        deadline = time.monotonic() + 20
        while True:
            st, body = http_admin(admin, "/readyz")
            if st == 200:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway not ready after 20 s: {st} {body}")
            time.sleep(0.1)

        # App Check material: a pool of valid tokens (reused: the verified-token cache answers most of them), a few
        # expired ones; limited-use tokens come from the minter, one per request.
        ttl = min(7 * 86400, SECONDS + WARMUP + 4 * IDLE + 3600)
        tokens = [issuer.token(ttl=ttl) for _ in range(200)]
        expired = [issuer.token(expired=True) for _ in range(20)]
        minter = Minter(issuer, 2000)
        minter.start()

        # App Attest: one simulated device per HTTP/1.1 connection and H2_STREAMS per h2 connection (one per stream
        # slot), registered (over HTTP/1.1), with enough assertions for its share.
        aa_share = (MIX["aa_valid"][0] + MIX["aa_replay"][0]) / sum(WEIGHTS)
        per_lane = RATE * aa_share * SECONDS / LANES
        per_device = min(MAX_REQUESTS, int(per_lane * 1.5) + 200)
        per_h2_device = min(MAX_REQUESTS, int(per_lane / H2_STREAMS * 1.5) + 200)
        ts = int(time.time())
        devices = []
        h2_devices: list[list[Device]] = []
        t_gen = time.monotonic()
        for i in range(CONNECTIONS):
            d = Device(OUT / "devices" / f"dev-{i}", ca)
            d.register(port)
            d.generate(per_device, ts)
            devices.append(d)
        for j in range(H2_CONNECTIONS):
            h2_devices.append([])
            for k in range(H2_STREAMS):
                d = Device(OUT / "devices" / f"dev-h2-{j}-{k}", ca)
                d.register(port)
                d.generate(per_h2_device, ts)
                h2_devices[-1].append(d)
        n_devices = CONNECTIONS + H2_CONNECTIONS * H2_STREAMS
        log(f"{n_devices} App Attest devices registered, {per_device} assertions each"
            + (f" ({per_h2_device} for the {H2_CONNECTIONS * H2_STREAMS} of the h2 connections)"
               if H2_CONNECTIONS else "")
            + f" ({time.monotonic() - t_gen:.1f} s); 200 App Check tokens, 20 expired; minter started")
        setup_counts = {"registrations": n_devices}

        if IDLE < 31:
            notes.append(f"SOAK_IDLE_SECONDS={IDLE} is below the gateway's 30 s upstream idle timeout: pooled upstream "
                         "connections may still be open at the checkpoints, and the FD rule counts them")
        budget = Budget(MAX_REQUESTS)
        t0 = time.monotonic()
        sampler = Sampler(gw.proc.pid, OUT / "samples.csv", budget, t0)
        s_start = sampler.sample("start")
        sampler.start()
        workers = [Worker(i, port, devices[i], tokens, expired, minter, budget) for i in range(CONNECTIONS)]
        workers += [H2Worker(CONNECTIONS + j, port, h2_devices[j], tokens, expired, minter, budget)
                    for j in range(H2_CONNECTIONS)]
        sampler.progress = lambda: f"{sum(w.stats.unexpected_n for w in workers)} unexpected"
        stop = threading.Event()

        def load(seconds: float, phase: str) -> float:
            sampler.phase = phase
            end = time.monotonic() + seconds
            ts_ = [threading.Thread(target=w.run, args=(end, stop), daemon=True, name=f"w{w.idx}") for w in workers]
            t = time.monotonic()
            for th in ts_:
                th.start()
            for th in ts_:
                th.join(timeout=seconds + 120)
            if any(th.is_alive() for th in ts_):
                raise RuntimeError("load threads still running 2 minutes after the deadline")
            return time.monotonic() - t

        def checkpoint(name: str) -> dict:
            sampler.phase = "idle"
            time.sleep(IDLE)
            row = sampler.sample(name)                    # before the scrape, which allocates
            _, text = http_admin(admin, "/metrics")
            active = [v for _, v in parse_metrics(text).get("attest_gateway_active_connections", [])]
            row["active_connections"] = active[0] if active else None
            dump_fds_threads(gw.proc.pid, OUT / f"{name}-fds-threads.txt", ports)
            if row["active_connections"] not in (0, 0.0):
                failures.append(f"{name}: attest_gateway_active_connections = {row['active_connections']} with no client")
            return row

        log(f"warm-up: {WARMUP} s of load at {RATE:g} req/s on {LANES} connections "
            f"({(CONNECTIONS + 1) // 2} keep-alive, {CONNECTIONS // 2} one request per connection, "
            f"{H2_CONNECTIONS} h2c with up to {H2_STREAMS} streams in flight)")
        load(WARMUP, "warmup")
        log(f"warm-up done ({budget.used} requests); idle {IDLE} s, then the baseline checkpoint")
        base = checkpoint("baseline")
        log(f"baseline: RSS {base['rss_kib'] / 1024:.1f} MiB, {base['fds']} FDs, {base['threads']} threads")
        measured_s = SECONDS - WARMUP
        n_before = budget.used
        log(f"measured load: {measured_s} s (or until {MAX_REQUESTS} requests in all)")
        elapsed = load(measured_s, "load")
        if budget.used >= MAX_REQUESTS:
            notes.append(f"stopped by SOAK_MAX_REQUESTS after {elapsed:.0f} s of the {measured_s} s measured phase")
        log(f"measured load done ({budget.used - n_before} requests in {elapsed:.0f} s); idle {IDLE} s, then the end checkpoint")
        end = checkpoint("end")
        sampler.stop.set()
        sampler.join(timeout=SAMPLE + 5)
        minter.stop.set()

        # One more valid request after all that: the gateway still serves.
        last = U.one_shot(port, f"GET /ac/final HTTP/1.1\r\nHost: soak\r\nX-Firebase-AppCheck: {tokens[0]}\r\n"
                                "Connection: close\r\n\r\n".encode(), timeout=10)
        if last is None or last.status != 200:
            failures.append(f"a valid request after the soak answered {last.status if last else 'nothing'}")
        last_h2 = None
        if H2_CONNECTIONS:
            last_h2 = h2_get(port, "/ac/final-h2", [("x-firebase-appcheck", tokens[0])])
            if last_h2.status != 200 or not last_h2.ended:
                failures.append(f"a valid h2 request after the soak answered {last_h2.status} "
                                f"(ended {last_h2.ended}, reset {last_h2.reset})")
        _, mtext = http_admin(admin, "/metrics")
        (OUT / "metrics.txt").write_text(mtext)
        metrics = parse_metrics(mtext)
        helper_cpu = {}
        helpers = [("dev issuer", issuer.proc), ("dev echo", echo.proc)]
        if STATE == "redis":
            helpers.append(("redis-server", redis.proc))
        for name, pr in helpers:
            try:
                helper_cpu[name] = proc_sample(pr.pid)["cpu_s"]
            except (OSError, KeyError):
                pass
        tms = os.times()
        helper_cpu["this driver"] = round(tms.user + tms.system, 1)
        rc = gw.stop(signal.SIGTERM, timeout=40)
        if rc != 0:
            failures.append(f"gateway exited {rc} on SIGTERM (wanted 0)")

        # ---- totals
        total = Stats()
        for w in workers:
            total.merge(w.stats)
        total.by_route_status[("ac", 200)] += 1          # the final request
        total.by_reason[("ac", 200, None)] += 1
        if last_h2 is not None and last_h2.status is not None:   # and the final h2 one
            total.by_route_status[("ac", last_h2.status)] += 1
            total.by_reason[("ac", last_h2.status, None)] += 1
        total.by_route_status[("-", 200)] += n_devices    # the registrations: POST …/challenge, POST …/attest
        total.by_route_status[("-", 201)] += n_devices
        if total.unexpected_n:
            failures.append(f"{total.unexpected_n} unexpected answers (first ones below)")
        classes = collections.Counter()
        for k, n in total.sent.items():
            classes[MIX[k][4]] += n

        # ---- /metrics vs the client
        req_metric = collections.Counter()
        for labels, v in metrics.get("attest_gateway_requests_total", []):
            req_metric[(labels.get("route"), int(labels.get("status", 0)))] += int(v)
        mismatches = []
        for key in sorted(set(req_metric) | set(total.by_route_status), key=str):
            if key[0] == "abort" or key[0] is None:
                continue
            if req_metric[key] != total.by_route_status[key]:
                mismatches.append(f"requests_total{{route={key[0]},status={key[1]}}} = {req_metric[key]}, "
                                  f"client saw {total.by_route_status[key]}")
        replays = {l.get("verifier"): int(v) for l, v in metrics.get("attest_gateway_replays_rejected_total", [])}
        for verifier, kind in (("fb", "lu_replay"), ("aa", "aa_replay")):
            if replays.get(verifier, 0) != total.ok[kind]:
                mismatches.append(f"replays_rejected_total{{verifier={verifier}}} = {replays.get(verifier, 0)}, "
                                  f"client saw {total.ok[kind]} {kind}")
        h2_closed = {l.get("reason"): int(v) for l, v in metrics.get("attest_gateway_h2_connections_closed_total", [])}
        if any(h2_closed.values()):
            failures.append(f"the gateway ended h2 connections for abuse or a protocol error: {h2_closed}")
        if mismatches:
            failures.append("/metrics disagrees with the client: " + "; ".join(mismatches[:8]))

        # ---- access log vs the client (lines per route, status, reason)
        logc = collections.Counter()
        log_h2 = collections.Counter()     # lines of the h2 connections' requests: /ac/<idx>/…, idx >= CONNECTIONS
        h2_abort_lines = collections.Counter()
        with open(gw.stdout_path, "rb") as f:
            for line in f:
                if not line.startswith(b"{"):
                    continue
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                key = (o.get("route"), o.get("status"), o.get("reason"))
                logc[key] += 1
                path = o.get("path") or ""
                m = re.match(r"/(ac|lu|open)/(\d+)/", path)
                if m and int(m.group(2)) >= CONNECTIONS:
                    log_h2[key] += 1
                elif key[0] == "abort" and path.startswith("/abort/h2-rst-"):
                    h2_abort_lines[key[1]] += 1
        log_mism = []
        for key in sorted(set(logc) | set(total.by_reason), key=str):
            if key[0] in ("abort", None):
                continue
            if key[0] not in ("ac", "lu", "aa", "open"):
                continue
            if logc[key] != total.by_reason[key]:
                log_mism.append(f"{key}: log {logc[key]}, client {total.by_reason[key]}")
        for key in sorted(set(log_h2) | set(total.h2_by_reason), key=str):
            if log_h2[key] != total.h2_by_reason[key]:
                log_mism.append(f"h2 {key}: log {log_h2[key]}, client {total.h2_by_reason[key]}")
        if log_mism:
            failures.append("access log disagrees with the client: " + "; ".join(log_mism[:8]))
        abort_lines = collections.Counter()
        for (route, st, _), n in logc.items():
            if route == "abort":
                abort_lines[st] += n
        # A client that sent a whole head and closed is logged once (200 or 499); one that reset the connection may be
        # (the reset can discard the head before the gateway reads it); half a head or nothing, never. /metrics
        # counts what the log counts.
        fb = total.fallbacks
        heads_fin = fb["abort_no_read"] + fb["abort_short_body"]
        heads_rst = fb["abort_no_read_rst"] + fb["abort_short_body_rst"]
        # An h2 stream the client reset has had its whole head read first (HEADERS comes before RST_STREAM on the
        # connection): logged once, 499.
        abort_metric = sum(v for (r, _), v in req_metric.items() if r == "abort")
        n_abort_log = sum(abort_lines.values())
        n_h2_abort_log = sum(h2_abort_lines.values())
        n_h1_abort_log = n_abort_log - n_h2_abort_log
        if n_abort_log != abort_metric or not heads_fin <= n_h1_abort_log <= heads_fin + heads_rst:
            log_mism.append(f"/abort/: {n_abort_log} log lines ({n_h1_abort_log} HTTP/1.1), {abort_metric} in "
                            f"/metrics, for {heads_fin} whole heads then close and {heads_rst} whole heads then reset")
            failures.append("aborted requests: " + log_mism[-1])
        if n_h2_abort_log != total.h2_resets or set(h2_abort_lines) - {499}:
            log_mism.append(f"/abort/ over h2: log lines by status {dict(h2_abort_lines)} for {total.h2_resets} "
                            f"streams reset by the client (wanted one 499 each)")
            failures.append("aborted h2 streams: " + log_mism[-1])

        # ---- the leak rule
        load_rows = [r for r in sampler.rows if r["phase"] == "load"]
        half = load_rows[len(load_rows) // 2:]
        slope = slope_mib_per_hour(half)
        rss_delta = (end["rss_kib"] - base["rss_kib"]) / 1024
        if rss_delta >= RSS_SLACK_MIB:
            failures.append(f"RSS grew {rss_delta:.2f} MiB from the baseline to the end checkpoint "
                            f"(limit {RSS_SLACK_MIB:g} MiB)")
        if end["fds"] > base["fds"] + FD_SLACK:
            failures.append(f"FDs {base['fds']} at the baseline, {end['fds']} at the end (slack {FD_SLACK})")
        if end["threads"] > base["threads"]:
            failures.append(f"threads {base['threads']} at the baseline, {end['threads']} at the end")

        # ---- report
        dur = time.time() - started
        all_rows = sampler.rows
        rep = []
        P = rep.append
        P("")
        P("=" * 100)
        P(f"attest-gateway soak: {SECONDS} s of load ({WARMUP} s warm-up + {measured_s} s measured), "
          f"{IDLE} s idle before each checkpoint; wall {dur / 60:.1f} min")
        P(f"  {RATE:g} req/s target on {CONNECTIONS} HTTP/1.1 connections (keep-alive and one-request)"
          + (f" and {H2_CONNECTIONS} h2c (up to {H2_STREAMS} streams in flight)" if H2_CONNECTIONS else "")
          + f", gateway --workers "
          f"{GW_WORKERS}, state {STATE}, verified_token_cache_size {TOKEN_CACHE}, binary {GATEWAY_BIN}")
        P(f"  machine: {os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.2f} "
          f"(max sampled {max(r['loadavg1'] for r in all_rows):.2f}); output {OUT}")
        P("")
        P(f"  {'gateway process':<32}{'RSS MiB':>8}{'anon MiB':>9}{'HWM MiB':>9}{'FDs':>6}{'threads':>9}{'CPU s':>8}{'requests':>10}")
        for label, r in (("start (idle, before load)", s_start), ("baseline (after warm-up, idle)", base),
                         ("first measured sample (load)", load_rows[0] if load_rows else None),
                         ("last measured sample (load)", load_rows[-1] if load_rows else None),
                         ("end (idle)", end)):
            if r is not None:
                P(f"  {label:<32}{r['rss_kib'] / 1024:>8.1f}{r['anon_kib'] / 1024:>9.1f}{r['hwm_kib'] / 1024:>9.1f}{r['fds']:>6}{r['threads']:>9}"
                  f"{r['cpu_s']:>8.1f}{r['requests']:>10}")
        if load_rows:
            P(f"  under load: RSS min {min(r['rss_kib'] for r in load_rows) / 1024:.1f} / max "
              f"{max(r['rss_kib'] for r in load_rows) / 1024:.1f} MiB, FDs min {min(r['fds'] for r in load_rows)} / max "
              f"{max(r['fds'] for r in load_rows)}, threads max {max(r['threads'] for r in load_rows)}; "
              f"{len(load_rows)} samples every {SAMPLE:g} s")
        slope_anon = slope_mib_per_hour(half, "anon_kib")
        P(f"  slope over the second half of the measured load ({len(half)} samples): RSS "
          + (f"{slope:+.2f} MiB/hour" if slope is not None else "n/a") + ", RssAnon "
          + (f"{slope_anon:+.2f} MiB/hour" if slope_anon is not None else "n/a"))
        P(f"  RSS end - baseline: {rss_delta:+.2f} MiB (limit < {RSS_SLACK_MIB:g}; RssAnon "
          f"{(end['anon_kib'] - base['anon_kib']) / 1024:+.2f}, RssFile {(end['file_kib'] - base['file_kib']) / 1024:+.2f}); FDs {base['fds']} -> {end['fds']} "
          f"(slack {FD_SLACK}); threads {base['threads']} -> {end['threads']}")
        P("")
        P(f"  requests: {sum(total.sent.values())} sent ({budget.used} budgeted), "
          f"{sum(total.sent.values()) / max(1, (SECONDS)):.0f}/s over the load time; connections opened "
          f"{total.conns_opened}; gateway-initiated closes seen {total.reconnects}")
        for cls in ("accepted", "rejected", "replayed", "aborted", "slow"):
            kinds = [k for k in KINDS if MIX[k][4] == cls and k != "slow"] if cls != "slow" else []
            if cls == "slow":
                lat = total.latency.get("slow", [])
                P(f"      (of the accepted: {total.sent['slow']} slow clients, head in 3 pieces 0.2 s apart; "
                  f"p50 {pct(lat, 50) * 1000:.0f} ms)")
                continue
            lat = total.latency.get(cls, [])
            detail = ", ".join(f"{k} {total.sent[k]}" for k in kinds)
            lat_s = f"; p50 {pct(lat, 50) * 1000:.1f} ms p99 {pct(lat, 99) * 1000:.1f} ms" if lat else ""
            P(f"    {cls:<9}{classes[cls]:>9}  ({detail}{lat_s})")
        if H2_CONNECTIONS:
            h2_lat = total.latency.get("h2_accepted", [])
            n_batches = sum(total.h2_batches.values())
            P(f"    over h2c: {sum(total.h2_sent.values())} streams on {total.h2_conns_opened} connections opened "
              f"({', '.join(f'{k} {total.h2_sent[k]}' for k in KINDS if total.h2_sent[k])}); {n_batches} batches, "
              f"{sum(k * n for k, n in total.h2_batches.items()) / max(1, n_batches):.1f} streams in flight on "
              f"average, {total.h2_batches[H2_STREAMS]} with {H2_STREAMS}; "
              f"accepted p50 {pct(h2_lat, 50) * 1000:.1f} ms "
              f"p99 {pct(h2_lat, 99) * 1000:.1f} ms; "
              f"{total.h2_resets} RST_STREAM CANCEL sent; "
              f"access log lines of the aborted ones by status {dict(h2_abort_lines)}")
        P(f"    fallbacks/variants: {dict(total.fallbacks)}; limited-use tokens minted {minter.minted} "
          f"(issuer errors {minter.errors}); setup: {setup_counts}")
        P(f"  CPU seconds over the whole run: gateway {end['cpu_s']:.1f}, " + ", ".join(
            f"{k} {v:.1f}" for k, v in helper_cpu.items()))
        P(f"  /metrics requests_total by route: " + ", ".join(
            f"{r}: {sum(v for (rr, _), v in req_metric.items() if rr == r)}" for r in ("ac", "lu", "aa", "open", "abort", "-")))
        P(f"  /metrics replays_rejected_total: {replays}; access log lines on /abort/ by status: {dict(abort_lines)}")
        if H2_CONNECTIONS:
            P(f"  /metrics h2_connections_closed_total: {h2_closed}")
        P(f"  /metrics and access log vs client counts: "
          f"{'agree' if not mismatches and not log_mism else 'DISAGREE'}")
        for n in notes:
            P(f"  note: {n}")
        if total.unexpected:
            P("  unexpected answers:")
            for u in total.unexpected[:20]:
                P(f"    {u}")
        P("")
        P("RESULT: " + ("PASS (no growth beyond the rule, every answer as expected)" if not failures else "FAIL"))
        for f_ in failures:
            P(f"  - {f_}")
        P("=" * 100)
        text = "\n".join(rep)
        print(text, flush=True)
        (OUT / "summary.txt").write_text(text + "\n")
        return 1 if failures else 0
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        log(f"ERROR: {e}")
        return 2
    finally:
        for p in reversed(procs):
            try:
                p.kill()
            except Exception:  # noqa: BLE001 — best effort, each by its own process group
                pass


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    sys.exit(main())
