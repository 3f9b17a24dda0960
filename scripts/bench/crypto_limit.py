"""The cryptography a Play Integrity classic token costs, measured by `openssl speed` on the proxy's core (core 0) in
the same run: one ECDSA P-256 verify, AES-256-GCM over the token's ciphertext size, one AES-256 key unwrap (32-byte
key). Their sum is the limit the row's added CPU is compared with (docs/performance.md)."""

from __future__ import annotations

import re
import subprocess

import peers as P


def speed(args: list[str]) -> str:
    with P.pinned(0):
        p = subprocess.run(["openssl", "speed", "-seconds", "2", "-elapsed", *args], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    return p.stdout


def measure(ciphertext_bytes: int) -> dict[str, float] | None:
    """µs per operation: `p256_verify`, `gcm` (AES-256-GCM over `ciphertext_bytes`), `unwrap`; None when openssl's
    output cannot be read (the report then says so)."""
    ec = re.search(r"256 bits ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+[\d.]+\s+([\d.]+)", speed(["ecdsap256"]))
    gcm = re.search(r"^AES-256-GCM\s+([\d.]+)k", speed(["-evp", "aes-256-gcm", "-bytes", str(ciphertext_bytes)]), re.M)
    wrap = re.search(r"^AES-256-WRAP\s+([\d.]+)k", speed(["-evp", "id-aes256-wrap", "-bytes", "32"]), re.M)
    if not (ec and gcm and wrap):
        return None
    per_op = lambda size, thousands: size / (float(thousands) * 1000) * 1e6   # bytes / (bytes/s) in µs
    return {"p256_verify": 1e6 / float(ec.group(1)), "gcm": per_op(ciphertext_bytes, gcm.group(1)),
            "unwrap": per_op(32, wrap.group(1)), "bytes": ciphertext_bytes}
