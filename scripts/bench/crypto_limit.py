"""The cryptography each verifying row costs at the least, measured by `openssl speed` on the proxy's core (core 0) in
the same run: one RSA-2048 verify (an App Check token), one ECDSA P-256 verify (an App Attest assertion), SHA-256 over
an RS256 token's bytes (what a cached token costs at the least), and for a Play Integrity classic token also
AES-256-GCM over its ciphertext size and one AES-256 key unwrap (32-byte key). The report compares each row's added
CPU with them (docs/performance.md, "Targets of the performance issue")."""

from __future__ import annotations

import re
import subprocess

import peers as P


def speed(args: list[str]) -> str:
    with P.pinned(0):
        p = subprocess.run(["openssl", "speed", "-seconds", "2", "-elapsed", *args], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    return p.stdout


def per_op(size: int, thousands: str) -> float:
    return size / (float(thousands) * 1000) * 1e6   # bytes / (bytes/s), in µs


def measure(token_bytes: int | None, ciphertext_bytes: int | None) -> dict[str, float]:
    """µs per operation, each key only when openssl's output could be read (the report says which are missing):
    `rsa_verify` (RSA-2048), `p256_verify`, `sha256` (over `token_bytes`), and with `ciphertext_bytes` `gcm`
    (AES-256-GCM over that many bytes) and `unwrap`."""
    out: dict[str, float] = {}
    if m := re.search(r"^rsa 2048 bits\s+\S+s\s+\S+s\s+[\d.]+\s+([\d.]+)", speed(["rsa2048"]), re.M):
        out["rsa_verify"] = 1e6 / float(m.group(1))
    if m := re.search(r"256 bits ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+[\d.]+\s+([\d.]+)", speed(["ecdsap256"])):
        out["p256_verify"] = 1e6 / float(m.group(1))
    if token_bytes and (m := re.search(r"^sha256\s+([\d.]+)k", speed(["-bytes", str(token_bytes), "sha256"]), re.M)):
        out.update(sha256=per_op(token_bytes, m.group(1)), token_bytes=token_bytes)
    if ciphertext_bytes:
        gcm = re.search(r"^AES-256-GCM\s+([\d.]+)k", speed(["-evp", "aes-256-gcm", "-bytes", str(ciphertext_bytes)]), re.M)
        wrap = re.search(r"^AES-256-WRAP\s+([\d.]+)k", speed(["-evp", "id-aes256-wrap", "-bytes", "32"]), re.M)
        if gcm and wrap:
            out.update(gcm=per_op(ciphertext_bytes, gcm.group(1)), unwrap=per_op(32, wrap.group(1)), bytes=ciphertext_bytes)
    return out
