"""Play Integrity test material, made with PyPI's `cryptography` (no Google-signed vectors exist with their keys):

* `ClassicKeys`: a developer-managed key pair as Play Console gives it — the AES-256 decryption key and the P-256
  verification key — with `write(dir)` writing the two files a verifier names (base64 of the 32 key bytes; base64
  of the DER SubjectPublicKeyInfo);
* `mint_classic`: a classic token — compact JWE (`{"alg":"A256KW","enc":"A256GCM"}`: RFC 3394 key wrap of a fresh
  content key, AES-GCM with the header part's ASCII as AAD) around a compact JWS (`{"alg":"ES256"}`, R ‖ S) of the
  verdict JSON; every piece can be swapped for a test that must be refused;
* `request_hash` / `challenge_hash`: the values a token binds (docs/play-integrity.md);
* `verdict`: the verdict JSON with every field overridable or removable.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.keywrap import aes_key_wrap

PACKAGE = "com.example.app"
JWE_HEADER = {"alg": "A256KW", "enc": "A256GCM"}
JWS_HEADER = {"alg": "ES256"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def cert_digest(certificate: bytes) -> str:
    """`certificateSha256Digest` of a signing certificate: base64url (no padding) of its SHA-256."""
    return b64url(hashlib.sha256(certificate).digest())


def cert_hex(certificate: bytes, colons: bool = True) -> str:
    """The same digest as Play Console shows it (upper-case hex, colon-separated)."""
    h = hashlib.sha256(certificate).hexdigest().upper()
    return ":".join(h[i:i + 2] for i in range(0, len(h), 2)) if colons else h


APP_CERT = b"attest-gateway e2e: the app's signing certificate"
APP_CERT_DIGEST = cert_digest(APP_CERT)


# ----------------------------------------------------------------------------------------------------------------
# Keys


class ClassicKeys:
    def __init__(self, aes: bytes | None = None, signing: ec.EllipticCurvePrivateKey | None = None):
        self.aes = aes if aes is not None else os.urandom(32)
        self.signing = signing if signing is not None else ec.generate_private_key(ec.SECP256R1())

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        dec, ver = directory / "play-aes.txt", directory / "play-ec.txt"
        write_decryption_key_file(dec, self.aes)
        write_verification_key_file(ver, self.signing.public_key())
        return dec, ver


def write_decryption_key_file(path: Path, key: bytes) -> Path:
    """Base64 (standard alphabet, as Play Console shows it) of the raw AES key bytes."""
    path.write_text(base64.b64encode(key).decode("ascii") + "\n")
    return path


def write_verification_key_file(path: Path, public_key: ec.EllipticCurvePublicKey) -> Path:
    """Base64 of the DER SubjectPublicKeyInfo of the P-256 verification key."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    path.write_text(base64.b64encode(der).decode("ascii") + "\n")
    return path


# ----------------------------------------------------------------------------------------------------------------
# Tokens


def jws_es256(payload: bytes, signing: ec.EllipticCurvePrivateKey, header: dict | None = None) -> str:
    signing_input = b64url(_json(header if header is not None else JWS_HEADER)) + "." + b64url(payload)
    der = signing.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def jwe_a256kw_a256gcm(plaintext: bytes, kek: bytes, header: dict | None = None, iv_len: int = 12,
                       tag_len: int = 16) -> str:
    """Compact JWE: header . wrapped CEK (40 bytes) . IV (12) . ciphertext . tag (16); AAD = ASCII of the header part.
    `header` is used as given (the algorithms actually used stay A256KW / A256GCM); `iv_len` / `tag_len` make
    tokens of other sizes (the tag truncated)."""
    header_part = b64url(_json(header if header is not None else JWE_HEADER))
    cek, iv = os.urandom(32), os.urandom(iv_len)
    wrapped = aes_key_wrap(kek, cek)
    sealed = AESGCM(cek).encrypt(iv, plaintext, header_part.encode("ascii"))
    ciphertext, tag = sealed[:-16], sealed[-16:][:tag_len]
    return ".".join([header_part, b64url(wrapped), b64url(iv), b64url(ciphertext), b64url(tag)])


def mint_classic(verdict: dict, keys: ClassicKeys, kek: bytes | None = None,
                 signing: ec.EllipticCurvePrivateKey | None = None, jwe_header: dict | None = None,
                 jws_header: dict | None = None, inner: str | None = None, **sizes) -> str:
    """A classic token for `verdict` under `keys` (or another `kek` / `signing` key, JOSE headers, `inner` JWS
    text or JWE sizes, to be refused)."""
    if inner is None:
        inner = jws_es256(_json(verdict), signing or keys.signing, jws_header)
    return jwe_a256kw_a256gcm(inner.encode("ascii"), kek if kek is not None else keys.aes, jwe_header, **sizes)


def jws_der_signature(payload: bytes, signing: ec.EllipticCurvePrivateKey) -> str:
    """A JWS whose signature is the DER ECDSA encoding rather than JOSE's R ‖ S (to be refused)."""
    signing_input = b64url(_json(JWS_HEADER)) + "." + b64url(payload)
    return signing_input + "." + b64url(signing.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256())))


def tamper(token: str, part: int = 3, byte: int = 0) -> str:
    """The token with one bit of one part (default: the ciphertext) flipped, re-encoded canonically."""
    parts = token.split(".")
    raw = bytearray(b64url_decode(parts[part]))
    raw[byte] ^= 0x01
    parts[part] = b64url(bytes(raw))
    return ".".join(parts)


# ----------------------------------------------------------------------------------------------------------------
# Binding values


def request_hash(method: str, target: str, timestamp: str, body: bytes) -> str:
    """base64url-nopad(SHA-256(METHOD "\\n" target "\\n" timestamp "\\n" hex(SHA-256(body))))."""
    client_data = f"{method}\n{target}\n{timestamp}\n{hashlib.sha256(body).hexdigest()}".encode("utf-8")
    return b64url(hashlib.sha256(client_data).digest())


def challenge_hash(challenge: str) -> str:
    """What a registration token binds: base64url-nopad(SHA-256(UTF-8 challenge))."""
    return b64url(hashlib.sha256(challenge.encode("utf-8")).digest())


# ----------------------------------------------------------------------------------------------------------------
# Verdicts

_DEFAULT = object()


def verdict(*, package: str = PACKAGE, timestamp_ms=_DEFAULT, nonce: str | None = None,
            request_hash: str | None = None, app_recognition: str = "PLAY_RECOGNIZED", app_package=_DEFAULT,
            digests=_DEFAULT, device=_DEFAULT, activity="LEVEL_1", licensing="LICENSED", play_protect="NO_ISSUES",
            version_code: str = "42") -> dict:
    """The verdict JSON (both token forms). `None` removes an optional field (`app_package` → no
    `appIntegrity.packageName`; `activity` → no `recentDeviceActivity`; `licensing` → no `accountDetails`;
    `play_protect` → no `environmentDetails`); `timestamp_ms` defaults to now (written as a decimal string)."""
    ts = int(time.time() * 1000) if timestamp_ms is _DEFAULT else timestamp_ms
    request = {"requestPackageName": package, "timestampMillis": str(ts) if isinstance(ts, int) else ts}
    if nonce is not None:
        request["nonce"] = nonce
    if request_hash is not None:
        request["requestHash"] = request_hash
    app = {"appRecognitionVerdict": app_recognition}
    pkg = PACKAGE if app_package is _DEFAULT else app_package
    if pkg is not None:
        app["packageName"] = pkg
    app["certificateSha256Digest"] = [APP_CERT_DIGEST] if digests is _DEFAULT else list(digests)
    app["versionCode"] = version_code
    device_integrity: dict = {"deviceRecognitionVerdict": ["MEETS_DEVICE_INTEGRITY"] if device is _DEFAULT else list(device)}
    if activity is not None:
        device_integrity["recentDeviceActivity"] = {"deviceActivityLevel": activity}
    out = {"requestDetails": request, "appIntegrity": app, "deviceIntegrity": device_integrity}
    if licensing is not None:
        out["accountDetails"] = {"appLicensingVerdict": licensing}
    if play_protect is not None:
        out["environmentDetails"] = {"playProtectVerdict": play_protect}
    return out
