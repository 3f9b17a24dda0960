"""The verdict token (CONFIG.md Additions `verdict_token`, PROTOCOL.md Additions "Verdict token"): each verified
request reaches the upstream with an ES256 JWT in `X-Attest-Assertion` that verifies with the key set at admin
`/jwks` (and `jwks_path` on the public listener); a tampered one does not; requests that were not verified carry
none, and a client's own copy never reaches the upstream.

Real parts: the gateway binary, the dev issuer for App Check tokens, a Python echo upstream; the token is checked
with PyCA `cryptography` (an independent ES256 implementation) against the JWKS the gateway serves."""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.request

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config

pytestmark = pytest.mark.timeout_s(60)

H = "X-Firebase-AppCheck"


def b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def verify(token: str, jwks: dict) -> dict:
    """The claims of `token` if its ES256 signature verifies with the key `jwks` names by kid; raises otherwise."""
    header_b64, payload_b64, sig_b64 = token.split(".")
    header = json.loads(b64d(header_b64))
    assert header["alg"] == "ES256"
    key = next(k for k in jwks["keys"] if k["kid"] == header["kid"])
    assert key["kty"] == "EC" and key["crv"] == "P-256" and "d" not in key, "the JWKS must hold the public key only"
    pub = ec.EllipticCurvePublicNumbers(int.from_bytes(b64d(key["x"]), "big"), int.from_bytes(b64d(key["y"]), "big"),
                                        ec.SECP256R1()).public_key()
    sig = b64d(sig_b64)
    assert len(sig) == 64
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
    pub.verify(der, f"{header_b64}.{payload_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    return json.loads(b64d(payload_b64))


@pytest.fixture(scope="module")
def env(module_factory, tmp_path_factory):
    iss = module_factory.dev_issuer()
    up = module_factory.upstream(name="api")
    key = tmp_path_factory.mktemp("verdict") / "verdict.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key)],
                   check=True, capture_output=True)
    port, admin = free_port(), free_port()
    routes = [
        {"name": "protected", "match": {"path_prefix": "/api/"}, "upstream": "api", "verify": ["firebase"]},
        {"name": "watched", "match": {"path_prefix": "/watch/"}, "upstream": "api", "verify": ["firebase"],
         "mode": "monitor"},
        {"name": "open", "match": {"path_prefix": "/open/"}, "upstream": "api"},
    ]
    text = gateway_config(port, {"api": up.url}, routes, verifiers={"firebase": app_check_verifier(iss.jwks_url)})
    text += f"verdict_token:\n  key_file: {key}\n  ttl: 45s\n  jwks_path: /.attest/jwks\n"
    text = text.replace("listeners:", f"admin:\n  address: 127.0.0.1:{admin}\nlisteners:", 1)
    gw = module_factory.gateway(text)
    e = type("Env", (), dict(iss=iss, up=up, port=port, admin=admin, gw=gw, key=key))
    deadline = time.monotonic() + 10
    while get(e, "/api/ready", {H: iss.token()})[0] != 200:   # the key set is fetched in the background at start
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return e


def get(env, path: str, headers: dict | None = None, port: int | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port or env.port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def seen(payload: dict, name: str) -> list[str]:
    return [v for k, v in payload["headers"] if k.lower() == name.lower()]


def jwks(env) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{env.admin}/jwks", timeout=5) as r:
        return json.loads(r.read())


def test_a_verified_request_carries_a_token_that_verifies_with_the_served_jwks(env):
    status, payload = get(env, "/api/orders?id=7", {H: env.iss.token(), "X-Request-Id": "req-verdict-1"})
    assert status == 200
    tokens = seen(payload, "X-Attest-Assertion")
    assert len(tokens) == 1
    claims = verify(tokens[0], jwks(env))
    assert claims["iss"] == "attest-gateway" and claims["aud"] == "api" and claims["verdict"] == "verified"
    assert claims["route"] == "protected" and claims["verifier"] == "firebase"
    assert claims["app_id"] == seen(payload, "X-Attest-App-Id")[0]
    assert claims["request_id"] == "req-verdict-1" == seen(payload, "X-Request-Id")[0]
    assert claims["method"] == "GET" and claims["target"] == "/api/orders?id=7"
    assert claims["exp"] - claims["iat"] == 45 and abs(claims["iat"] - time.time()) < 30
    assert "key_id" in claims and "risk" in claims


def test_a_tampered_token_fails(env):
    _, payload = get(env, "/api/x", {H: env.iss.token()})
    token = seen(payload, "X-Attest-Assertion")[0]
    h, p, s = token.split(".")
    claims = json.loads(b64d(p))
    claims["target"] = "/api/admin"
    forged_p = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidSignature):
        verify(f"{h}.{forged_p}.{s}", jwks(env))
    flipped = s[:-2] + ("A" if s[-2] != "A" else "B") + s[-1]
    with pytest.raises(InvalidSignature):
        verify(f"{h}.{p}.{flipped}", jwks(env))


def test_the_jwks_is_the_configured_keys_public_half(env):
    key = serialization.load_pem_private_key(env.key.read_bytes(), password=None)
    numbers = key.public_key().public_numbers()
    (k,) = jwks(env)["keys"]
    assert int.from_bytes(b64d(k["x"]), "big") == numbers.x and int.from_bytes(b64d(k["y"]), "big") == numbers.y
    assert k["alg"] == "ES256" and k["use"] == "sig"


def test_jwks_path_serves_the_same_key_set_on_the_public_listener(env):
    status, body = get(env, "/.attest/jwks")
    assert status == 200 and body == jwks(env)


def test_requests_that_were_not_verified_carry_no_token_and_client_copies_are_dropped(env):
    forged = "eyJhbGciOiJub25lIn0.eyJ2ZXJkaWN0IjoidmVyaWZpZWQifQ."
    status, payload = get(env, "/open/x", {"X-Attest-Assertion": forged})
    assert status == 200 and seen(payload, "X-Attest-Assertion") == []
    status, payload = get(env, "/watch/x", {"X-Attest-Assertion": forged})   # monitor mode, no token
    assert status == 200 and seen(payload, "X-Attest-Assertion") == []
    assert seen(payload, "X-Attest-Verdict") == ["absent"]
    status, payload = get(env, "/api/x", {H: env.iss.token(), "X-Attest-Assertion": forged})
    tokens = seen(payload, "X-Attest-Assertion")
    assert status == 200 and len(tokens) == 1 and tokens[0] != forged
    verify(tokens[0], jwks(env))


def test_check_config_refuses_a_key_file_that_is_not_a_p256_key_and_accepts_a_missing_one(gateway_bin, tmp_path):
    from harness import run_cli
    base = gateway_config(free_port(), {"api": "http://127.0.0.1:9"})
    bad = tmp_path / "bad.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", str(bad)],
                   check=True, capture_output=True)
    f = tmp_path / "gateway.yml"
    f.write_text(base + f"verdict_token:\n  key_file: {bad}\n")
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode != 0 and b"verdict_token.key_file" in p.stdout + p.stderr
    f.write_text(base + f"verdict_token:\n  key_file: {tmp_path / 'absent.pem'}\n")
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 0, p.stdout + p.stderr
