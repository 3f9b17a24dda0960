"""listeners[].trusted_proxies: only the listed peers' forwarding headers reach the upstream (kept and appended to);
from any other peer Forwarded and X-Real-IP are dropped, X-Forwarded-For is the peer's address alone,
X-Forwarded-Proto/-Host are the gateway's and -Port/-Prefix are dropped (CONFIG.md Additions).

Loopback has all of 127.0.0.0/8: the "proxy" connects from 127.0.0.2 (trusted), the "client" from 127.0.0.1 and
127.0.0.3 (not), by binding the client socket's source address.
"""

from __future__ import annotations

import socket

import pytest

import upstreams as U
from harness import free_port, gateway_config, yaml_dump

SPOOF = [
    ("X-Forwarded-For", "6.6.6.6"),
    ("X-Forwarded-For", "7.7.7.7"),
    ("Forwarded", "for=6.6.6.6;proto=https;host=evil.test"),
    ("X-Real-IP", "6.6.6.6"),
    ("X-Forwarded-Proto", "https"),
    ("X-Forwarded-Host", "evil.test"),
    ("X-Forwarded-Port", "443"),
    ("X-Forwarded-Prefix", "/admin"),
    ("X_Forwarded_For", "6.6.6.6"),
    ("X_Real_IP", "6.6.6.6"),
    ("x-forwarded-proto", "https"),
]


@pytest.fixture(scope="module")
def env(module_factory):
    up = module_factory.upstream("echo", name="tp")
    port = free_port()
    text = gateway_config(port, {"up": up.url})
    # The harness writes one listener; give it trusted_proxies (YAML written by the harness's own dumper).
    text = text.replace(f'address: "127.0.0.1:{port}"', f'address: "127.0.0.1:{port}"\n    trusted_proxies: ["127.0.0.2/32"]', 1) \
        if f'address: "127.0.0.1:{port}"' in text else \
        text.replace(f"address: 127.0.0.1:{port}", f"address: 127.0.0.1:{port}\n    trusted_proxies: [\"127.0.0.2/32\"]", 1)
    assert "trusted_proxies" in text, text
    gw = module_factory.gateway(text)
    return gw, up


def send_from(source: str, port: int, fields: list[tuple[str, str]], path: str = "/tp") -> U.Resp:
    raw = f"GET {path} HTTP/1.1\r\nHost: app.test\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n"
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    c = U.Conn.__new__(U.Conn)
    c.sock = s
    c.reader = U.Reader(s)
    try:
        return c.request(raw.encode(), "GET")
    finally:
        s.close()


def seen(up, n_before: int) -> U.Req:
    assert up.wait_requests(n_before + 1, 5), "request did not reach the upstream"
    return up.last()


def test_untrusted_clients_forwarding_headers_never_reach_the_upstream(env):
    gw, up = env
    for source in ("127.0.0.1", "127.0.0.3"):
        n = up.snapshot()[2]
        r = send_from(source, gw.port, SPOOF)
        assert r.status == 200
        req = seen(up, n)
        assert req.get("x-forwarded-for") == [source], req.headers
        assert req.get("x-forwarded-proto") == ["http"], req.headers
        assert req.get("x-forwarded-host") == ["app.test"], req.headers
        names = {k.lower() for k, _ in req.headers}
        for gone in ("forwarded", "x-real-ip", "x-forwarded-port", "x-forwarded-prefix", "x_forwarded_for", "x_real_ip"):
            assert gone not in names, (gone, req.headers)
        for value in ("6.6.6.6", "7.7.7.7", "evil.test", "/admin", "https"):
            assert value.encode() not in req.raw_head, (value, req.raw_head)


def test_a_trusted_proxys_chain_is_kept_and_appended_to(env):
    gw, up = env
    n = up.snapshot()[2]
    fields = [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-For", "198.51.100.2"), ("X-Forwarded-Proto", "https"),
              ("X-Forwarded-Host", "api.example.com"), ("X-Real-IP", "203.0.113.7"),
              ("Forwarded", "for=203.0.113.7;proto=https"), ("X-Forwarded-Port", "443"), ("X-Forwarded-Prefix", "/v1")]
    assert send_from("127.0.0.2", gw.port, fields).status == 200
    req = seen(up, n)
    # The chain in order, then the proxy's own address; TLS terminated by the proxy survives as https.
    assert req.get("x-forwarded-for") == ["203.0.113.7, 198.51.100.2, 127.0.0.2"], req.headers
    assert req.get("x-forwarded-proto") == ["https"], req.headers
    assert req.get("x-forwarded-host") == ["api.example.com"], req.headers
    assert req.get("x-real-ip") == ["203.0.113.7"] and req.get("forwarded") == ["for=203.0.113.7;proto=https"]
    assert req.get("x-forwarded-port") == ["443"] and req.get("x-forwarded-prefix") == ["/v1"]
    # Still never a client-sent X-Attest-*, trusted peer or not.
    n = up.snapshot()[2]
    assert send_from("127.0.0.2", gw.port, [("X-Attest-Verdict", "verified")]).status == 200
    req = seen(up, n)
    assert req.get("x-attest-verdict") == [] and req.get("x-forwarded-for") == ["127.0.0.2"]
    assert req.get("x-forwarded-proto") == ["http"] and req.get("x-forwarded-host") == ["app.test"]


def test_trusted_proxies_config_errors(gateway_bin, tmp_path):
    import subprocess
    for bad in ("10.0.0.1/8", "10.0.0.0/33", "not-an-ip", "::1/129", "10.0.0.0/-1"):
        cfg = tmp_path / "g.yml"
        cfg.write_text(yaml_dump({"version": 1, "listeners": [{"address": "127.0.0.1:1", "trusted_proxies": [bad]}],
                                  "upstreams": {"u": {"url": "http://127.0.0.1:2"}},
                                  "routes": [{"match": {"path_prefix": "/"}, "upstream": "u"}]}) + "\n")
        p = subprocess.run([gateway_bin, "check-config", "--config", str(cfg)], capture_output=True, text=True, timeout=20)
        assert p.returncode == 1, (bad, p.stdout, p.stderr)
        assert "trusted_proxies" in (p.stdout + p.stderr), (bad, p.stdout, p.stderr)
