"""The RS256 rows' tokens: a fresh RSA-2048 key (private.pem, 0600), its JWKS (jwks.json, kid "bench") for the
gateway and public.pem for HAProxy, and Firebase-App-Check-shaped tokens, one per line: distinct.jwt (the measured
runs' list, each its own jti) and lu-warmup.jwt (the limited-use rows' warm-ups, never in distinct.jwt), signed on
every CPU."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from harness import b64url, jwt_encode_segment
from settings import PROJECT_NUMBER

HEAD = jwt_encode_segment({"alg": "RS256", "typ": "JWT", "kid": "bench"})
key = None   # each signing process's private key


@dataclass(frozen=True)
class Tokens:
    dir: Path
    repeated: str            # one valid token without a jti
    bad: str                 # the repeated token with one signature character changed
    first_distinct: str
    lu_fresh: str | None     # the last warm-up token: for the limited-use sanity check


def load_key(pem: bytes) -> None:
    global key
    key = serialization.load_pem_private_key(pem, password=None)


def sign(now: int, jti: str | None = None) -> str:
    claims = {"iss": "https://firebaseappcheck.googleapis.com/" + PROJECT_NUMBER,
              "sub": "1:" + PROJECT_NUMBER + ":ios:0123456789abcdef",
              "aud": ["projects/" + PROJECT_NUMBER, "projects/demo-project"],
              "provider": "debug", "iat": now, "exp": now + 3600, **({"jti": jti} if jti else {})}
    signing_input = HEAD + "." + jwt_encode_segment(claims)
    return signing_input + "." + b64url(key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))


def sign_range(job: tuple[int, int, int]) -> list[str]:
    now, start, end = job
    return [sign(now, "bench-%010d-%s" % (i, os.urandom(6).hex())) for i in range(start, end)]


def mint(out: Path, count: int, warm: int) -> Tokens:
    print(f"bench: minting an RSA-2048 key and {count + warm} distinct RS256 tokens ({os.cpu_count()} processes)...",
          flush=True)
    t0, now = time.time(), int(time.time())
    out.mkdir()
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    with os.fdopen(os.open(out / "private.pem", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(pem)
    public = private.public_key()
    (out / "public.pem").write_bytes(public.public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
    numbers = public.public_numbers()
    n, e = (v.to_bytes((v.bit_length() + 7) // 8, "big") for v in (numbers.n, numbers.e))
    jwk = {"kty": "RSA", "kid": "bench", "use": "sig", "alg": "RS256", "n": b64url(n), "e": b64url(e)}
    (out / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    load_key(pem)
    repeated, ends = sign(now), {}
    # Change a character in the middle of the signature: the last one of a 256-byte signature only carries
    # 2 bits, and a lenient base64url decoder ignores the other 4 (HAProxy 2.6 does), so it would not do.
    k = len(repeated) - 100
    bad = repeated[:k] + ("A" if repeated[k] != "A" else "B") + repeated[k + 1:]
    with mp.Pool(os.cpu_count() or 1, initializer=load_key, initargs=(pem,)) as pool:
        for name, start, end in (("distinct", 0, count), ("lu-warmup", count, count + warm)):
            with open(out / f"{name}.jwt", "w") as f:
                for block in pool.imap(sign_range, [(now, i, min(i + 2000, end)) for i in range(start, end, 2000)]):
                    f.write("\n".join(block) + "\n")
                    ends[name] = (ends.get(name, block)[0], block[-1])   # its first and last token
    os.sync()   # written back now, not during the first measured runs
    print("mint_tokens: key + %d distinct tokens (+1 repeated, 1 bad) in %.1f s, %d bytes per token"
          % (count + warm, time.time() - t0, len(repeated)))
    return Tokens(out, repeated, bad, ends["distinct"][0], ends["lu-warmup"][1] if warm else None)
