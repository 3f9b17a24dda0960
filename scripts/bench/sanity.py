"""Checks before anything is measured: each proxy must return the upstream's 200 + body (over HTTP/2 where the row
asks for it), and each verifying one must refuse what it should. Any failure stops the bench (die)."""

from __future__ import annotations

import json
import subprocess

import upstreams as U
from peers import BODY_MARK
from lab import Lab
from material import AppAttest, Tokens, assertion_headers
from settings import die, loud

Headers = list[tuple[str, str]]


def probe(port: int, headers: Headers = ()) -> U.Resp | None:
    """GET /bench with these header fields on a new connection (None: no answer)."""
    head = "GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    try:
        return U.one_shot(port, (head + "Connection: close\r\n\r\n").encode("latin-1"), timeout=5)
    except (OSError, ValueError, EOFError):
        return None


def token(value: str | None) -> Headers:
    return [("X-Firebase-AppCheck", value)] if value else []


def status(r: U.Resp | None) -> str:
    return "none" if r is None else str(r.status)


def status_reason(r: U.Resp | None) -> str:
    """'401 token_replayed': the status and the reason of a local JSON answer ('-' without one)."""
    try:
        reason = json.loads(r.body).get("reason") if r is not None and r.body else None
    except (ValueError, AttributeError):
        reason = None
    return f"{status(r)} {reason or '-'}"


def check_pass(name: str, port: int, headers: Headers = ()) -> str:
    """Dies unless the request comes back as the upstream's 200 + body; returns the status."""
    r = probe(port, headers)
    if r is None or r.status != 200 or BODY_MARK not in (r.body or b""):
        loud(f"sanity request through {name} (127.0.0.1:{port}) did not return the upstream's 200 + body")
        print((r.raw_head + (r.body or b""))[:2000].decode("latin-1") if r else "(no answer)")
        die(f"{name} does not proxy correctly")
    return status(r)


def h2_answers(name: str, url: str) -> bool:
    """nghttp GET (http://: h2c with prior knowledge; https://: ALPN h2, certificate not verified): True when it
    answered :status 200 with the upstream's body over HTTP/2."""
    try:
        out = subprocess.run(["nghttp", "-v", url], capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        out = "(nghttp timed out after 10 s)"
    ok = (") :status: 200" in out and BODY_MARK.decode() in out
          and (not url.startswith("https:") or "The negotiated protocol: h2" in out))
    print(f"  {name:<22} {url}: {'200 + body over HTTP/2' if ok else 'NO HTTP/2 200 + body; nghttp said:'}")
    if not ok:
        shown = [l for l in out.splitlines() if not l.startswith(" " * 10) and "PRIORITY frame" not in l]
        print("\n".join("      " + l for l in shown[:12]))
    return ok


def check_rs256(name: str, port: int, tokens: Tokens) -> None:
    repeated = check_pass(name, port, token(tokens.repeated))
    distinct = check_pass(name, port, token(tokens.first_distinct))
    bad, none = status(probe(port, token(tokens.bad))), status(probe(port))
    print(f"  {name:<22} valid repeated token {repeated}, valid distinct token {distinct}, bad signature {bad}, "
          f"no token {none}")
    if bad != "401" or none != "401":
        loud(f"{name} did not answer 401 to a bad or missing token (bad: {bad}, none: {none})")
        die(f"{name} does not verify tokens")


def check_limited_use(name: str, port: int, tokens: Tokens) -> None:
    fresh = check_pass(name, port, token(tokens.lu_fresh))
    again = status_reason(probe(port, token(tokens.lu_fresh)))
    no_jti = status_reason(probe(port, token(tokens.repeated)))   # repeated.jwt has no jti
    print(f"  {name:<22} fresh token {fresh}, same token again {again}, token without jti {no_jti}")
    if again != "401 token_replayed" or no_jti != "401 missing_jti":
        loud(f"{name} does not enforce limited use (again: {again}, no jti: {no_jti})")
        die(f"{name} does not enforce limited use")


def check_app_attest(name: str, port: int, aa: AppAttest) -> None:
    first, second = aa.assertion_file(aa.sanity).read_text().splitlines()[:2]
    fresh = check_pass(name, port, assertion_headers(second))
    again = status_reason(probe(port, assertion_headers(second)))
    lower = status_reason(probe(port, assertion_headers(first)))
    none = status_reason(probe(port))
    print(f"  {name:<22} counter 2 {fresh}, counter 2 again {again}, counter 1 after it {lower}, no assertion {none}")
    if (again, lower, none) != ("401 counter_not_increasing", "401 counter_not_increasing", "401 missing_token"):
        loud(f"{name} does not enforce App Attest (again: {again}, lower: {lower}, none: {none})")
        die(f"{name} does not enforce App Attest")


def check_h2(lab: Lab) -> tuple[bool, bool]:
    """nginx must answer over HTTP/2 (or the bench stops); whether the gateway answers h2c, and h2 over TLS."""
    p, tls, gateway = lab.ports, lab.s.h2_tls, lab.s.gateway
    print("sanity, HTTP/2 (nghttp; h2c = prior knowledge, TLS = ALPN h2):")
    if not h2_answers("nginx-h2c", f"http://127.0.0.1:{p['h2-nginx']}/bench"):
        die("nginx does not proxy h2c (nginx built without http_v2?)")
    if tls and not h2_answers("nginx-h2-tls", f"https://127.0.0.1:{p['h2-nginx-tls']}/bench"):
        die("nginx does not proxy h2 over TLS")
    check_pass("attest-gateway (http2 listener, HTTP/1.1)", p["h2-gateway"])   # it still takes HTTP/1.1
    h2c = h2_answers("gw-h2c", f"http://127.0.0.1:{p['h2-gateway']}/bench")
    if not h2c:
        loud(f"attest-gateway ({gateway}) does not answer h2c on its http2: true listener (a build from before "
             "HTTP/2?): gw-h2c rows SKIPPED")
    h2_tls = tls and h2_answers("gw-h2-tls", f"https://127.0.0.1:{p['h2-gateway-tls']}/bench")
    if tls and not h2_tls:
        loud(f"attest-gateway ({gateway}) does not answer h2 (ALPN) on its http2: true tls: listener: gw-h2-tls row "
             "SKIPPED")
    print()
    return h2c, h2_tls


def check_all(lab: Lab) -> tuple[bool, bool]:
    """Before measuring: the HTTP/1.1 and HTTP/2 paths, then each verifier; returns check_h2's answer."""
    s, p = lab.s, lab.ports
    check_pass("nginx", p["nginx"])
    check_pass("attest-gateway", p["gateway"])
    h2 = check_h2(lab) if s.h2 else (False, False)
    sections = [
        (s.rs256, "sanity (status per proxy; must be 200 for a valid token, 401 for a bad signature or no token):",
         [(check_rs256, "attest-gateway-rs256", "rs256", lab.tokens), (check_rs256, "haproxy", "haproxy", lab.tokens)]),
        (s.lu, "sanity, limited use (must be: fresh token 200, the same token again 401 token_replayed, token without "
         "jti 401 missing_jti):", [(check_limited_use, "gw-lu-sqlite", "lu-sqlite", lab.tokens),
                                   (check_limited_use, "gw-lu-redis", "lu-redis", lab.tokens)]),
        (s.aa, "sanity, app attest (must be: counter 2 200, counter 2 again 401 counter_not_increasing, counter 1 "
         "after it 401 counter_not_increasing, no assertion 401 missing_token):",
         [(check_app_attest, "gw-appattest-sqlite", "aa", lab.aa)])]
    for selected, title, checks in sections:
        if selected:
            print(title)
            for check, name, port, material in checks:
                check(name, p[port], material)
            print()
    return h2
