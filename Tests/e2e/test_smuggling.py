"""Request smuggling and malformed requests.

1. Malformed heads against a plain route: the right status, a JSON error, the connection closed (4xx, and 501 for an
   unknown transfer coding, whose framing cannot be known) and not one byte at the upstream.
2. Against an App Check route (a dev issuer): CL.TE / TE.CL / TE.TE with a valid token, `_` spellings,
   `Connection`-named framing, absolute- and authority-form targets, HTTP/0.9, huge chunk extensions, pipelined
   desync attempts — the recording upstream sees exactly the requests the gateway routed, and on the App Check route
   only verified ones with the gateway's verdict. docs/hardening.md has the table."""

import time
import types

import pytest

import upstreams as U
from harness import app_check_verifier, assert_json_error, free_port, gateway_config, wait_gateway_accepts

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
    # TE.TE: every spelling other than one bare "chunked" in one field is refused, never guessed
    ("te_chunked_identity", P + b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 501),
    ("te_identity_chunked", P + b"Transfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n", 501),
    ("te_chunked_chunked", P + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 501),
    ("te_twice", P + TE + TE + b"\r\n0\r\n\r\n", 501),
    ("te_chunked_then_identity_field", P + TE + b"Transfer-Encoding: identity\r\n\r\n0\r\n\r\n", 501),
    ("te_empty", P + b"Transfer-Encoding: \r\n\r\n0\r\n\r\n", 501),
    ("te_leading_comma", P + b"Transfer-Encoding: , chunked\r\n\r\n0\r\n\r\n", 501),
    ("te_trailing_comma", P + b"Transfer-Encoding: chunked,\r\n\r\n0\r\n\r\n", 501),
    ("te_quoted", P + b'Transfer-Encoding: "chunked"\r\n\r\n0\r\n\r\n', 501),
    ("te_with_parameter", P + b"Transfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n", 501),
    ("te_nbsp_prefix", P + b"Transfer-Encoding: \xa0chunked\r\n\r\n0\r\n\r\n", 501),
    ("te_vertical_tab", P + b"Transfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n", 400),
    ("te_form_feed", P + b"Transfer-Encoding: chunked\x0c\r\n\r\n0\r\n\r\n", 400),
    ("te_on_http10", b"POST / HTTP/1.0\r\nHost: x\r\n" + TE + b"\r\n0\r\n\r\n", 400),
    ("te_cl_zero_obfuscated", P + b"Transfer-Encoding: xchunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n", 400),
    ("cl_hex", P + b"Content-Length: 0x5\r\n\r\nhello", 400),
    ("cl_inner_space", P + b"Content-Length: 5 5\r\n\r\nhello", 400),
    ("cl_empty", P + b"Content-Length: \r\n\r\n", 400),
    # duplicate / conflicting routing fields
    ("duplicate_host", b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    ("duplicate_host_same", b"GET / HTTP/1.1\r\nHost: x\r\nHost: x\r\n\r\n", 400),
    ("host_list", b"GET / HTTP/1.1\r\nHost: x, y\r\n\r\n", 400),
    ("host_userinfo", b"GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 400),
    # CR / LF / NUL injection in the request line, names and values
    ("cr_in_target", b"GET /a\rb HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("lf_in_target", b"GET /a\nHost: y HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("nul_in_target", b"GET /a\x00b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("tab_in_target", b"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("space_in_target", b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("nul_in_method", b"G\x00T / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("cr_ending_value", G + b"X-A: a\r\r\n\r\n", 400),
    ("lf_in_value_smuggles_te", P + b"X-A: a\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("crlf_cr_splits_host", b"GET / HTTP/1.1\r\nHost: x\rHost: y\r\n\r\n", 400),
    ("nul_in_name", G + b"X-\x00A: b\r\n\r\n", 400),
    ("del_in_value", G + b"X-A: a\x7fb\r\n\r\n", 400),
    ("nul_in_te_value", P + b"Transfer-Encoding: chunked\x00\r\n\r\n0\r\n\r\n", 400),
    ("nul_in_chunk_extension", P + TE + b"\r\n5;a=\x00\r\nhello\r\n0\r\n\r\n", 400),
    ("lf_only_chunk_line", P + TE + b"\r\n5\nhello\r\n0\r\n\r\n", 400),
    # request-line forms: HTTP/0.9, authority-form outside CONNECT, asterisk-form outside OPTIONS, bad versions
    ("http09_simple_request", b"GET /\r\n\r\n", 400),
    ("http09_with_header", b"GET /\r\nHost: x\r\n\r\n", 400),
    ("version_lowercase", b"GET / http/1.1\r\nHost: x\r\n\r\n", 400),
    ("version_1_10", b"GET / HTTP/1.10\r\nHost: x\r\n\r\n", 400),
    ("version_1_2", b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505),
    ("trailing_space_after_version", b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400),
    ("double_space_request_line", b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("authority_form_on_get", b"GET evil.test:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("connect_origin_form", b"CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("asterisk_on_get", b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ("absolute_form_no_authority", b"GET http:/x HTTP/1.1\r\nHost: x\r\n\r\n", 400),
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


# ----------------------------------------------------------------------------------------------------------------
# A verified route behind the same parser: whatever the client packs into one connection, the recording upstream
# sees only requests the gateway routed — on the App Check route only verified ones, with the gateway's verdict.
#
# Routes: "hosted" (Host open.test, no verification), "pub" (/pub, no verification), "api" (everything else,
# App Check with a dev issuer). Smuggled payloads come in two kinds:
#   BODY_SMUGGLE - a request hidden in a body; it targets /pub, where it would be forwarded if the gateway ever
#                  parsed body bytes as a request (so it must never show up at the upstream, whatever the route);
#   PIPE_SMUGGLE - an unverified request pipelined after a verified one; the gateway parses it and must answer it
#                  itself (401), never forward it.

AC = "X-Firebase-AppCheck"
BODY_SMUGGLE = (b"GET /pub/smuggled-body HTTP/1.1\r\nHost: gw.test\r\nX-Attest-Verdict: verified\r\n"
                b"X-Attest-Verifier: fb\r\n\r\n")
PIPE_SMUGGLE = b"GET /api/smuggled-pipe HTTP/1.1\r\nHost: gw.test\r\nX-Attest-Verdict: verified\r\n\r\n"


@pytest.fixture(scope="module")
def venv(module_factory):
    iss = module_factory.dev_issuer()
    up = module_factory.upstream("echo", name="vup")
    routes = [
        {"name": "hosted", "match": {"host": "open.test", "path_prefix": "/"}, "upstream": "up", "verify": []},
        {"name": "pub", "match": {"path_prefix": "/pub"}, "upstream": "up", "verify": []},
        {"name": "api", "match": {"path_prefix": "/"}, "upstream": "up", "verify": ["fb"]},
    ]
    gw = module_factory.gateway(gateway_config(free_port(), {"up": up.url}, routes=routes,
                                               verifiers={"fb": app_check_verifier(iss.jwks_url)}))
    token = iss.token()
    wait_gateway_accepts(gw.port, "/api/ready", AC, token)
    return types.SimpleNamespace(gw=gw, up=up, iss=iss, token=token)


def head(method: str, target: str, *fields: str, host: str = "gw.test", version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {target} {version}", f"Host: {host}", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def tok(v) -> str:
    return f"{AC}: {v.token}"


def exchange(v, raw: bytes, timeout: float = 5.0) -> list:
    """Sends raw in one write; returns the statuses of the responses, then "EOF" when the gateway closed the
    connection or "quiet" when it kept it open with nothing more to say (0.3 s of silence after a response)."""
    out = []
    with U.Conn(v.gw.port, timeout=timeout) as c:
        c.send(raw)
        for _ in range(8):
            if out:
                closed, extra = c.closed_within(0.3)
                if closed and not extra:
                    out.append("EOF")
                    break
                if not extra:
                    out.append("quiet")
                    break
                c.reader.buf[c.reader.pos:c.reader.pos] = extra   # a response is arriving: put it back
                c.reader.eof = closed
            try:
                r = c.response()
            except (ConnectionResetError, EOFError):
                out.append("EOF")
                break
            if r is None:
                out.append("EOF")
                break
            out.append(r.status)
            if r.status >= 400:
                assert_json_error(r, r.status, require_reason=r.status != 404)
    return out


def upstream_since(v, n0: int, settle: float = 0.2) -> list:
    time.sleep(settle)
    with v.up.lock:
        return list(v.up.requests[n0:])


def assert_upstream_saw(v, n0: int, expected: list[str]) -> list:
    """The upstream saw exactly these targets, in order; none smuggled; the gateway's verdict on /api ones."""
    got = upstream_since(v, n0)
    assert [q.target for q in got] == expected, f"upstream saw {[q.target for q in got]}, expected {expected}"
    for q in got:
        assert "smuggled" not in q.target
        verdicts = q.get("x-attest-verdict")
        if (q.one("host") or "").lower().rstrip(".") == "open.test" or q.target.startswith("/pub"):
            assert verdicts == [], f"{q.target}: a client-sent verdict reached the upstream: {q.headers}"
        else:
            assert verdicts == ["verified"] and q.get("x-attest-verifier") == ["fb"], (q.target, q.headers)
            assert q.get(AC.lower()) == [], "token header forwarded"
    return got


def n_now(v) -> int:
    with v.up.lock:
        return len(v.up.requests)


def test_verified_then_unverified_in_one_packet(venv):
    """A verified request and an unverified one (carrying a forged verdict) in the same write: only the first."""
    v = venv
    n0 = n_now(v)
    raw = head("GET", "/api/first", tok(v)) + PIPE_SMUGGLE + head("GET", "/api/third", tok(v))
    assert exchange(v, raw) == [200, 401, 200, "quiet"]
    assert_upstream_saw(v, n0, ["/api/first", "/api/third"])


def test_content_length_body_carrying_a_request_is_body(venv):
    v = venv
    n0 = n_now(v)
    raw = head("POST", "/api/upload", tok(v), f"Content-Length: {len(BODY_SMUGGLE)}") + BODY_SMUGGLE + PIPE_SMUGGLE
    assert exchange(v, raw) == [200, 401, "quiet"]
    got = assert_upstream_saw(v, n0, ["/api/upload"])
    assert got[0].body == BODY_SMUGGLE and got[0].one("content-length") == str(len(BODY_SMUGGLE))


def test_chunked_body_carrying_a_request_is_body(venv):
    v = venv
    n0 = n_now(v)
    raw = (head("POST", "/api/chunks", tok(v), "Transfer-Encoding: chunked") + U.chunk_encode(BODY_SMUGGLE, 17)
           + PIPE_SMUGGLE)
    assert exchange(v, raw) == [200, 401, "quiet"]
    got = assert_upstream_saw(v, n0, ["/api/chunks"])
    assert got[0].body == BODY_SMUGGLE and got[0].chunked


@pytest.mark.parametrize("te", ["Transfer-Encoding:\tchunked", "Transfer-Encoding: chunked \t",
                                "TRANSFER-ENCODING: CHUNKED", "transfer-encoding: Chunked"])
def test_te_whitespace_and_case_variants_are_plain_chunked(venv, te):
    """OWS and case are not obfuscation to a strict parser: these are "chunked", framed as such, re-chunked."""
    v = venv
    n0 = n_now(v)
    raw = head("POST", "/api/te", tok(v), te) + U.chunk_encode(BODY_SMUGGLE, 9) + PIPE_SMUGGLE
    assert exchange(v, raw) == [200, 401, "quiet"]
    got = assert_upstream_saw(v, n0, ["/api/te"])
    assert got[0].body == BODY_SMUGGLE and got[0].get("transfer-encoding") == ["chunked"]


@pytest.mark.parametrize("smuggle", [
    pytest.param(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", id="cl_te"),
    pytest.param(b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n0\r\n\r\n", id="te_cl"),
    pytest.param(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\nX-Len: %d\r\n\r\n0\r\n\r\n", id="te_te"),
    pytest.param(b"Transfer-Encoding: xchunked\r\nX-Len: %d\r\n\r\n0\r\n\r\n", id="te_xchunked"),
    pytest.param(b"Transfer-Encoding: chunked, identity\r\nX-Len: %d\r\n\r\n0\r\n\r\n", id="te_chunked_identity"),
])
def test_framing_conflicts_with_a_valid_token_reach_nothing(venv, smuggle):
    """The classic desyncs, sent with a token that verifies: refused at the parser, the body's request unread."""
    v = venv
    n0 = n_now(v)
    b0 = v.up.snapshot()[0]
    raw = (f"POST /api/desync HTTP/1.1\r\nHost: gw.test\r\n{tok(v)}\r\n".encode() + (smuggle % (5 + len(BODY_SMUGGLE)))
           + BODY_SMUGGLE)
    got = exchange(v, raw)
    assert got[0] in (400, 501) and got[1:] == ["EOF"], got
    assert_upstream_saw(v, n0, [])
    assert v.up.snapshot()[0] == b0, "bytes reached the upstream"


def test_underscore_transfer_encoding_is_not_framing_and_not_forwarded(venv):
    """`Transfer_Encoding` is a different field to the gateway (no body framing): the chunked "body" that follows is
    parsed as the next request and refused. The field is not forwarded either, so an upstream that reads `_` as `-`
    (CGI-style servers) cannot frame the request differently."""
    v = venv
    n0 = n_now(v)
    raw = head("POST", "/api/underscore", tok(v), "Transfer_Encoding: chunked") + b"0\r\n\r\n" + BODY_SMUGGLE
    assert exchange(v, raw) == [200, 400, "EOF"]
    got = assert_upstream_saw(v, n0, ["/api/underscore"])
    names = [k.lower().replace("_", "-") for k, _ in got[0].headers]
    assert "transfer-encoding" not in names and got[0].body_len == 0, got[0].headers


def test_underscore_spellings_of_gateway_fields_never_reach_the_upstream(venv):
    """`X_Attest_Verdict: verified` would read as the gateway's verdict to a CGI-style upstream
    (HTTP_X_ATTEST_VERDICT); `Content_Length` as framing. Both are dropped, on open and verified routes."""
    v = venv
    n0 = n_now(v)
    forged = ["X_Attest_Verdict: verified", "X-Attest_App-Id: forged.app", "Content_Length: 40",
              "X_Forwarded_Host: evil.test", "X_Underscore_Custom: kept"]
    assert exchange(v, head("GET", "/pub/u", *forged) + head("GET", "/api/u", tok(v), *forged)) == [200, 200, "quiet"]
    for q in assert_upstream_saw(v, n0, ["/pub/u", "/api/u"]):
        names = [k.lower() for k, _ in q.headers]
        assert "x_underscore_custom" in names, "ordinary underscore fields are forwarded"
        assert not any(n.replace("_", "-").startswith("x-attest-") and "_" in n for n in names), q.headers
        assert "content_length" not in names and "x_forwarded_host" not in names, q.headers
        assert b"forged.app" not in q.raw_head and b"evil.test" not in q.raw_head


@pytest.mark.parametrize("conn", ["content-length", "Content-Length, close", "keep-alive, content-length, host"])
def test_connection_cannot_strip_the_framing_of_a_forwarded_body(venv, conn):
    """`Connection: content-length` names Content-Length as hop-by-hop. Dropping it while forwarding the body
    handed the upstream the body as a second request (with a forged verdict) — the gateway now keeps Content-Length
    and Host whatever Connection says."""
    v = venv
    n0 = n_now(v)
    for path, auth in (("/pub/conn", ()), ("/api/conn", (tok(v),))):
        raw = head("POST", path, *auth, f"Connection: {conn}", f"Content-Length: {len(BODY_SMUGGLE)}") + BODY_SMUGGLE
        got = exchange(v, raw)
        assert got[0] == 200, got
    got = assert_upstream_saw(v, n0, ["/pub/conn", "/api/conn"])
    for q in got:
        assert q.body == BODY_SMUGGLE and q.one("host") == "gw.test", q.headers


def test_duplicate_and_padded_content_length_forwarded_once_canonical(venv):
    """`Content-Length: 5` twice or `010` are valid (one agreed value), but lenient next hops read them differently
    (first/last field wins, octal): the upstream gets the length the gateway framed by, once, in decimal."""
    v = venv
    n0 = n_now(v)
    body = b"0123456789"
    raw = (head("POST", "/pub/cl-dup", "Content-Length: 10", "Content-Length: 10") + body
           + head("POST", "/pub/cl-list", "Content-Length: 10, 10") + body
           + head("POST", "/pub/cl-octal", "Content-Length: 010") + body)
    assert exchange(v, raw) == [200, 200, 200, "quiet"]
    for q in assert_upstream_saw(v, n0, ["/pub/cl-dup", "/pub/cl-list", "/pub/cl-octal"]):
        assert q.get("content-length") == ["10"] and q.body == body, (q.target, q.headers)


def test_absolute_form_authority_wins_over_host(venv):
    """Absolute-form becomes origin-form and the target's authority routes the request (RFC 9112 3.2.2: a server
    ignores Host then) — and that authority is the Host the upstream gets, so the host the route matched and the one
    the upstream serves are the same; the client's Host appears nowhere upstream."""
    v = venv
    n0 = n_now(v)
    # The authority names the open host route, Host the verified catch-all: routed (and forwarded) by the authority.
    assert exchange(v, head("GET", "http://open.test/x", host="gw.test")) == [200, "quiet"]
    assert exchange(v, head("GET", "http://OPEN.test./hosted/abs?q=1", tok(v), host="gw.test")) == [200, "quiet"]
    # The authority names the verified route, Host the open one: verification applies (no token: 401).
    assert exchange(v, head("GET", "https://gw.test/abs-open", host="open.test")) == [401, "quiet"]
    # No path before the query: nothing to route.
    assert exchange(v, head("GET", "http://gw.test?/pub/x")) == [404, "quiet"]
    # Userinfo in the authority is read differently by different parsers: refused.
    assert exchange(v, head("GET", "http://gw.test@open.test/x", host="open.test")) == [400, "quiet"]
    got = assert_upstream_saw(v, n0, ["/x", "/hosted/abs?q=1"])
    assert got[0].one("host") == "open.test" and got[0].one("x-forwarded-host") == "open.test"
    assert got[1].one("host") == "OPEN.test." and got[1].one("x-forwarded-host") == "OPEN.test."
    for g in got:
        assert b"gw.test" not in g.raw_head and g.get("x-attest-verdict") == []


def test_connect_and_asterisk_forms_are_never_forwarded(venv):
    """CONNECT authority-form and OPTIONS * parse, but no route matches a path that does not start with "/":
    404 from the gateway, no tunnel, nothing upstream — with a valid token too."""
    v = venv
    n0 = n_now(v)
    raw = (head("CONNECT", "upstream.internal:443", tok(v), host="upstream.internal:443")
           + head("OPTIONS", "*", tok(v)) + head("GET", "/api/after", tok(v)))
    assert exchange(v, raw) == [404, 404, 200, "quiet"]
    assert_upstream_saw(v, n0, ["/api/after"])


def test_http09_request_gets_400_and_nothing_upstream(venv):
    v = venv
    n0 = n_now(v)
    assert exchange(v, b"GET /pub/http09\r\n") == [400, "EOF"]
    assert exchange(v, b"GET /pub/http09\r\n\r\n" + head("GET", "/pub/after")) == [400, "EOF"]
    assert_upstream_saw(v, n0, [])


def test_chunk_extension_of_1mb_is_refused(venv):
    """A 1 MiB chunk extension (limit: 4 KiB per chunk-size line): 400 bad_chunk_size, connection closed, and the
    upstream never gets a complete request (it may have seen the head: the body is cut, never terminated)."""
    v = venv
    n0 = n_now(v)
    raw = (head("POST", "/api/ext", tok(v), "Transfer-Encoding: chunked") + b"5;ext=" + b"a" * (1 << 20) + b"\r\nhello\r\n0\r\n\r\n"
           + PIPE_SMUGGLE)
    with U.Conn(v.gw.port, timeout=5) as c:
        try:
            c.send(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass                        # the gateway may close before taking the whole megabyte
        r = c.response()
        doc = assert_json_error(r, 400)
        assert doc["reason"] == "bad_chunk_size"
        assert c.closed_within(3)[0]
    assert_upstream_saw(v, n0, [])
    # after a good first chunk: the upstream has a head and 5 bytes, then the connection is cut — still no request
    raw = (head("POST", "/api/ext2", tok(v), "Transfer-Encoding: chunked") + b"5\r\nhello\r\n")
    with U.Conn(v.gw.port, timeout=5) as c:
        c.send(raw)
        time.sleep(0.2)
        try:
            c.send(b"1;" + b"e" * (64 << 10) + b"\r\nx\r\n0\r\n\r\n" + PIPE_SMUGGLE)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert assert_json_error(c.response(), 400)["reason"] == "bad_chunk_size"
    assert_upstream_saw(v, n0, [])


def test_long_valid_chunk_extension_is_dropped(venv):
    """Extensions within the limit are skipped, never forwarded: a quoted request in one stays in the gateway."""
    v = venv
    n0 = n_now(v)
    b0 = v.up.snapshot()[0]
    ext = b';x="GET /pub/smuggled-ext HTTP/1.1"' + b";a=b" * 900
    raw = head("POST", "/api/ext-ok", tok(v), "Transfer-Encoding: chunked") + b"5" + ext + b"\r\nhello\r\n0\r\n\r\n"
    assert exchange(v, raw) == [200, "quiet"]
    got = assert_upstream_saw(v, n0, ["/api/ext-ok"])
    assert got[0].body == b"hello" and b"smuggled" not in got[0].raw_head
    sent = v.up.snapshot()[0] - b0
    assert sent < len(got[0].raw_head) + 64, f"{sent} bytes upstream: the {len(ext)}-byte extension went along"


@pytest.mark.parametrize("framing", ["length", "chunked", "expect"])
def test_rejected_request_body_is_never_parsed_as_a_request(venv, framing):
    """A request refused with 401 (no token) has its body unread: the connection closes, so a request hidden in
    that body (to the open route) is never parsed, let alone forwarded."""
    v = venv
    n0 = n_now(v)
    if framing == "length":
        raw = head("POST", "/api/nobody", f"Content-Length: {len(BODY_SMUGGLE)}") + BODY_SMUGGLE
    elif framing == "chunked":
        raw = head("POST", "/api/nobody", "Transfer-Encoding: chunked") + U.chunk_encode(BODY_SMUGGLE) + BODY_SMUGGLE
    else:
        raw = head("POST", "/api/nobody", "Expect: 100-continue", f"Content-Length: {len(BODY_SMUGGLE)}")
    with U.Conn(v.gw.port, timeout=5) as c:
        c.send(raw)
        r = c.response()
        assert r.status == 401 and not r.interim, (r.status, r.interim)
        if framing == "expect":
            try:
                c.send(BODY_SMUGGLE)    # the client sends the body anyway
            except (BrokenPipeError, ConnectionResetError):
                pass
        closed, extra = c.closed_within(3)
        assert closed and extra == b"", extra[:200]
    assert_upstream_saw(v, n0, [])


def test_connection_close_and_http10_end_the_connection_before_a_pipelined_request(venv):
    v = venv
    n0 = n_now(v)
    assert exchange(v, head("GET", "/api/close", tok(v), "Connection: close") + head("GET", "/pub/smuggled-close")) \
        == [200, "EOF"]
    assert exchange(v, head("GET", "/pub/http10", version="HTTP/1.0") + head("GET", "/pub/smuggled-10")) == [200, "EOF"]
    assert_upstream_saw(v, n0, ["/api/close", "/pub/http10"])


def test_crlf_in_a_verified_claim_never_becomes_a_header(venv):
    """The App Check `sub` becomes X-Attest-App-Id: a signed token whose sub carries CRLF + a header is refused."""
    v = venv
    n0 = n_now(v)
    bad = v.iss.token(app_id="1:123456789012:ios:abc\r\nX-Injected: 1")
    assert exchange(v, head("GET", "/api/sub", f"{AC}: {bad}")) == [401, "quiet"]
    assert_upstream_saw(v, n0, [])


def test_upstream_never_saw_a_smuggled_request(venv):
    """Runs last: across every test above, nothing smuggled arrived and the gateway is still up."""
    v = venv
    with v.up.lock:
        targets = [q.target for q in v.up.requests]
    assert targets and not [t for t in targets if "smuggled" in t], targets
    assert v.gw.proc.poll() is None
