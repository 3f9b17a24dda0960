"""TLS termination on a listener (`tls:`): the real gateway behind Python's ssl client and curl, a test CA made at
test time. HTTP/1.1 over TLS 1.2/1.3 (ALPN offers http/1.1 only until HTTP/2 lands), keep-alive, large bodies both
ways byte-identical, App Check rejections identical to plain HTTP, certificates reloaded on SIGHUP for new
connections while an open one keeps working, and garbage or old protocol versions refused without harm."""

from __future__ import annotations

import hashlib
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest

import upstreams as U
from apple_fakes import make_tls
from harness import app_check_verifier, free_port, gateway_config

H = "X-Firebase-AppCheck"


def tls_config(port: int, up_url: str, cert, key, jwks_url: str) -> str:
    cfg = gateway_config(port, {"up": up_url},
                         routes=[{"name": "ac", "match": {"path_prefix": "/ac"}, "upstream": "up", "verify": ["fb"]},
                                 {"name": "open", "match": {"path_prefix": "/"}, "upstream": "up", "verify": []}],
                         verifiers={"fb": app_check_verifier(jwks_url)})
    listener = f'  - address: "127.0.0.1:{port}"\n'
    assert listener in cfg
    return cfg.replace(listener, listener + f'    tls:\n      certificate: "{cert}"\n      private_key: "{key}"\n', 1)


@pytest.fixture
def env(factory, start_dev_issuer, tmp_path):
    pki = make_tls(tmp_path / "pki")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    shutil.copy(pki.cert, cert)
    shutil.copy(pki.key, key)
    iss = start_dev_issuer()
    up = factory.upstream(name="tls-up")
    port = free_port()
    gw = factory.gateway(tls_config(port, up.url, cert, key, iss.jwks_url))
    return type("Env", (), dict(gw=gw, up=up, iss=iss, pki=pki, cert=cert, key=key, tmp=tmp_path, port=port))


def client(env, ca=None, alpn=("h2", "http/1.1"), **kw) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(ca or env.pki.ca))
    ctx.set_alpn_protocols(list(alpn))
    for k, v in kw.items():
        setattr(ctx, k, v)
    raw = socket.create_connection(("127.0.0.1", env.port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def exchange(sock: ssl.SSLSocket, data: bytes) -> U.Resp:
    sock.sendall(data)
    return U.read_response(U.Reader(sock), data.split(b" ", 1)[0].decode())


def test_http11_over_tls_with_keep_alive_and_forwarded_proto(env):
    s = client(env)
    assert s.version() in ("TLSv1.3", "TLSv1.2")
    assert s.selected_alpn_protocol() == "http/1.1"          # h2 is not offered until HTTP/2 is served
    for i in range(3):
        r = exchange(s, f"GET /x{i} HTTP/1.1\r\nHost: gw.test\r\n\r\n".encode())
        assert r.status == 200
    s.close()
    q = [q for q in env.up.requests if q.target == "/x2"][-1]
    assert q.one("x-forwarded-proto") == "https"


def test_curl_over_tls(env):
    out = subprocess.run(["curl", "-sS", "--cacert", str(env.pki.ca), f"https://127.0.0.1:{env.port}/curl"],
                         capture_output=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert b'"target": "/curl"' in out.stdout


def test_large_bodies_both_ways_are_byte_identical(env):
    body = bytes(range(256)) * 4096                               # 1 MiB up
    s = client(env)
    r = exchange(s, b"POST /up HTTP/1.1\r\nHost: gw.test\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert r.status == 200
    assert [q for q in env.up.requests if q.target == "/up"][-1].body_sha256 == hashlib.sha256(body).hexdigest()
    r = exchange(s, b"GET /down HTTP/1.1\r\nHost: gw.test\r\nX-Reply-Size: 5242880\r\n\r\n")   # 5 MiB down
    assert r.status == 200 and r.body_len == 5 * 1024 * 1024 and r.body_sha256 == r.one("x-body-sha256")
    s.close()


def test_app_check_rejections_are_the_same_as_over_plain_http(env):
    s = client(env)
    r = exchange(s, b"GET /ac/x HTTP/1.1\r\nHost: gw.test\r\n\r\n")
    assert r.status == 401 and r.body == b'{"error":"unauthorized","reason":"missing_token"}'
    assert r.one("www-authenticate") == 'AppCheck realm="attest-gateway", error="missing_token"'
    r = exchange(s, f"GET /ac/x HTTP/1.1\r\nHost: gw.test\r\n{H}: {env.iss.token()}\r\n\r\n".encode())
    assert r.status == 200


def test_sighup_reloads_the_certificate_for_new_connections(env):
    old = client(env)
    assert exchange(old, b"GET /before HTTP/1.1\r\nHost: gw.test\r\n\r\n").status == 200
    new_pki = make_tls(env.tmp / "pki2")
    shutil.copy(new_pki.cert, env.cert)
    shutil.copy(new_pki.key, env.key)
    env.gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reload: configuration applied" not in env.gw.stderr():
        assert time.monotonic() < deadline, env.gw.stderr()[-2000:]
        time.sleep(0.05)
    fresh = client(env, ca=new_pki.ca)                           # verifies only against the new CA
    assert exchange(fresh, b"GET /after HTTP/1.1\r\nHost: gw.test\r\n\r\n").status == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        client(env, ca=env.pki.ca)                               # the old certificate is gone for new connections
    assert exchange(old, b"GET /old-still HTTP/1.1\r\nHost: gw.test\r\n\r\n").status == 200
    old.close()
    fresh.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_plaintext_garbage_and_tls11_are_refused_harmlessly(env):
    with socket.create_connection(("127.0.0.1", env.port), timeout=5) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            data = b""
        assert not data.startswith(b"HTTP/1.1 200")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(env.pki.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except ssl.SSLError:
        pass
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        with socket.create_connection(("127.0.0.1", env.port), timeout=5) as raw:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    s = client(env)                                              # still serving
    assert exchange(s, b"GET /alive HTTP/1.1\r\nHost: gw.test\r\n\r\n").status == 200
