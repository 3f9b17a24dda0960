"""The path boundary (Envoy CVE-2019-9901 and relatives) end to end: the real gateway in front of a *decoding*
WSGI upstream that serves `/%61pi/users`, `//api/users`, `/./api/users`, `/x/../api/users`, `/api\\users`,
`/api;x/users`, ... as `/api/users`, as Python WSGI servers, Go's `r.URL.Path`, Rails and Tomcat do.

Routes (first match wins): `api-host` (match.host api.example.com, verify [firebase]), `payments` (/api/payments/,
verify [firebase], limited_use), `api` (/api/, verify [firebase]), `public` (/, verify []). The contract
(docs CONFIG.md / PROTOCOL.md "Additions", default `paths:` options): the gateway routes on one canonical target and
forwards that target as is; a target it cannot make canonical safely is `400 ambiguous_path`; hosts compare without
case and trailing dot, a match.host without a port matches any port; an absolute-form authority wins over Host, and
on HTTP/2 :authority wins over host.

Checked, over HTTP/1.1 (raw sockets) and HTTP/2 (h2c prior knowledge, python-h2): without a token no spelling of a
protected path reaches the upstream (each is 401 missing_token or 400 ambiguous_path, exactly as the canonicalizer
says); with a token the canonical spellings are served and the upstream receives exactly the canonical target; a
used limited-use token is 401 token_replayed under every spelling of the limited route and its handler runs once;
no spelling of the protected host reaches the upstream unverified. Each test prints its table
(spelling → status → what the upstream saw); run pytest with -s to see them."""

from __future__ import annotations

import json
import posixpath
import socketserver
import threading
import time
import urllib.parse
from types import SimpleNamespace
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, wait_gateway_accepts, wait_listening, yaml_dump
from test_http2 import H2

H = "X-Firebase-AppCheck"
AMBIGUOUS = "ambiguous"
PROTECTED = ("/api/users", "/api/payments/charge")

pytestmark = pytest.mark.timeout_s(90)


# ----------------------------------------------------------------------------------------------------------------
# The decoding upstream: wsgiref with threads; its router reads PATH_INFO the way lenient frameworks do.


def route_key(path_info: str) -> str:
    """What a lenient application router makes of a decoded path: backslashes are slashes (IIS, some Java
    containers), `;parameters` are stripped per segment (Tomcat, Spring), runs of slashes merged and dot segments
    resolved (Go's path.Clean, Rails, Werkzeug's safe-join habits). Case is kept."""
    p = path_info.replace("\\", "/")
    p = "/".join(segment.split(";", 1)[0] for segment in p.split("/"))
    while "//" in p:
        p = p.replace("//", "/")
    p = posixpath.normpath(p) if p else "/"
    return "/" if p in (".", "") else p


class DecodingUpstream:
    """A threaded wsgiref server on 127.0.0.1 (free port). The protected handler serves /api/users and
    /api/payments/charge (after route_key); everything else is public. Every call is recorded: the raw request
    target (from the request line, before http.server rewrites a leading //), PATH_INFO as decoded, the route key,
    the handler, X-Attest-Verdict and Host as received."""

    def __init__(self):
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(WSGIRequestHandler):
            def get_environ(self):
                env = super().get_environ()
                line = self.raw_requestline.decode("latin-1").rstrip("\r\n")
                parts = line.split(" ")
                env["REQUEST_URI"] = parts[1] if len(parts) == 3 else self.path
                return env

            def log_message(self, *args):   # quiet
                pass

        class Server(socketserver.ThreadingMixIn, WSGIServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.set_app(self.app)
        self.server.timeout = 1
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self, environ, start_response):
        raw = environ.get("REQUEST_URI", "")
        path_info = environ.get("PATH_INFO", "")
        # An absolute-form target reaches PATH_INFO whole in wsgiref; real servers take its path.
        if raw.startswith(("http://", "https://")):
            after = raw.split("://", 1)[1]
            path_info = urllib.parse.unquote("/" + after.split("/", 1)[1].split("?", 1)[0] if "/" in after else "/",
                                             "latin-1")
        key = route_key(path_info)
        handler = "protected" if key in PROTECTED else "public"
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        call = {"method": environ.get("REQUEST_METHOD"), "raw": raw, "path_info": path_info, "key": key,
                "handler": handler, "verdict": environ.get("HTTP_X_ATTEST_VERDICT"), "host": environ.get("HTTP_HOST"),
                "body": body}
        with self.lock:
            self.calls.append(call)
        out = json.dumps({"handler": handler, "key": key, "raw": raw}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
        return [out]

    def mark(self) -> int:
        with self.lock:
            return len(self.calls)

    def since(self, mark: int) -> list[dict]:
        with self.lock:
            return list(self.calls[mark:])

    def protected_calls(self, key: str | None = None) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["handler"] == "protected" and (key is None or c["key"] == key)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


# ----------------------------------------------------------------------------------------------------------------
# The gateway: one HTTP/1.1 listener and one h2c listener.


def boundary_config(port: int, h2_port: int, upstream_url: str, jwks_url: str) -> str:
    cfg = {
        "version": 1,
        "listeners": [{"address": f"127.0.0.1:{port}"}, {"address": f"127.0.0.1:{h2_port}", "http2": True}],
        "state": {"backend": "memory"},
        "upstreams": {"wsgi": {"url": upstream_url, "connect_timeout": "2s", "response_timeout": "10s"}},
        "verifiers": {"firebase": app_check_verifier(jwks_url)},
        "routes": [
            {"name": "api-host", "match": {"host": "api.example.com", "path_prefix": "/"}, "upstream": "wsgi",
             "verify": ["firebase"]},
            {"name": "payments", "match": {"path_prefix": "/api/payments/"}, "upstream": "wsgi",
             "verify": ["firebase"], "limited_use": True},
            {"name": "api", "match": {"path_prefix": "/api/"}, "upstream": "wsgi", "verify": ["firebase"]},
            {"name": "public", "match": {"path_prefix": "/"}, "upstream": "wsgi", "verify": []},
        ],
    }
    return yaml_dump(cfg) + "\n"


@pytest.fixture(scope="module")
def env(module_factory):
    iss = module_factory.dev_issuer()
    up = DecodingUpstream()
    port, h2_port = free_port(), free_port()
    try:
        gw = module_factory.gateway(boundary_config(port, h2_port, up.url, iss.jwks_url))
        wait_listening(h2_port, gw.proc, 10, "attest-gateway serve (h2c listener)")
        wait_gateway_accepts(gw.port, "/api/ready", H, iss.token())
        yield SimpleNamespace(gw=gw, up=up, iss=iss, port=port, h2_port=h2_port)
    finally:
        up.close()


# ----------------------------------------------------------------------------------------------------------------
# Spellings: (what is sent, the canonical target the contract makes of it, or AMBIGUOUS).

USERS = [
    ("/api/users", "/api/users"),
    ("/%61pi/users", "/api/users"),
    ("/%61%70%69/%75%73%65%72%73", "/api/users"),
    ("//api/users", "/api/users"),
    ("/./api/users", "/api/users"),
    ("/x/../api/users", "/api/users"),
    ("/api//users", "/api/users"),
    ("/api/./users", "/api/users"),
    ("/%2e/api/users", "/api/users"),
    ("/api/%2e%2e/api/users", "/api/users"),
    ("/api/.%2E/api/users", "/api/users"),
    ("/api/users/.", "/api/users/"),
    ("/api/users/..", "/api/"),
    ("/api/users?next=/../x%2F", "/api/users?next=/../x%2F"),
    ("/API%2fusers", AMBIGUOUS),
    ("/api%2Fusers", AMBIGUOUS),
    ("/api%2fusers", AMBIGUOUS),
    ("/api%5Cusers", AMBIGUOUS),
    ("/api\\users", AMBIGUOUS),
    ("/api;x/users", AMBIGUOUS),
    ("/..;/api/users", AMBIGUOUS),
    ("/api/users;jsessionid=1", AMBIGUOUS),
    ("/%00api", AMBIGUOUS),
    ("/api/users%00", AMBIGUOUS),
    ("/api/users%0a", AMBIGUOUS),
    ("/../api/users", AMBIGUOUS),
    ("/%2e%2e/api/users", AMBIGUOUS),
    ("/api/users#x", AMBIGUOUS),
    ("/api/us%4", AMBIGUOUS),
]

PAYMENTS = [
    ("/api/payments/charge", "/api/payments/charge"),
    ("/api//payments/charge", "/api/payments/charge"),
    ("/api/payments//charge", "/api/payments/charge"),
    ("//api/payments/charge", "/api/payments/charge"),
    ("/%61pi/payments/charge", "/api/payments/charge"),
    ("/api/%70ayments/charge", "/api/payments/charge"),
    ("/api/payments/%63harge", "/api/payments/charge"),
    ("/api/./payments/charge", "/api/payments/charge"),
    ("/api/x/../payments/charge", "/api/payments/charge"),
    ("/api/%2e/payments/charge", "/api/payments/charge"),
    ("/x/../api//payments/./charge", "/api/payments/charge"),
    ("/api%2Fpayments/charge", AMBIGUOUS),
    ("/api/payments%2fcharge", AMBIGUOUS),
    ("/api\\payments\\charge", AMBIGUOUS),
    ("/api;x/payments/charge", AMBIGUOUS),
    ("/api/payments;x/charge", AMBIGUOUS),
    ("/api/payments/charge;x", AMBIGUOUS),
    ("/..;/api/payments/charge", AMBIGUOUS),
]


def absolute(port: int) -> list[tuple[str, str]]:
    """Absolute-form targets (HTTP/1.1 only): the path inside is made canonical the same way."""
    a = f"http://127.0.0.1:{port}"
    return [(a + "/%61pi/users", "/api/users"), (a + "//api/users", "/api/users"),
            (a + "/x/../api/users", "/api/users"), (a + "/api//payments/charge", "/api/payments/charge"),
            (a + "/api%2Fusers", AMBIGUOUS), (a + "/../api/users", AMBIGUOUS)]


# ----------------------------------------------------------------------------------------------------------------
# Sending and reporting.


def h1_request(method: str, target: str, host: str = "gw.test", token: str | None = None,
               extra: tuple = ()) -> bytes:
    out = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"
    if token:
        out += f"{H}: {token}\r\n"
    for k, v in extra:
        out += f"{k}: {v}\r\n"
    if method == "POST":
        out += "Content-Length: 2\r\n\r\n{}"
    else:
        out += "\r\n"
    return out.encode("latin-1")


def outcome_h1(port: int, data: bytes, method: str) -> tuple[int | None, str | None]:
    """(status, reason): reason from the JSON error body, None for a 200; (None, "closed") without an answer."""
    try:
        r = U.one_shot(port, data, timeout=10, method=method)
    except OSError as e:
        return None, f"error {type(e).__name__}"
    if r is None:
        return None, "closed"
    return r.status, _reason(r.status, r.body)


def _reason(status: int | None, body: bytes | None) -> str | None:
    if status == 200:
        return None
    try:
        return json.loads(body or b"{}").get("reason")
    except ValueError:
        return f"non-JSON body {(body or b'')[:60]!r}"


def h2_client(port: int) -> H2:
    """test_http2's python-h2 client, told not to police what it sends (a host field beside :authority is the
    point of some cases here)."""
    c = H2(port, authority="gw.test")
    c.c.config.validate_outbound_headers = False
    return c


def outcome_h2(c: H2, method: str, path: str, token: str | None = None, authority: str | None = None,
               extra: tuple = ()) -> tuple[int | None, str | None]:
    headers = [(H.lower(), token)] if token else []
    headers += list(extra)
    body = b"{}" if method == "POST" else None
    if body:
        headers.append(("content-length", "2"))
    sid = c.request(method, path, headers, body=body, authority=authority)
    st = c.response(sid, timeout=10)
    if st.reset is not None:
        return None, f"RST_STREAM {st.reset}"
    return st.status, _reason(st.status, st.body)


def seen(calls: list[dict]) -> str:
    if not calls:
        return "nothing"
    return "; ".join(f"{c['handler']} raw={c['raw']!r} decoded={c['path_info']!r} verdict={c['verdict']}"
                     f" host={c['host']}" for c in calls)


def print_table(title: str, rows: list[tuple]) -> None:
    print(f"\n== {title}")
    width = max([len(r[0]) for r in rows] + [8])
    for spelling, status, reason, upstream in rows:
        print(f"  {spelling:<{width}}  {status if status is not None else '-':>4} {reason or '':<16} upstream: {upstream}")


def expected_without_token(canonical: str) -> tuple[int, str]:
    return (400, "ambiguous_path") if canonical == AMBIGUOUS else (401, "missing_token")


def settle(up: DecodingUpstream, mark: int, n: int = 0, timeout: float = 2.0) -> list[dict]:
    """The upstream calls since mark, after waiting (bounded) for n of them — and briefly for strays."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(up.since(mark)) < n:
        time.sleep(0.02)
    if n == 0:
        time.sleep(0.05)
    return up.since(mark)


# ----------------------------------------------------------------------------------------------------------------
# 1. Without a token nothing protected is served, whatever the spelling.


def test_h1_no_spelling_of_a_protected_path_reaches_the_upstream_without_a_token(env):
    rows, failures = [], []
    for method, (spelling, canonical) in [("GET", s) for s in USERS] + [("POST", s) for s in PAYMENTS] + \
                                         [("GET", s) for s in absolute(env.port)]:
        mark = env.up.mark()
        status, reason = outcome_h1(env.port, h1_request(method, spelling), method)
        calls = settle(env.up, mark)
        rows.append((f"{method} {spelling}", status, reason, seen(calls)))
        if calls or (status, reason) != expected_without_token(canonical):
            failures.append(f"{method} {spelling}: expected {expected_without_token(canonical)}, got ({status}, "
                            f"{reason}), upstream saw {seen(calls)}")
    print_table("HTTP/1.1, no token", rows)
    assert not env.up.protected_calls(), f"the protected handler ran: {env.up.protected_calls()}"
    assert not failures, "\n".join(failures)


def test_h2_no_spelling_of_a_protected_path_reaches_the_upstream_without_a_token(env):
    rows, failures = [], []
    c = h2_client(env.h2_port)
    try:
        for method, (spelling, canonical) in [("GET", s) for s in USERS] + [("POST", s) for s in PAYMENTS]:
            if c.eof or c.terminated:
                c.close()
                c = h2_client(env.h2_port)
            mark = env.up.mark()
            status, reason = outcome_h2(c, method, spelling)
            calls = settle(env.up, mark)
            rows.append((f"{method} {spelling}", status, reason, seen(calls)))
            if calls or (status, reason) != expected_without_token(canonical):
                failures.append(f"h2 {method} {spelling}: expected {expected_without_token(canonical)}, got "
                                f"({status}, {reason}), upstream saw {seen(calls)}")
    finally:
        c.close()
    print_table("HTTP/2 (h2c), no token", rows)
    assert not env.up.protected_calls(), f"the protected handler ran: {env.up.protected_calls()}"
    assert not failures, "\n".join(failures)


# ----------------------------------------------------------------------------------------------------------------
# 2. With a token, canonical spellings are served, and the upstream gets exactly the canonical target.


def _check_served(env, label: str, spelling: str, canonical: str, status, reason, calls, failures) -> None:
    if canonical == AMBIGUOUS:
        if calls or (status, reason) != (400, "ambiguous_path"):
            failures.append(f"{label} {spelling}: expected (400, ambiguous_path) and nothing upstream, got "
                            f"({status}, {reason}), upstream saw {seen(calls)}")
        return
    if status != 200 or len(calls) != 1:
        failures.append(f"{label} {spelling}: expected 200 and one upstream call, got ({status}, {reason}), "
                        f"upstream saw {seen(calls)}")
        return
    call = calls[0]
    if call["raw"] != canonical:
        failures.append(f"{label} {spelling}: the upstream received {call['raw']!r}, not the canonical {canonical!r}")
    if call["verdict"] != "verified":
        failures.append(f"{label} {spelling}: X-Attest-Verdict {call['verdict']!r} at the upstream, not verified")


def test_h1_canonical_spellings_are_forwarded_as_the_canonical_target(env):
    rows, failures = [], []
    token = env.iss.token()
    cases = [("GET", s) for s in USERS] + [("GET", s) for s in absolute(env.port) if "payments" not in s[0]]
    for method, (spelling, canonical) in cases:
        mark = env.up.mark()
        status, reason = outcome_h1(env.port, h1_request(method, spelling, token=token), method)
        calls = settle(env.up, mark, 0 if canonical == AMBIGUOUS else 1)
        rows.append((f"{method} {spelling}", status, reason, seen(calls)))
        _check_served(env, "h1", spelling, canonical, status, reason, calls, failures)
    print_table("HTTP/1.1, valid token", rows)
    assert not failures, "\n".join(failures)


def test_h2_canonical_spellings_are_forwarded_as_the_canonical_target(env):
    rows, failures = [], []
    token = env.iss.token()
    c = h2_client(env.h2_port)
    try:
        for spelling, canonical in USERS:
            if c.eof or c.terminated:
                c.close()
                c = h2_client(env.h2_port)
            mark = env.up.mark()
            status, reason = outcome_h2(c, "GET", spelling, token)
            calls = settle(env.up, mark, 0 if canonical == AMBIGUOUS else 1)
            rows.append((f"GET {spelling}", status, reason, seen(calls)))
            _check_served(env, "h2", spelling, canonical, status, reason, calls, failures)
    finally:
        c.close()
    print_table("HTTP/2 (h2c), valid token", rows)
    assert not failures, "\n".join(failures)


# ----------------------------------------------------------------------------------------------------------------
# 3. limited_use holds under every spelling of the limited route.


def _replay_table(env, send, label: str) -> None:
    """send(spelling, token) -> (status, reason). A limited-use token is used once on the canonical path, then
    again under every spelling: each is token_replayed (or ambiguous_path) and the handler ran once. A fresh token
    per spelling then shows each canonical spelling really is the limited route: served once, replayed after."""
    key = "/api/payments/charge"
    before = len(env.up.protected_calls(key))
    used = env.iss.token(limited_use=True)
    rows, failures = [], []
    mark = env.up.mark()
    status, reason = send("/api/payments/charge", used)
    calls = settle(env.up, mark, 1)
    rows.append(("POST /api/payments/charge (first use)", status, reason, seen(calls)))
    assert status == 200 and len(calls) == 1, f"the first use was not served: ({status}, {reason}) {seen(calls)}"
    for spelling, canonical in PAYMENTS:
        mark = env.up.mark()
        status, reason = send(spelling, used)
        calls = settle(env.up, mark)
        rows.append((f"POST {spelling} (used token)", status, reason, seen(calls)))
        want = (400, "ambiguous_path") if canonical == AMBIGUOUS else (401, "token_replayed")
        if calls or (status, reason) != want:
            failures.append(f"{label} POST {spelling} with a used limited-use token: expected {want}, got ({status}, "
                            f"{reason}), upstream saw {seen(calls)}")
    served_once = len(env.up.protected_calls(key)) - before
    for spelling, canonical in PAYMENTS[1:]:
        if canonical == AMBIGUOUS:
            continue
        fresh = env.iss.token(limited_use=True)
        mark = env.up.mark()
        first = send(spelling, fresh)
        calls = settle(env.up, mark, 1)
        second = send("/api/payments/charge", fresh)
        rows.append((f"POST {spelling} (fresh token, then canonical)", first[0], f"then {second[0]} {second[1]}",
                     seen(calls)))
        if first[0] != 200 or len(calls) != 1 or calls[0]["raw"] != canonical:
            failures.append(f"{label} POST {spelling} with a fresh token: expected 200 at {canonical}, got {first}, "
                            f"upstream saw {seen(calls)}")
        if second != (401, "token_replayed"):
            failures.append(f"{label} POST {spelling} did not consume its limited-use token: the canonical path "
                            f"then gave {second}")
    print_table(f"{label}, limited use", rows)
    assert served_once == 1, f"the payments handler ran {served_once} times for one limited-use token"
    assert not failures, "\n".join(failures)


def test_h1_a_used_limited_use_token_is_replayed_under_every_spelling(env):
    _replay_table(env, lambda spelling, token: outcome_h1(env.port, h1_request("POST", spelling, token=token), "POST"),
                  "HTTP/1.1")


def test_h2_a_used_limited_use_token_is_replayed_under_every_spelling(env):
    holder = {"c": h2_client(env.h2_port)}

    def send(spelling, token):
        if holder["c"].eof or holder["c"].terminated:
            holder["c"].close()
            holder["c"] = h2_client(env.h2_port)
        return outcome_h2(holder["c"], "POST", spelling, token)

    try:
        _replay_table(env, send, "HTTP/2")
    finally:
        holder["c"].close()


# ----------------------------------------------------------------------------------------------------------------
# 4. Hosts: the api.example.com route under every spelling of its host.

HOST_PATH = "/hosted/page"     # public by path: only the host route protects it


def test_h1_no_spelling_of_the_protected_host_reaches_the_upstream_unverified(env):
    cases = [
        # (label, target, Host, expected without a token)
        ("Host API.EXAMPLE.COM", HOST_PATH, "API.EXAMPLE.COM", (401, "missing_token")),
        ("Host api.example.com.", HOST_PATH, "api.example.com.", (401, "missing_token")),
        ("Host api.example.com.:8080", HOST_PATH, "api.example.com.:8080", (401, "missing_token")),
        ("Host api.example.com:8080", HOST_PATH, "api.example.com:8080", (401, "missing_token")),
        ("Host Api.Example.Com.:443", HOST_PATH, "Api.Example.Com.:443", (401, "missing_token")),
        ("absolute api.example.com, Host public.example", f"http://api.example.com{HOST_PATH}", "public.example",
         (401, "missing_token")),
        ("absolute API.EXAMPLE.COM.:80, Host public.example", f"http://API.EXAMPLE.COM.:80{HOST_PATH}",
         "public.example", (401, "missing_token")),
        ("absolute api.example.com, %61 path, Host public.example", "http://api.example.com/%68osted/page",
         "public.example", (401, "missing_token")),
    ]
    rows, failures = [], []
    for label, target, host, want in cases:
        mark = env.up.mark()
        status, reason = outcome_h1(env.port, h1_request("GET", target, host=host), "GET")
        calls = settle(env.up, mark)
        rows.append((label, status, reason, seen(calls)))
        if calls or (status, reason) != want:
            failures.append(f"h1 {label}: expected {want} and nothing upstream, got ({status}, {reason}), "
                            f"upstream saw {seen(calls)}")
    # With a token they are served through the host route (verified).
    token = env.iss.token()
    for label, target, host, _ in cases:
        mark = env.up.mark()
        status, reason = outcome_h1(env.port, h1_request("GET", target, host=host, token=token), "GET")
        calls = settle(env.up, mark, 1)
        rows.append((label + " + token", status, reason, seen(calls)))
        if status != 200 or len(calls) != 1 or calls[0]["verdict"] != "verified" or calls[0]["raw"] != HOST_PATH:
            failures.append(f"h1 {label} with a token: expected 200, verified, {HOST_PATH} upstream; got ({status}, "
                            f"{reason}), upstream saw {seen(calls)}")
    # Controls: the public host is public; an absolute-form authority naming it wins over Host api.example.com,
    # and the upstream then gets the host it was routed by, never the protected one.
    for label, target, host in [("Host public.example", HOST_PATH, "public.example"),
                                ("absolute public.example, Host api.example.com", f"http://public.example{HOST_PATH}",
                                 "api.example.com")]:
        mark = env.up.mark()
        status, reason = outcome_h1(env.port, h1_request("GET", target, host=host), "GET")
        calls = settle(env.up, mark, 1 if status == 200 else 0)
        rows.append((label, status, reason, seen(calls)))
        if status == 200:
            if len(calls) != 1 or (calls[0]["host"] or "").lower().rstrip(".").startswith("api.example.com"):
                failures.append(f"h1 {label}: served unverified with upstream Host {calls and calls[0]['host']!r}")
        elif label.startswith("Host public"):
            failures.append(f"h1 {label}: the public host was refused ({status}, {reason})")
    print_table("HTTP/1.1, hosts", rows)
    assert not failures, "\n".join(failures)


def test_h2_no_spelling_of_the_protected_host_reaches_the_upstream_unverified(env):
    cases = [
        # (label, :authority, extra fields)
        (":authority API.EXAMPLE.COM", "API.EXAMPLE.COM", ()),
        (":authority api.example.com.", "api.example.com.", ()),
        (":authority api.example.com.:8080", "api.example.com.:8080", ()),
        (":authority api.example.com:8443", "api.example.com:8443", ()),
        (":authority api.example.com, host public.example", "api.example.com", (("host", "public.example"),)),
    ]
    rows, failures = [], []
    token = env.iss.token()
    c = h2_client(env.h2_port)
    try:
        for label, authority, extra in cases:
            for tok in (None, token):
                if c.eof or c.terminated:
                    c.close()
                    c = h2_client(env.h2_port)
                mark = env.up.mark()
                status, reason = outcome_h2(c, "GET", HOST_PATH, tok, authority=authority, extra=extra)
                calls = settle(env.up, mark, 1 if tok else 0)
                rows.append((label + (" + token" if tok else ""), status, reason, seen(calls)))
                if tok is None and (calls or (status, reason) != (401, "missing_token")):
                    failures.append(f"h2 {label}: expected (401, missing_token) and nothing upstream, got ({status}, "
                                    f"{reason}), upstream saw {seen(calls)}")
                if tok is not None and (status != 200 or len(calls) != 1 or calls[0]["verdict"] != "verified"):
                    failures.append(f"h2 {label} with a token: expected 200 and verified upstream, got ({status}, "
                                    f"{reason}), upstream saw {seen(calls)}")
        # :authority names the public host, a host field the protected one: :authority wins; if served, the
        # upstream must not be told the protected host.
        if c.eof or c.terminated:
            c.close()
            c = h2_client(env.h2_port)
        mark = env.up.mark()
        label = ":authority public.example, host api.example.com"
        status, reason = outcome_h2(c, "GET", HOST_PATH, None, authority="public.example",
                                    extra=(("host", "api.example.com"),))
        calls = settle(env.up, mark, 1 if status == 200 else 0)
        rows.append((label, status, reason, seen(calls)))
        if status == 200 and (len(calls) != 1 or (calls[0]["host"] or "").lower().startswith("api.example.com")):
            failures.append(f"h2 {label}: served unverified with upstream Host {calls and calls[0]['host']!r}")
    finally:
        c.close()
    print_table("HTTP/2 (h2c), hosts", rows)
    assert not failures, "\n".join(failures)


def test_the_upstream_model_is_as_lenient_as_claimed():
    """The decoding router really would serve the attack spellings as the protected path (so a bypass would show)."""
    for spelling in ["/%61pi/users", "//api/users", "/./api/users", "/x/../api/users", "/api//users", "/api\\users",
                     "/api;x/users", "/..;/api/users", "/api/users;jsessionid=1", "/api%2Fusers",
                     "/api%5Cusers", "/api/%2e%2e/api/users"]:
        decoded = urllib.parse.unquote(spelling, "latin-1")
        assert route_key(decoded) == "/api/users", (spelling, route_key(decoded))
    assert route_key(urllib.parse.unquote("/api//payments/charge")) == "/api/payments/charge"
    assert route_key("/api/users/..") == "/api"
