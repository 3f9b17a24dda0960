#!/usr/bin/env python3
"""Bench helper: an RSA-2048 key, its JWKS (kid "bench") and public PEM, and Firebase-App-Check-shaped RS256 tokens.

    mint_tokens.py OUT_DIR DISTINCT_COUNT [WARMUP_COUNT]

writes into OUT_DIR:
  jwks.json       {"keys":[{"kty":"RSA","kid":"bench","use":"sig","alg":"RS256","n":…,"e":…}]} (for the gateway's jwks_file)
  public.pem      the same public key as SubjectPublicKeyInfo PEM (for HAProxy's jwt_verify)
  repeated.jwt    one valid token (no jti), one line
  distinct.jwt    DISTINCT_COUNT valid tokens, one per line, each with its own "jti"
  lu-warmup.jwt   with WARMUP_COUNT: that many more such tokens (the limited-use rows' warm-ups: never in distinct.jwt)
  bad.jwt         the repeated token with one signature character changed (must be refused: 401)
Signing is spread over every CPU (multiprocessing); only the parent holds the key file on disk (private.pem, 0600).
"""
import base64, json, multiprocessing as mp, os, sys, time

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
except ImportError:
    sys.exit("mint_tokens: python 'cryptography' missing (python3 -m pip install cryptography)")

PROJECT_NUMBER = "123456789012"
HEADER = {"alg": "RS256", "typ": "JWT", "kid": "bench"}


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode("ascii")


def claims(now, jti=None):
    c = {"iss": "https://firebaseappcheck.googleapis.com/" + PROJECT_NUMBER,
         "sub": "1:" + PROJECT_NUMBER + ":ios:0123456789abcdef",
         "aud": ["projects/" + PROJECT_NUMBER, "projects/demo-project"],
         "provider": "debug", "iat": now, "exp": now + 3600}
    if jti is not None:
        c["jti"] = jti
    return c


_key = None
_head = b64u(json.dumps(HEADER, separators=(",", ":")).encode())


def _init(pem):
    global _key
    _key = serialization.load_pem_private_key(pem, password=None)


def sign(c):
    signing_input = _head + "." + b64u(json.dumps(c, separators=(",", ":")).encode())
    sig = _key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + b64u(sig)


def _sign_range(args):
    now, start, end = args
    return "\n".join(sign(claims(now, "bench-%010d-%s" % (i, os.urandom(6).hex()))) for i in range(start, end))


def main():
    out, count = sys.argv[1], int(sys.argv[2])
    warm = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    t0 = time.time()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(os.path.join(out, "private.pem"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    pub = key.public_key()
    with open(os.path.join(out, "public.pem"), "wb") as f:
        f.write(pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    nums = pub.public_numbers()
    n = nums.n.to_bytes((nums.n.bit_length() + 7) // 8, "big")
    e = nums.e.to_bytes((nums.e.bit_length() + 7) // 8, "big")
    with open(os.path.join(out, "jwks.json"), "w") as f:
        json.dump({"keys": [{"kty": "RSA", "kid": "bench", "use": "sig", "alg": "RS256", "n": b64u(n), "e": b64u(e)}]}, f)

    now = int(time.time())
    _init(pem)
    repeated = sign(claims(now))
    with open(os.path.join(out, "repeated.jwt"), "w") as f:
        f.write(repeated + "\n")
    # Change a character in the middle of the signature: the last one of a 256-byte signature only carries
    # 2 bits, and a lenient base64url decoder ignores the other 4 (HAProxy 2.6 does), so it would not do.
    k = len(repeated) - 100
    bad = repeated[:k] + ("A" if repeated[k] != "A" else "B") + repeated[k + 1:]
    with open(os.path.join(out, "bad.jwt"), "w") as f:
        f.write(bad + "\n")

    chunk = 2000
    with mp.Pool(os.cpu_count() or 1, initializer=_init, initargs=(pem,)) as pool:
        for name, start, end in (("distinct.jwt", 0, count), ("lu-warmup.jwt", count, count + warm)):
            if end > start:
                with open(os.path.join(out, name), "w") as f:
                    jobs = [(now, s, min(s + chunk, end)) for s in range(start, end, chunk)]
                    for block in pool.imap(_sign_range, jobs):
                        f.write(block + "\n")
    print("mint_tokens: key + %d distinct tokens (+1 repeated, 1 bad) in %.1f s, %d bytes per token"
          % (count + warm, time.time() - t0, len(repeated)))


if __name__ == "__main__":
    main()
