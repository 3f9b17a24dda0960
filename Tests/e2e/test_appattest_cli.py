"""`attest-gateway appattest verify-attestation / verify-assertion` on every real device vector in
Tests/AttestationTests/AppAttestVectors (see its README): the real binary, files in raw CBOR and base64, standard
input, the repository's root PEM and the built-in root; then rejections (exit 1, JSON reason) and usage errors
(exit 2, nothing on standard output)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import textwrap

import pytest

from harness import REPO, run_cli

try:  # optional: an independent PEM encoder; without it the SPKI is built by hand below
    from cryptography.hazmat.primitives import serialization as _serialization
    from cryptography.hazmat.primitives.asymmetric import ec as _ec
except ImportError:  # pragma: no cover
    _ec = None

VECTORS_DIR = REPO / "Tests" / "AttestationTests" / "AppAttestVectors"
ROOT_PEM = VECTORS_DIR / "apple-app-attest-root-ca.pem"
VECTORS = [json.loads(p.read_text()) for p in sorted(VECTORS_DIR.glob("*.json"))]
ATTESTATIONS = [v for v in VECTORS if v.get("attestation")]
ASSERTIONS = [(v, i) for v in VECTORS for i in range(len(v.get("assertions") or []))]

# SubjectPublicKeyInfo DER prefix for id-ecPublicKey / prime256v1 and a 65-byte uncompressed point.
SPKI_P256_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")


def out(p) -> str:
    return (p.stdout + p.stderr).decode("utf-8", "replace")


def run(binary: str, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    if stdin is None:
        return run_cli(binary, "appattest", *args)
    return subprocess.run([binary, "appattest", *args], input=stdin, capture_output=True, timeout=20)


def verdict(p, code: int) -> dict:
    """The one JSON object on standard output of a run that exited with `code`."""
    assert p.returncode == code, f"exit {p.returncode}, expected {code}: {out(p)}"
    lines = p.stdout.decode().splitlines()
    assert len(lines) == 1, f"expected one JSON line on stdout: {out(p)}"
    doc = json.loads(lines[0])
    assert isinstance(doc, dict) and doc["verified"] is (code == 0), doc
    if code != 0:
        assert isinstance(doc.get("reason"), str) and isinstance(doc.get("detail"), str), doc
    return doc


def b64(v: str) -> bytes:
    return base64.b64decode(v)


def team_bundle(v: dict) -> list[str]:
    team, bundle = v["appId"].split(".", 1)
    assert (team, bundle) == (v["teamId"], v["bundleId"])
    return ["--team-id", team, "--bundle-id", bundle]


def public_key_pem(point: bytes) -> bytes:
    if _ec is not None:
        key = _ec.EllipticCurvePublicKey.from_encoded_point(_ec.SECP256R1(), point)
        return key.public_bytes(_serialization.Encoding.PEM, _serialization.PublicFormat.SubjectPublicKeyInfo)
    body = "\n".join(textwrap.wrap(base64.b64encode(SPKI_P256_PREFIX + point).decode(), 64))
    return f"-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n".encode()


def write_object(path, cbor_b64: str, form: str) -> str:
    """Writes a CBOR object as raw bytes, one base64 line, or base64 wrapped at 76 columns (as `base64` does)."""
    raw = b64(cbor_b64)
    if form == "raw":
        path.write_bytes(raw)
    elif form == "base64":
        path.write_text(cbor_b64)
    else:
        path.write_text("\n".join(textwrap.wrap(base64.b64encode(raw).decode(), 76)) + "\n")
    return str(path)


def attestation_args(v: dict, path: str) -> list[str]:
    """verify-attestation arguments exactly as the vector specifies them."""
    if v["clientDataHashMode"] == "sha256":
        challenge = ["--challenge", v["clientDataUtf8"]]
        assert hashlib.sha256(v["clientDataUtf8"].encode()).digest() == b64(v["clientDataHash"])
    else:  # Apple's sample: the raw challenge bytes are the clientDataHash
        challenge = ["--client-data-hash", b64(v["clientDataHash"]).hex()]
    return ["verify-attestation", "--attestation", path, "--key-id", v["keyId"], *team_bundle(v), *challenge,
            "--environment", v["environment"], "--at", v["verifyAt"]]


# ----------------------------------------------------------------------------------------------------------------
# Every attestation verifies.


def test_there_are_fourteen_attestations_and_twelve_assertions():
    assert len(ATTESTATIONS) == 14 and len(ASSERTIONS) == 12


@pytest.mark.parametrize("n", range(len(ATTESTATIONS)), ids=[v["name"] for v in ATTESTATIONS])
def test_attestation_vector_verifies(gateway_bin, tmp_path, n):
    v = ATTESTATIONS[n]
    form = ["raw", "base64", "wrapped"][n % 3]
    stdin = None
    if n == 0:  # once from standard input
        path, stdin = "-", b64(v["attestation"])
    else:
        path = write_object(tmp_path / "attestation", v["attestation"], form)
    args = attestation_args(v, path)
    if n == 1:  # once with the repository's PEM; every other run uses the built-in root
        args += ["--root-ca", str(ROOT_PEM)]
    doc = verdict(run(gateway_bin, *args, stdin=stdin), 0)
    assert doc["key_id"] == v["keyId"]
    assert doc["environment"] == v["environment"]
    assert doc["app_id"] == v["appId"]
    assert doc["counter"] == 0
    assert doc["public_key"] == b64(v["expectedPublicKey"]).hex()
    assert doc["certificate"] == {"not_before": v["leafNotBefore"], "not_after": v["leafNotAfter"]}
    assert "reason" not in doc and "detail" not in doc
    if v["name"] == "apple-doc-guide-2026":  # iOS 27: authData extensions and the key access-control extension
        assert doc["extensions"] == {"validation_category": "01000000", "bundle_version": "1"}
        assert doc["key_access_control"].startswith("30")
    else:
        assert doc["extensions"] == {} and "key_access_control" not in doc


# ----------------------------------------------------------------------------------------------------------------
# Every assertion verifies; replays and a wrong team are rejected.


def key_args(tmp_path, v: dict, k: int, a: dict) -> list[str]:
    """--attestation (alternately raw and base64) when the vector has one, else --public-key from the point."""
    if v.get("attestation") and k % 2 == 0:
        return ["--attestation", write_object(tmp_path / "attestation", v["attestation"], ["raw", "base64"][k // 2 % 2])]
    pem = tmp_path / "key.pem"
    pem.write_bytes(public_key_pem(b64(a["publicKey"])))
    return ["--public-key", str(pem)]


@pytest.mark.parametrize("k", range(len(ASSERTIONS)), ids=[f"{v['name']}-{i}" for v, i in ASSERTIONS])
def test_assertion_vector_verifies_once(gateway_bin, tmp_path, k):
    v, i = ASSERTIONS[k]
    a = v["assertions"][i]
    assertion = write_object(tmp_path / "assertion", a["assertion"], ["base64", "raw"][k % 2])
    client_data = tmp_path / "client-data"
    client_data.write_bytes(b64(a["clientData"]))
    base = ["verify-assertion", "--assertion", assertion, "--client-data", str(client_data), *key_args(tmp_path, v, k, a)]

    doc = verdict(run(gateway_bin, *base, *team_bundle(v)), 0)
    point = b64(a["publicKey"])
    assert doc["counter"] == a["expectedCounter"]
    assert doc["previous_counter"] == 0 == a["previousCounter"]
    assert doc["public_key"] == point.hex()
    assert doc["key_id"] == base64.b64encode(hashlib.sha256(point).digest()).decode()
    if v.get("keyId"):
        assert doc["key_id"] == v["keyId"]

    replay = verdict(run(gateway_bin, *base, *team_bundle(v), "--previous-counter", str(a["expectedCounter"])), 1)
    assert replay["reason"] == "counter_not_increasing"
    assert replay["counter"] == a["expectedCounter"]

    wrong_team = verdict(run(gateway_bin, *base, "--team-id", "ZZZZZZZZZZ", "--bundle-id", v["bundleId"]), 1)
    assert (wrong_team["reason"], wrong_team["detail"]) == ("bad_assertion", "app_id_mismatch")


def test_assertion_from_standard_input(gateway_bin, tmp_path):
    v, i = ASSERTIONS[0]
    a = v["assertions"][i]
    client_data = tmp_path / "client-data"
    client_data.write_bytes(b64(a["clientData"]))
    p = run(gateway_bin, "verify-assertion", "--assertion", "-", "--client-data", str(client_data),
            *key_args(tmp_path, v, 1, a), *team_bundle(v), stdin=a["assertion"].encode())
    assert verdict(p, 0)["counter"] == a["expectedCounter"]


def test_tampered_assertion_is_bad_signature(gateway_bin, tmp_path):
    v, i = ASSERTIONS[0]
    a = v["assertions"][i]
    client_data = tmp_path / "client-data"
    client_data.write_bytes(b64(a["clientData"]) + b"x")
    p = run(gateway_bin, "verify-assertion", "--assertion", write_object(tmp_path / "assertion", a["assertion"], "raw"),
            "--client-data", str(client_data), *key_args(tmp_path, v, 1, a), *team_bundle(v))
    doc = verdict(p, 1)
    assert (doc["reason"], doc["detail"]) == ("bad_assertion", "bad_signature")
    assert doc["counter"] == a["expectedCounter"]  # decoded although rejected


# ----------------------------------------------------------------------------------------------------------------
# Rejected attestations: exit 1, the gateway's reason, the failed check, and the fields still decoded.

APPLE = next(v for v in ATTESTATIONS if v["name"] == "apple-doc-guide-2026")
DEV = next(v for v in ATTESTATIONS if v["environment"] == "development")


def replace_arg(args: list[str], name: str, value: str) -> list[str]:
    i = args.index(name)
    return args[:i + 1] + [value] + args[i + 2:]


def other_root(args: list[str], tmp_path) -> list[str]:
    """"Another root": the vector's own intermediate (partial chains must not pass) as the --root-ca PEM."""
    pem = tmp_path / "intermediate.pem"
    pem.write_text(intermediate_pem(b64(DEV["attestation"])))
    return args + ["--root-ca", str(pem)]


REJECTIONS = {
    "team": (lambda args, tmp: replace_arg(args, "--team-id", "ZZZZZZZZZZ"), "app_id_mismatch"),
    "bundle": (lambda args, tmp: replace_arg(args, "--bundle-id", "com.example.other"), "app_id_mismatch"),
    "challenge": (lambda args, tmp: replace_arg(args, "--challenge", "other challenge"), "nonce_mismatch"),
    "environment": (lambda args, tmp: replace_arg(args, "--environment", "production"), "wrong_environment"),
    "key-id": (lambda args, tmp: replace_arg(args, "--key-id", APPLE["keyId"]), "key_id_mismatch"),
    # One minute after the leaf expired, written with a fraction and a negative offset.
    "after-leaf-expiry": (lambda args, tmp: replace_arg(args, "--at", DEV["leafNotAfter"][:-1] + ".5-00:01"), "untrusted_chain"),
    "other-root": (other_root, "untrusted_chain"),
}


@pytest.mark.parametrize("name", REJECTIONS)
def test_rejected_attestation(gateway_bin, tmp_path, name):
    change, detail = REJECTIONS[name]
    args = change(attestation_args(DEV, write_object(tmp_path / "attestation", DEV["attestation"], "raw")), tmp_path)
    doc = verdict(run(gateway_bin, *args), 1)
    assert (doc["reason"], doc["detail"]) == ("bad_assertion", detail)
    assert doc["key_id"] == DEV["keyId"] and doc["environment"] == "development"  # decoded although rejected


def intermediate_pem(cbor: bytes) -> str:
    """The second x5c certificate (CBOR byte string, 2-byte length) of an attestation, as PEM."""
    at = cbor.index(b"x5c") + 3
    assert cbor[at] == 0x82  # array of 2
    at += 1
    for n in range(2):
        assert cbor[at] == 0x59
        length = int.from_bytes(cbor[at + 1:at + 3], "big")
        der = cbor[at + 3:at + 3 + length]
        at += 3 + length
    body = "\n".join(textwrap.wrap(base64.b64encode(der).decode(), 64))
    return f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"


def test_garbage_attestation_has_only_a_reason(gateway_bin, tmp_path):
    f = tmp_path / "garbage"
    f.write_bytes(b"\xa0")
    args = replace_arg(attestation_args(DEV, "x"), "--attestation", str(f))
    doc = verdict(run(gateway_bin, *args), 1)
    assert (doc["reason"], doc["detail"]) == ("bad_assertion", "malformed")
    assert "key_id" not in doc and "public_key" not in doc


# ----------------------------------------------------------------------------------------------------------------
# Usage errors: exit 2, a message on standard error, nothing on standard output.


def usage_cases(tmp_path):
    attestation = write_object(tmp_path / "attestation", DEV["attestation"], "raw")
    good = attestation_args(DEV, attestation)
    a = DEV["assertions"][0]
    assertion = write_object(tmp_path / "assertion", a["assertion"], "raw")
    client_data = tmp_path / "client-data"
    client_data.write_bytes(b64(a["clientData"]))
    pem = tmp_path / "key.pem"
    pem.write_bytes(public_key_pem(b64(a["publicKey"])))
    assertion_base = ["verify-assertion", "--assertion", assertion, "--client-data", str(client_data), *team_bundle(DEV)]
    without = lambda args, name: args[:args.index(name)] + args[args.index(name) + 2:]
    return {
        "no subcommand": [],
        "unknown subcommand": ["verify-receipt"],
        "unknown option": good + ["--frobnicate", "1"],
        "missing value": good + ["--root-ca"],
        "missing key id": without(good, "--key-id"),
        "missing team": without(good, "--team-id"),
        "missing attestation": without(good, "--attestation"),
        "challenge and hash": good + ["--client-data-hash", "00"],
        "neither challenge nor hash": without(good, "--challenge"),
        "hash not hex": without(good, "--challenge") + ["--client-data-hash", "xyz"],
        "bad environment": replace_arg(good, "--environment", "staging"),
        "bad time": replace_arg(good, "--at", "yesterday"),
        "impossible date": replace_arg(good, "--at", "2021-02-30T00:00:00Z"),
        "missing attestation file": replace_arg(good, "--attestation", str(tmp_path / "absent")),
        "root not a PEM": good + ["--root-ca", attestation],
        "key and attestation": assertion_base + ["--public-key", str(pem), "--attestation", attestation],
        "neither key nor attestation": assertion_base,
        "key not a PEM": assertion_base + ["--public-key", assertion],
        "negative counter": assertion_base + ["--public-key", str(pem), "--previous-counter", "-1"],
        "counter too large": assertion_base + ["--public-key", str(pem), "--previous-counter", "4294967296"],
        "two stdin": replace_arg(assertion_base, "--assertion", "-") + ["--attestation", "-"],
        "attestation and root on stdin": replace_arg(good, "--attestation", "-") + ["--root-ca", "-"],
    }


def test_usage_errors_exit_2(gateway_bin, tmp_path):
    for name, args in usage_cases(tmp_path).items():
        p = run(gateway_bin, *args)
        assert p.returncode == 2, f"{name}: exit {p.returncode}: {out(p)}"
        assert p.stdout == b"", f"{name}: usage errors print no verdict: {out(p)}"
        assert b"Usage" in p.stderr, f"{name}: {out(p)}"


def test_help(gateway_bin):
    for args in (["--help"], ["verify-attestation", "--help"], ["verify-assertion", "-h"]):
        p = run(gateway_bin, *args)
        assert p.returncode == 0, out(p)
        assert "verify-attestation" in out(p) and "verify-assertion" in out(p)
    p = run_cli(gateway_bin, "--help")
    assert "appattest verify-attestation" in out(p)
