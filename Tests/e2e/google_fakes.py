"""A local stand-in for Google's servers, which no test can reach: one real HTTPS server on 127.0.0.1 (the test CA of
`apple_fakes.make_tls`, made at test time) playing both

* the OAuth2 token endpoint (`POST /token`, also `/oauth2/token` so a test can tell `token_url` from the account
  file's `token_uri`): the JWT bearer grant (RFC 7523) whose RS256 assertion is checked as Google checks it — header
  `{"alg":"RS256","typ":"JWT","kid":<private_key_id>}`, the signature under the service account's public key
  (`cryptography`), `iss` = `client_email`, `scope` = the Play Integrity scope, `aud` = the URL it was posted to, a
  recent `iat` and `exp` = `iat` + 3600 — answering `{"access_token":…,"expires_in":3599,"token_type":"Bearer"}`;
* Play Integrity's `POST /v1/{package}:decodeIntegrityToken` (`{"integrityToken": …}` with `Authorization: Bearer
  <an access token it issued>`): the token string is looked up in what the test registered (`add` / `register`) and
  answered `200 {"tokenPayloadExternal": <verdict>}`, or 400 for a token it does not know.

Switches: `down` (None, an HTTP status answered to every decode call, or "drop": the connection is closed without
an answer), `fail_next[token]` (what that token's next calls get, one entry per call: a status, "drop", or ("sleep", seconds)
before the usual answer), `revoke(path)` (access
tokens issued at that path answer 401 from then on). Every call is recorded; `decode_count(token)`,
`token_fetches(path, iss)` count them. Anything wrong with what the gateway sent is appended to `problems` (a test
asserts it stays empty).

`write_service_account` writes a service-account key file as the Cloud console downloads it (a fresh RSA-2048 key).
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from apple_fakes import SimpleTLS, serve_https

SCOPE = "https://www.googleapis.com/auth/playintegrity"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_PATHS = ("/token", "/oauth2/token")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ----------------------------------------------------------------------------------------------------------------
# Service account key files


@dataclass
class ServiceAccount:
    path: Path
    client_email: str
    private_key_id: str
    public_key: rsa.RSAPublicKey
    token_uri: str


def write_service_account(path: Path, token_uri: str, client_email: str = "attest-gateway@test-project.iam.gserviceaccount.com",
                          private_key_id: str | None = None) -> ServiceAccount:
    """A `{"type":"service_account",…}` key file with a new RSA-2048 key (PKCS#8 PEM, as Google writes it)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode("ascii")
    kid = private_key_id or secrets.token_hex(20)
    doc = {
        "type": "service_account",
        "project_id": "test-project",
        "private_key_id": kid,
        "private_key": pem,
        "client_email": client_email,
        "client_id": "109876543210987654321",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "universe_domain": "googleapis.com",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return ServiceAccount(path=path, client_email=client_email, private_key_id=kid, public_key=key.public_key(),
                          token_uri=token_uri)


# ----------------------------------------------------------------------------------------------------------------
# The stand-in


class FakeGoogle:
    def __init__(self, tls: SimpleTLS, package: str):
        self.package = package
        self.decode_path = f"/v1/{package}:decodeIntegrityToken"
        self.lock = threading.Lock()
        self.accounts: dict[str, ServiceAccount] = {}
        self.verdicts: dict[str, dict] = {}
        self.issued: dict[str, str] = {}            # access token -> the token path it was issued at
        self.revoked: set[str] = set()
        self.down = None                            # None | int status | "drop"
        self.fail_next: dict[str, list] = {}         # integrity token -> statuses (or "drop") for its next calls
        self.token_calls: list[dict] = []
        self.decode_calls: list[dict] = []
        self.problems: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):   # quiet
                pass

            def do_GET(self):
                self._answer(405, {"error": {"code": 405, "status": "METHOD_NOT_ALLOWED"}})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or "0"))
                try:
                    status, reply = fake._handle(self.path, self.headers, body)
                except Exception as e:  # noqa: BLE001  (a bug in the stand-in shows up as a problem, not a hang)
                    with fake.lock:
                        fake.problems.append(f"stand-in error: {type(e).__name__}: {e}")
                    status, reply = 500, {"error": {"code": 500, "message": "stand-in error"}}
                if status == "drop":
                    self.close_connection = True     # closed without a response: a transport failure
                    return
                self._answer(status, reply)

            def _answer(self, status: int, reply) -> None:
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (OSError, ssl.SSLError):   # the gateway gave up (its timeout) before the answer
                    self.close_connection = True

        self.server = serve_https(Handler, tls)
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def kill(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- what tests call ----------------------------------------------------------------------------------------

    def trust(self, account: ServiceAccount) -> None:
        with self.lock:
            self.accounts[account.client_email] = account

    def register(self, token: str, verdict: dict) -> str:
        with self.lock:
            self.verdicts[token] = verdict
        return token

    def add(self, verdict: dict) -> str:
        """Registers `verdict` under a fresh opaque token (base64url, no dots: never a five-part JWE) and returns it."""
        return self.register("std" + secrets.token_urlsafe(180), verdict)

    def revoke(self, path: str) -> None:
        """Access tokens issued at `path` answer 401 on decode calls from now on."""
        with self.lock:
            self.revoked |= {t for t, p in self.issued.items() if p == path}

    def decode_count(self, token: str) -> int:
        with self.lock:
            return sum(1 for c in self.decode_calls if c["token"] == token)

    def token_fetches(self, path: str | None = None, iss: str | None = None) -> int:
        with self.lock:
            return sum(1 for c in self.token_calls
                       if (path is None or c["path"] == path) and (iss is None or c["iss"] == iss))

    def bearers_used(self, tokens: list[str]) -> set[str]:
        with self.lock:
            return {c["bearer"] for c in self.decode_calls if c["token"] in tokens}

    # --- the endpoints ------------------------------------------------------------------------------------------

    def _problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def _handle(self, path: str, headers, body: bytes):
        if path in TOKEN_PATHS:
            return self._token(path, headers, body)
        if path == self.decode_path:
            return self._decode(headers, body)
        self._problem(f"POST to an unknown path {path!r}")
        return 404, {"error": {"code": 404, "message": f"{path} not found", "status": "NOT_FOUND"}}

    def _token(self, path: str, headers, body: bytes):
        record = {"path": path, "iss": None, "time": time.time()}
        with self.lock:
            self.token_calls.append(record)
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            self._problem(f"token endpoint: Content-Type {ctype!r}")
        form = urllib.parse.parse_qs(body.decode("ascii", "replace"), keep_blank_values=True, strict_parsing=False)
        grant = form.get("grant_type", [])
        assertion = form.get("assertion", [])
        if grant != [GRANT_TYPE] or len(assertion) != 1:
            self._problem(f"token endpoint: form {sorted(form)} grant_type={grant}")
            return 400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}
        why, claims = self._check_assertion(assertion[0], self.url + path)
        record["iss"] = claims.get("iss") if isinstance(claims, dict) else None
        if why:
            self._problem(f"token endpoint: {why}")
            return 400, {"error": "invalid_grant", "error_description": why}
        access = "ya29.test-" + secrets.token_urlsafe(24)
        with self.lock:
            self.issued[access] = path
        return 200, {"access_token": access, "expires_in": 3599, "token_type": "Bearer"}

    def _check_assertion(self, jwt: str, audience: str) -> tuple[str | None, dict]:
        parts = jwt.split(".")
        if len(parts) != 3:
            return "assertion is not a compact JWS", {}
        try:
            header = json.loads(_b64url_decode(parts[0]))
            claims = json.loads(_b64url_decode(parts[1]))
            signature = _b64url_decode(parts[2])
        except ValueError as e:
            return f"assertion does not decode: {e}", {}
        if not isinstance(claims, dict) or not isinstance(header, dict):
            return "assertion header or claims are not objects", {}
        with self.lock:
            account = self.accounts.get(claims.get("iss"))
        if account is None:
            return f"unknown iss {claims.get('iss')!r}", claims
        if header != {"alg": "RS256", "typ": "JWT", "kid": account.private_key_id}:
            return f"header {header}", claims
        try:
            account.public_key.verify(signature, (parts[0] + "." + parts[1]).encode("ascii"), padding.PKCS1v15(),
                                      hashes.SHA256())
        except InvalidSignature:
            return "bad RS256 signature", claims
        if claims.get("scope") != SCOPE:
            return f"scope {claims.get('scope')!r}", claims
        if claims.get("aud") != audience:
            return f"aud {claims.get('aud')!r} (posted to {audience})", claims
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int) or isinstance(iat, bool) or isinstance(exp, bool):
            return f"iat/exp not integers: {iat!r} {exp!r}", claims
        if abs(iat - time.time()) > 120:
            return f"iat {iat} is {iat - time.time():.0f}s off", claims
        if exp != iat + 3600:
            return f"exp {exp} is not iat + 3600", claims
        extra = set(claims) - {"iss", "scope", "aud", "iat", "exp"}
        if extra:
            return f"unexpected claims {sorted(extra)}", claims
        return None, claims

    def _decode(self, headers, body: bytes):
        auth = headers.get("Authorization") or ""
        bearer = auth[7:] if auth.startswith("Bearer ") else None
        token = None
        try:
            req = json.loads(body)
            if isinstance(req, dict) and set(req) == {"integrityToken"} and isinstance(req["integrityToken"], str):
                token = req["integrityToken"]
        except ValueError:
            pass
        with self.lock:
            self.decode_calls.append({"token": token, "bearer": bearer, "time": time.time()})
            known_bearer = bearer in self.issued
            revoked = bearer in self.revoked
            down = self.down
            queued = self.fail_next.get(token) if token is not None else None
            forced = queued.pop(0) if queued else None
            verdict = self.verdicts.get(token) if token is not None else None
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            self._problem(f"decodeIntegrityToken: Content-Type {ctype!r}")
        if token is None:
            self._problem(f"decodeIntegrityToken: body {body[:200]!r}")
            return 400, {"error": {"code": 400, "message": "Invalid JSON payload", "status": "INVALID_ARGUMENT"}}
        if not known_bearer:
            self._problem(f"decodeIntegrityToken: Authorization {auth[:40]!r} is not an access token this stand-in issued")
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                   "status": "UNAUTHENTICATED"}}
        if revoked:
            return 401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                   "status": "UNAUTHENTICATED"}}
        if isinstance(forced, tuple) and forced[0] == "sleep":
            time.sleep(float(forced[1]))             # then answered as usual (a timeout the gateway must enforce)
            forced = None
        for switch in (forced, down):
            if switch == "drop":
                return "drop", None
            if switch is not None:
                return int(switch), {"error": {"code": int(switch), "message": "The service is currently unavailable.",
                                               "status": "UNAVAILABLE"}}
        if verdict is None:
            return 400, {"error": {"code": 400, "message": "Integrity token cannot be decoded.",
                                   "status": "INVALID_ARGUMENT"}}
        return 200, {"tokenPayloadExternal": verdict}
