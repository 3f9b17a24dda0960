"""App Attest end to end: the real gateway, a recording upstream, SQLite (or Redis) state, and a simulated device
(`attest-gateway-dev appattest`): a test CA → intermediate → leaf carrying the nonce, real P-256 keys, attestation
and assertion objects built as a device builds them. The gateway's `root_ca` points at the test CA.

Story: challenge → attest → 100 assertions with increasing counters → replay rejected → another body or path
rejected → expired or reused challenge rejected; concurrent replays of one assertion accepted exactly once."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import assert_json_error, b64url_decode, free_port, gateway_config

TEAM = "TEAMID1234"
BUNDLE = "com.example.app"
APP_ID = f"{TEAM}.{BUNDLE}"
REG = "/.attest/ios"
REG_C = "/.attest/chal"


# ----------------------------------------------------------------------------------------------------------------
# The simulated device (`attest-gateway-dev appattest`; `binary` is the dev tools' executable, GATEWAY_DEV_BIN)


class Device:
    def __init__(self, binary: str, ca_dir: Path, home: Path, team: str = TEAM, bundle: str = BUNDLE,
                 environment: str = "production", extra: tuple = ()):
        self.binary, self.ca_dir, self.home = binary, ca_dir, home
        self.team, self.bundle, self.environment, self.extra = team, bundle, environment, extra
        self.key_id: str | None = None

    def _run(self, *args: str, stdin: bytes | None = None) -> str:
        p = subprocess.run([self.binary, "appattest", *args], input=stdin, capture_output=True, timeout=60)
        assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p.stdout.decode()

    def attest_body(self, challenge: str, new_key: bool = False) -> dict:
        args = ["attest", "--dir", str(self.home), "--ca", str(self.ca_dir), "--team-id", self.team,
                "--bundle-id", self.bundle, "--challenge", challenge, "--environment", self.environment, *self.extra]
        if new_key:
            args.append("--new-key")
        body = json.loads(self._run(*args).strip())
        self.key_id = body["keyId"]
        return body

    def assertions(self, method: str, target: str, body: bytes = b"", count: int = 1,
                   timestamp: int | None = None, challenge: str | None = None) -> list[dict]:
        args = ["assert", "--dir", str(self.home), "--count", str(count)]
        if challenge is not None:
            args += ["--challenge", challenge]
        else:
            bf = self.home / "body.bin"
            bf.write_bytes(body)
            args += ["--method", method, "--target", target, "--body-file", str(bf)]
            if timestamp is not None:
                args += ["--timestamp", str(timestamp)]
        return [json.loads(line) for line in self._run(*args).splitlines() if line.strip()]


def post(port: int, target: str, body: bytes = b"", headers: dict | None = None, chunked: bool = False) -> U.Resp:
    lines = [f"POST {target} HTTP/1.1", "Host: gw.test", "Connection: close"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = b"".join(b"%x\r\n" % len(body[i:i + 1000]) + body[i:i + 1000] + b"\r\n"
                           for i in range(0, len(body), 1000)) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    r = U.one_shot(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + payload, timeout=20)
    assert r is not None, "the gateway closed the connection without a response"
    return r


def post_together(ports: list[int], target: str, body: bytes, headers: dict, n: int = 8) -> list:
    """`n` posts of one assertion at once (a barrier), spread over `ports`: each one's outcome()."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def worker(i: int) -> None:
        barrier.wait()
        results[i] = outcome(post(ports[i % len(ports)], target, body, headers))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def outcome(r: U.Resp) -> tuple:
    if r.status in (200, 201):
        return (r.status, None)
    doc = assert_json_error(r, r.status)
    return (r.status, doc.get("reason"))


def challenge(port: int, path: str = REG) -> str:
    r = post(port, path + "/challenge")
    assert r.status == 200, (r.status, r.body)
    doc = json.loads(r.body)
    assert set(doc) == {"challenge", "expires_in"}
    assert len(b64url_decode(doc["challenge"])) == 32
    return doc["challenge"]


def register(port: int, device: Device, new_key: bool = False, path: str = REG) -> dict:
    body = device.attest_body(challenge(port, path), new_key=new_key)
    r = post(port, path + "/attest", json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert r.status == 201, (r.status, r.body)
    return json.loads(r.body)


# ----------------------------------------------------------------------------------------------------------------
# Fixtures


def ca_dir(binary: str, tmp: Path) -> tuple[Path, Path]:
    d = tmp / "ca"
    p = subprocess.run([binary, "appattest", "ca", "--dir", str(d)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    root = Path(p.stdout.decode().strip().splitlines()[-1])
    assert root.is_file(), root
    return d, root


def aa_config(port: int, up_url: str, root: Path, state: dict, environment: str = "production", **extra) -> str:
    verifiers = {
        "aa": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE, "com.example.other"],
               "environment": environment, "root_ca": str(root), "binding": "request", "max_skew": "60s",
               "registration_path": REG, **extra},
        "aac": {"type": "app_attest", "team_id": TEAM, "bundle_ids": [BUNDLE], "environment": environment,
                "root_ca": str(root), "binding": "challenge", "challenge_ttl": "2s", "registration_path": REG_C},
    }
    routes = [
        {"name": "api", "match": {"path_prefix": "/api"}, "upstream": "up", "verify": ["aa"]},
        {"name": "chal", "match": {"path_prefix": "/chal"}, "upstream": "up", "verify": ["aac"]},
        {"name": "mon", "match": {"path_prefix": "/mon"}, "upstream": "up", "verify": ["aa"], "mode": "monitor"},
    ]
    return gateway_config(port, {"up": up_url}, routes=routes, verifiers=verifiers, state=state)


@pytest.fixture(scope="module")
def env(module_factory, dev_bin):
    tmp = module_factory.tmp
    ca, root = ca_dir(dev_bin, tmp)
    up = module_factory.upstream(name="aa-up")
    port = free_port()
    gw = module_factory.gateway(aa_config(port, up.url, root, {"backend": "sqlite", "path": str(tmp / "aa.db")}))
    device = Device(dev_bin, ca, tmp / "device1")
    reg = register(gw.port, device)
    return SimpleNamespace(gw=gw, up=up, ca=ca, root=root, device=device, reg=reg, tmp=tmp, bin=dev_bin)


def api_requests(up, prefix: str) -> list:
    with up.lock:
        return [q for q in up.requests if q.target.startswith(prefix)]


# ----------------------------------------------------------------------------------------------------------------
# Registration


def test_registration_answers_the_documented_shape(env):
    assert env.reg == {"keyId": env.device.key_id, "environment": "production", "appId": APP_ID}


def test_a_reused_challenge_is_rejected(env):
    c = challenge(env.gw.port)
    d = Device(env.bin, env.ca, env.tmp / "reuse")
    body = d.attest_body(c)
    assert outcome(post(env.gw.port, REG + "/attest", json.dumps(body).encode())) == (201, None)
    body2 = d.attest_body(c, new_key=True)
    assert outcome(post(env.gw.port, REG + "/attest", json.dumps(body2).encode())) == (401, "challenge_unknown")


def test_an_expired_or_unknown_challenge_is_rejected(env):
    c = challenge(env.gw.port, REG_C)     # challenge_ttl: 2s
    d = Device(env.bin, env.ca, env.tmp / "expired")
    body = d.attest_body(c)
    time.sleep(3.2)
    assert outcome(post(env.gw.port, REG_C + "/attest", json.dumps(body).encode())) == (401, "challenge_unknown")
    # A challenge the gateway never issued.
    body = d.attest_body("never-issued-challenge", new_key=True)
    assert outcome(post(env.gw.port, REG + "/attest", json.dumps(body).encode())) == (401, "challenge_unknown")


def test_bad_registrations_get_reason_codes(env):
    port = env.gw.port
    # Not the JSON shape.
    assert outcome(post(port, REG + "/attest", b"not json")) == (400, "malformed_token")
    assert outcome(post(port, REG + "/attest", b'{"keyId":"x","challenge":"y"}')) == (400, "malformed_token")
    c = challenge(port)
    d = Device(env.bin, env.ca, env.tmp / "bad")
    body = d.attest_body(c)
    # Another key id than the attested one.
    other = dict(body, keyId=env.device.key_id)
    assert outcome(post(port, REG + "/attest", json.dumps(other).encode())) == (401, "bad_assertion")
    # A wrong format.
    assert outcome(post(port, REG + "/attest", json.dumps(dict(body, format="android-key")).encode())) == \
        (400, "malformed_token")
    # The failures above did not burn the challenge: the genuine attestation still registers.
    assert outcome(post(port, REG + "/attest", json.dumps(body).encode())) == (201, None)
    # The operator log says why, with the request id of the access-log line.
    time.sleep(0.2)
    warns = [json.loads(l) for l in env.gw.stderr().splitlines() if "registration rejected" in l]
    assert any(w.get("detail") == "app attest: key_id_mismatch" and w.get("request_id") for w in warns), warns


def test_other_team_or_environment_is_not_allowed(env):
    for name, dev in (("team", Device(env.bin, env.ca, env.tmp / "team", team="OTHERTEAM1")),
                      ("env", Device(env.bin, env.ca, env.tmp / "devenv", environment="development"))):
        body = dev.attest_body(challenge(env.gw.port))
        assert outcome(post(env.gw.port, REG + "/attest", json.dumps(body).encode())) == (403, "app_not_allowed"), name


def test_registration_endpoints_only_take_post(env):
    r = U.one_shot(env.gw.port, f"GET {REG}/challenge HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n".encode())
    assert r.status == 405
    assert r.one("allow") == "POST"


def test_an_untrusted_root_is_rejected(env, tmp_path):
    other_ca, _ = ca_dir(env.bin, tmp_path)
    d = Device(env.bin, other_ca, tmp_path / "dev")
    body = d.attest_body(challenge(env.gw.port))
    assert outcome(post(env.gw.port, REG + "/attest", json.dumps(body).encode())) == (401, "bad_assertion")


# ----------------------------------------------------------------------------------------------------------------
# Assertions on routes


def test_one_hundred_assertions_with_increasing_counters_are_accepted(env):
    body = b'{"item":42,"note":"\xe2\x9c\x93"}'
    before = len(api_requests(env.up, "/api/items"))
    headers_list = env.device.assertions("POST", "/api/items?x=1", body, count=100)
    for h in headers_list:
        r = post(env.gw.port, "/api/items?x=1", body, h)
        assert outcome(r) == (200, None), r.body
    seen = api_requests(env.up, "/api/items")[before:]
    assert len(seen) == 100
    q = seen[-1]
    assert q.one("x-attest-verdict") == "verified"
    assert q.one("x-attest-verifier") == "aa"
    assert q.one("x-attest-app-id") == APP_ID
    assert q.one("x-attest-key-id") == env.device.key_id
    for name in ("x-app-attest-assertion", "x-app-attest-key-id", "x-app-attest-timestamp"):
        assert q.get(name) == [], name
    assert q.body_sha256 == hashlib.sha256(body).hexdigest()
    # The replay of an accepted assertion: the counter did not increase.
    assert outcome(post(env.gw.port, "/api/items?x=1", body, headers_list[-1])) == (401, "counter_not_increasing")
    assert outcome(post(env.gw.port, "/api/items?x=1", body, headers_list[0])) == (401, "counter_not_increasing")


def test_an_assertion_for_another_body_or_path_is_rejected(env):
    h = env.device.assertions("POST", "/api/items", b"amount=1")[0]
    assert outcome(post(env.gw.port, "/api/items", b"amount=9", h)) == (401, "bad_assertion")
    assert outcome(post(env.gw.port, "/api/other", b"amount=1", h)) == (401, "bad_assertion")
    assert outcome(post(env.gw.port, "/api/items?x=2", b"amount=1", h)) == (401, "bad_assertion")
    # Nothing above advanced the counter: the genuine request still passes.
    assert outcome(post(env.gw.port, "/api/items", b"amount=1", h)) == (200, None)


def test_a_chunked_body_is_verified_and_forwarded_intact(env):
    body = bytes(range(256)) * 40
    h = env.device.assertions("POST", "/api/upload", body)[0]
    before = len(api_requests(env.up, "/api/upload"))
    assert outcome(post(env.gw.port, "/api/upload", body, h, chunked=True)) == (200, None)
    q = api_requests(env.up, "/api/upload")[before]
    assert q.body_sha256 == hashlib.sha256(body).hexdigest()


def test_header_problems_have_reason_codes(env):
    port = env.gw.port
    h = env.device.assertions("POST", "/api/h", b"")[0]
    assert outcome(post(port, "/api/h")) == (401, "missing_token")
    assert outcome(post(port, "/api/h", b"", {"X-App-Attest-Assertion": h["X-App-Attest-Assertion"]})) == \
        (401, "malformed_token")
    assert outcome(post(port, "/api/h", b"", dict(h, **{"X-App-Attest-Key-Id": "not-a-key-id"}))) == \
        (401, "malformed_token")
    assert outcome(post(port, "/api/h", b"", dict(h, **{"X-App-Attest-Assertion": "%%%"}))) == (401, "malformed_token")
    no_ts = {k: v for k, v in h.items() if k != "X-App-Attest-Timestamp"}
    assert outcome(post(port, "/api/h", b"", no_ts)) == (401, "malformed_token")
    # A key id that was never registered.
    stranger = Device(env.bin, env.ca, env.tmp / "stranger")
    stranger.attest_body("x")
    sh = stranger.assertions("POST", "/api/h", b"")[0]
    assert outcome(post(port, "/api/h", b"", sh)) == (401, "unknown_key_id")
    # A timestamp outside max_skew (60 s); signed correctly, so only the time is wrong.
    old = env.device.assertions("POST", "/api/h", b"", timestamp=int(time.time()) - 600)[0]
    assert outcome(post(port, "/api/h", b"", old)) == (401, "stale_timestamp")
    r = post(port, "/api/h")
    assert r.one("www-authenticate") == 'AppAttest realm="attest-gateway", error="missing_token"'


def test_monitor_mode_forwards_with_the_verdict(env):
    before = len(api_requests(env.up, "/mon"))
    assert outcome(post(env.gw.port, "/mon/x", b"", {"X-App-Attest-Key-Id": env.device.key_id,
                                                     "X-App-Attest-Assertion": "AAAA",
                                                     "X-App-Attest-Timestamp": str(int(time.time()))})) == (200, None)
    q = api_requests(env.up, "/mon")[before]
    assert q.one("x-attest-verdict") == "failed"
    assert q.one("x-attest-reason") == "bad_assertion"


def test_concurrent_replays_of_one_assertion_are_accepted_exactly_once(env):
    body = b"pay=1"
    h = env.device.assertions("POST", "/api/pay", body)[0]
    n = 24
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = outcome(post(env.gw.port, "/api/pay", body, h))
        except Exception as e:  # noqa: BLE001
            results[i] = f"error: {e}"

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results.count((200, None)) == 1, results
    assert results.count((401, "counter_not_increasing")) == n - 1, results


def test_a_reinstalled_app_registers_a_new_key_and_the_old_key_keeps_working(env):
    d = Device(env.bin, env.ca, env.tmp / "reinstall")
    first = register(env.gw.port, d)["keyId"]
    old_h = d.assertions("POST", "/api/r", b"")[0]
    second = register(env.gw.port, d, new_key=True)["keyId"]
    assert first != second
    new_h = d.assertions("POST", "/api/r", b"")[0]
    assert new_h["X-App-Attest-Key-Id"] == second
    assert outcome(post(env.gw.port, "/api/r", b"", new_h)) == (200, None)
    assert outcome(post(env.gw.port, "/api/r", b"", old_h)) == (200, None)


def test_challenge_binding_accepts_each_challenge_once(env):
    d = Device(env.bin, env.ca, env.tmp / "chal")
    register(env.gw.port, d, path=REG_C)
    c = challenge(env.gw.port, REG_C)
    first, second = d.assertions("POST", "/chal", challenge=c, count=2)
    assert first["X-App-Attest-Challenge"] == c
    assert outcome(post(env.gw.port, "/chal/x", b"anything", first)) == (200, None)
    # Same challenge, higher counter: the challenge was consumed.
    assert outcome(post(env.gw.port, "/chal/x", b"anything", second)) == (401, "challenge_unknown")
    # A challenge never issued.
    third = d.assertions("POST", "/chal", challenge="made-up")[0]
    assert outcome(post(env.gw.port, "/chal/x", b"", third)) == (401, "challenge_unknown")


def test_keys_and_counters_survive_a_restart(factory, env, tmp_path):
    """SQLite state: a gateway restarted on the same file still knows the key and its counter."""
    up = factory.upstream(name="restart-up")
    db = {"backend": "sqlite", "path": str(tmp_path / "restart.db")}
    port = free_port()
    gw = factory.gateway(aa_config(port, up.url, env.root, db))
    d = Device(env.bin, env.ca, tmp_path / "dev")
    register(port, d)
    h1, h2 = d.assertions("POST", "/api/x", b"", count=2)
    assert outcome(post(port, "/api/x", b"", h2)) == (200, None)
    gw.stop()
    port2 = free_port()
    factory.gateway(aa_config(port2, up.url, env.root, db))
    assert outcome(post(port2, "/api/x", b"", h1)) == (401, "counter_not_increasing")
    h3 = d.assertions("POST", "/api/x", b"")[0]
    assert outcome(post(port2, "/api/x", b"", h3)) == (200, None)


def test_two_gateways_on_one_redis_accept_an_assertion_once(factory, env, redis_server, tmp_path):
    up = factory.upstream(name="redis-up")
    state = {"backend": "redis", "url": redis_server.url, "key_prefix": f"aa{time.time_ns()}:"}
    ports = [free_port(), free_port()]
    for p in ports:
        factory.gateway(aa_config(p, up.url, env.root, state))
    d = Device(env.bin, env.ca, tmp_path / "dev")
    register(ports[0], d)
    for k in range(5):
        results = post_together(ports, "/api/r", b"x", d.assertions("POST", "/api/r", b"x")[0])
        assert results.count((200, None)) == 1, (k, results)
        assert results.count((401, "counter_not_increasing")) == 7, (k, results)


def test_tokens_never_reach_the_logs(env):
    out = env.gw.stdout() + env.gw.stderr()
    h = env.device.assertions("POST", "/api/z", b"")[0]
    post(env.gw.port, "/api/z", b"", h)
    time.sleep(0.3)
    out = env.gw.stdout() + env.gw.stderr()
    assert h["X-App-Attest-Assertion"] not in out


def test_with_fraud_metric_the_attest_receipt_is_verified_at_registration(factory, env, tmp_path):
    """fraud_metric on: the attestation's receipt must chain to receipt_root_ca and name the app and key."""
    p8 = tmp_path / "AuthKey.p8"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(p8)],
                   check=True, capture_output=True)
    fraud = {"key_id": "FRAUDKEY01", "private_key": str(p8), "base_url": "https://127.0.0.1:9"}
    up = factory.upstream(name="receipt-up")
    for root, expected in ((env.ca / "receipt-root.pem", 201), ("builtin", 401)):
        port = free_port()
        factory.gateway(aa_config(port, up.url, env.root, {"backend": "memory"}, fraud_metric=fraud,
                                  receipt_root_ca=str(root)))
        d = Device(env.bin, env.ca, tmp_path / f"dev-{expected}")
        body = d.attest_body(challenge(port))
        r = post(port, REG + "/attest", json.dumps(body).encode())
        assert outcome(r) == ((201, None) if expected == 201 else (401, "bad_receipt")), (root, r.body)


def test_registration_and_assertions_over_http2(factory, dev_bin, tmp_path):
    """The registration flow and request-bound assertions over h2c (python-h2, several streams on one connection):
    the same answers as over HTTP/1.1 — the body held and hashed, the counter compare-and-set off the loop — with the
    request body sent in DATA frames with and without content-length."""
    from test_http2 import H2

    ca, root = ca_dir(dev_bin, tmp_path)
    up = factory.upstream(name="aa-h2-up")
    port = free_port()
    cfg = aa_config(port, up.url, root, {"backend": "sqlite", "path": str(tmp_path / "aa-h2.db")})
    listener = f'  - address: "127.0.0.1:{port}"\n'
    assert listener in cfg
    gw = factory.gateway(cfg.replace(listener, listener + "    http2: true\n", 1))
    device = Device(dev_bin, ca, tmp_path / "device-h2")
    c = H2(gw.port)
    try:
        st = c.response(c.request("POST", REG + "/challenge", [("content-length", "0")], None))
        assert st.status == 200, st.describe()
        body = json.dumps(device.attest_body(st.json()["challenge"])).encode()
        st = c.response(c.request("POST", REG + "/attest", [("content-type", "application/json")], body, frame=700))
        assert st.status == 201, st.describe()
        assert st.json() == {"keyId": device.key_id, "environment": "production", "appId": APP_ID}

        payload = b'{"item":7}' * 300
        assertions = device.assertions("POST", "/api/h2?x=1", payload, count=3)
        answers = []
        for i, h in enumerate(assertions):
            extra = [(k.lower(), v) for k, v in h.items()]
            if i % 2 == 0:
                extra.append(("content-length", str(len(payload))))
            answers.append(c.response(c.request("POST", "/api/h2?x=1", extra, payload, frame=1000)))
        assert [a.status for a in answers] == [200, 200, 200], [a.describe() for a in answers]
        replay = c.response(c.request("POST", "/api/h2?x=1", [(k.lower(), v) for k, v in assertions[0].items()],
                                      payload))
        assert replay.status == 401 and replay.json()["reason"] == "counter_not_increasing", replay.describe()
        tampered = c.response(c.request("POST", "/api/h2?x=1", [(k.lower(), v) for k, v in assertions[-1].items()],
                                        payload + b" "))
        assert tampered.status == 401 and tampered.json()["reason"] == "bad_assertion", tampered.describe()
    finally:
        c.close()
    seen = api_requests(up, "/api/h2")
    assert len(seen) == 3
    assert all(q.body_sha256 == hashlib.sha256(payload).hexdigest() for q in seen)
    assert {q.one("x-attest-key-id") for q in seen} == {device.key_id}
