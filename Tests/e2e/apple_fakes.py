"""Local stand-ins for Apple's servers, which no test can reach: real HTTPS servers on 127.0.0.1 with a test CA made
at test time (openssl CLI), checking what Apple checks (the ES256 `Authorization` JWT, the JSON body) and answering
as Apple documents. The gateway is pointed at them with `base_url` and `ca_file`."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=60)


def make_tls(dir: Path) -> SimpleTLS:
    """A test CA and a server certificate for 127.0.0.1 signed by it."""
    dir.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (dir / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
         str(ca_key), "-out", str(ca), "-days", "2", "-subj", "/CN=attest-gateway test CA")
    _run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
         "-out", str(csr), "-subj", "/CN=127.0.0.1")
    ext = dir / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
         "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return SimpleTLS(ca=ca, cert=cert, key=key)


class SimpleTLS:
    def __init__(self, ca: Path, cert: Path, key: Path):
        self.ca, self.cert, self.key = ca, cert, key


def make_p8(path: Path) -> Path:
    """An Apple-style `.p8` key: PKCS#8 PEM of a P-256 key."""
    _run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
    return path


def serve_https(handler, tls: SimpleTLS) -> ThreadingHTTPServer:
    """A threaded HTTPS server for `handler` (a BaseHTTPRequestHandler class) on 127.0.0.1, an ephemeral port, serving
    `tls`'s certificate, running on a daemon thread. Stop it with shutdown() and server_close()."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(tls.cert), str(tls.key))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _TLSServer:
    """A threaded HTTPS server on 127.0.0.1 whose POSTs go to `handle(path, authorization, body) -> (status, reply)`
    (`reply` bytes, or a JSON-serialisable value)."""

    def __init__(self, tls: SimpleTLS, handle):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):   # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, reply = handle(self.path, self.headers.get("Authorization", ""), body)
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = serve_https(Handler, tls)
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class AppleJWT:
    """What Apple checks in the `Authorization` token: `{"alg":"ES256","kid":…}`, `iss` = the team, a recent
    `iat`, and the R ‖ S signature (with Python's `cryptography` when installed; its shape otherwise)."""

    def __init__(self, key_id: str, team_id: str, public_key_pem: bytes):
        self.key_id, self.team_id = key_id, team_id
        try:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key
            self.public_key = load_pem_public_key(public_key_pem)
        except ImportError:
            self.public_key = None

    def check(self, authorization: str) -> str | None:
        """Why the `Authorization` value is not a valid token for this key and team, or None."""
        if not authorization.startswith("Bearer "):
            return "no Bearer token"
        parts = authorization[7:].split(".")
        if len(parts) != 3:
            return "not a JWS"
        header, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
        if header != {"alg": "ES256", "kid": self.key_id}:
            return f"header {header}"
        if claims.get("iss") != self.team_id or abs(claims.get("iat", 0) - time.time()) > 3600:
            return f"claims {claims}"
        signature = _b64url(parts[2])
        if len(signature) != 64:
            return "signature is not R ‖ S"
        if self.public_key is not None:
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            try:
                self.public_key.verify(der, (parts[0] + "." + parts[1]).encode(), ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                return "bad signature"
        return None


class _AppleStandIn:
    """What the stand-ins for Apple's servers share: the ES256 token check, the calls seen, an HTTPS server whose
    POSTs go to the subclass's `handle`."""

    def __init__(self, tls: SimpleTLS, key_id: str, team_id: str, public_key_pem: bytes):
        self.jwt = AppleJWT(key_id, team_id, public_key_pem)
        self.lock = threading.Lock()
        self.calls: list[dict] = []
        self.http = _TLSServer(tls, self.handle)
        self.port = self.http.port

    @property
    def url(self) -> str:
        return self.http.url

    def kill(self) -> None:
        self.http.kill()


class FakeDeviceCheck(_AppleStandIn):
    """Apple's DeviceCheck API: `/v1/validate_device_token`, `/v1/query_two_bits`, `/v1/update_two_bits`.

    The device token decides the answer: `ok…` 200, `bad…` 400 (device token), `limit…` 429, `down…` 500,
    `flaky…` 500 once then 200, `slow…` 200 after `slow_seconds`. Bits are kept per token."""

    def __init__(self, tls: SimpleTLS, key_id: str, team_id: str, public_key_pem: bytes, slow_seconds: float = 2.0):
        self.slow_seconds = slow_seconds
        self.bits: dict[str, dict] = {}
        self.flaky_seen: set[str] = set()
        self.auth_problems: list[str] = []
        super().__init__(tls, key_id, team_id, public_key_pem)

    def handle(self, path: str, authorization: str, body: bytes):
        problem = self.jwt.check(authorization)
        try:
            req = json.loads(body)
            uuid.UUID(req["transaction_id"])
            assert abs(req["timestamp"] / 1000 - time.time()) < 600
            token = req["device_token"]
        except Exception as e:  # noqa: BLE001
            return 400, f"Missing or incorrectly formatted device token payload ({e})".encode()
        with self.lock:
            self.calls.append({"path": path, "token": token, "body": req, "authorization": authorization})
            if problem:
                self.auth_problems.append(problem)
        if problem:
            return 401, b"Unable to verify authorization token"
        if token.startswith("bad"):
            return 400, b"Missing or incorrectly formatted device token payload"
        if token.startswith("limit"):
            return 429, b"Too many requests"
        if token.startswith("down"):
            return 500, b"Internal error"
        if token.startswith("flaky"):
            with self.lock:
                first = token not in self.flaky_seen
                self.flaky_seen.add(token)
            if first:
                return 503, b"Unavailable"
        if token.startswith("slow"):
            time.sleep(self.slow_seconds)
        if path == "/v1/validate_device_token":
            return 200, b""
        if path == "/v1/query_two_bits":
            with self.lock:
                bits = self.bits.get(token)
            if bits is None:
                return 200, b"Failed to find bit state"
            return 200, dict(bits, last_update_time="2026-11")
        if path == "/v1/update_two_bits":
            with self.lock:
                self.bits[token] = {"bit0": bool(req.get("bit0")), "bit1": bool(req.get("bit1"))}
            return 200, b""
        return 404, b"not found"

    def count(self, path: str, token: str) -> int:
        with self.lock:
            return sum(1 for c in self.calls if c["path"] == path and c["token"] == token)



class FakeAppAttestData(_AppleStandIn):
    """Apple's App Attest data server: `POST /v1/attestationData` with a receipt (standard base64 body) and
    `Authorization: <ES256 JWT>` (no "Bearer"). `mode` decides the answer: ("200", metric) returns a new RECEIPT
    receipt for the same key minted by `attest-gateway-dev appattest receipt` (signed by the test CA's receipt
    signer), "304", "404" or "429" as Apple does."""

    def __init__(self, tls: SimpleTLS, key_id: str, team_id: str, public_key_pem: bytes, binary: str, ca_dir: Path,
                 workdir: Path):
        self.binary, self.ca_dir, self.workdir = binary, ca_dir, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.mode: tuple = ("200", 3)
        super().__init__(tls, key_id, team_id, public_key_pem)

    def handle(self, path: str, authorization: str, body: bytes):
        problem = "Bearer in Authorization" if authorization.startswith("Bearer ") else \
            self.jwt.check("Bearer " + authorization)
        with self.lock:
            mode = self.mode
            self.calls.append({"path": path, "problem": problem, "mode": mode, "time": time.monotonic()})
        if path != "/v1/attestationData":
            return 404, b""
        if problem:
            return 401, problem.encode()
        try:
            receipt = base64.b64decode(body, validate=True)
        except Exception:  # noqa: BLE001
            return 400, b"not base64"
        if mode[0] != "200":
            return int(mode[0]), b""
        f = self.workdir / f"in-{time.monotonic_ns()}.b64"
        f.write_bytes(base64.b64encode(receipt))
        out = subprocess.run([self.binary, "appattest", "receipt", "--ca", str(self.ca_dir), "--receipt", str(f),
                              "--risk-metric", str(mode[1]), "--not-before-in", "0"], capture_output=True, timeout=30)
        if out.returncode != 0:
            return 500, out.stderr
        return 200, out.stdout.strip()

    def count(self) -> int:
        with self.lock:
            return len(self.calls)

