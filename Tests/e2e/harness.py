"""Process and config helpers for the attest-gateway end-to-end suite (imported by conftest and tests)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import upstreams as U

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
GATEWAY_BIN = os.environ.get("GATEWAY_BIN", str(REPO / ".build" / "release" / "attest-gateway"))
# The development tools (dev echo, dev issuer, simulated App Attest CA and device) are their own executable; every
# test, fake and script that runs one takes it from here.
GATEWAY_DEV_BIN = os.environ.get("GATEWAY_DEV_BIN", str(Path(GATEWAY_BIN).parent / "attest-gateway-dev"))




def free_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_listening(port: int, proc: subprocess.Popen | None, timeout: float = 10.0, what: str = "process") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} not listening on 127.0.0.1:{port} after {timeout}s")


def _yaml_scalar(v) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if (s == "" or re.search(r"[:#\[\]{},&*!|>'\"%@`]", s) or s.strip() != s or re.fullmatch(r"[0-9.+-]+", s)
            or s.lower() in ("true", "false", "null", "yes", "no", "on", "off", "~")):
        return json.dumps(s)
    return s


def yaml_dump(obj, indent: int = 0) -> str:
    """Block-style YAML for dicts/lists of scalars (enough for gateway.yml)."""
    pad = " " * indent
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict) and v:
                out.append(f"{pad}{k}:\n{yaml_dump(v, indent + 2)}")
            elif isinstance(v, list) and v and any(isinstance(x, (dict, list)) for x in v):
                out.append(f"{pad}{k}:\n{yaml_dump(v, indent + 2)}")
            elif isinstance(v, list):
                out.append(f"{pad}{k}: [" + ", ".join(_yaml_scalar(x) for x in v) + "]")
            elif isinstance(v, dict):
                out.append(f"{pad}{k}: {{}}")
            else:
                out.append(f"{pad}{k}: {_yaml_scalar(v)}")
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, dict):
                body = yaml_dump(item, indent + 2)
                out.append(pad + "- " + body[indent + 2 :])
            else:
                out.append(f"{pad}- {_yaml_scalar(item)}")
    else:
        raise TypeError(obj)
    return "\n".join(out)


def gateway_config(port: int, upstreams: dict, routes: list | None = None, limits: dict | None = None,
                   verifiers: dict | None = None, state: dict | None = None) -> str:
    """upstreams: name -> url or dict; routes default to one catch-all route to the first upstream;
    state defaults to {backend: memory}."""
    ups = {}
    for name, spec in upstreams.items():
        entry = {"url": spec} if isinstance(spec, str) else dict(spec)
        entry.setdefault("connect_timeout", "2s")
        entry.setdefault("response_timeout", "30s")
        ups[name] = entry
    if routes is None:
        first = next(iter(upstreams))
        routes = [{"name": first, "match": {"path_prefix": "/"}, "upstream": first, "verify": []}]
    cfg = {"version": 1, "listeners": [{"address": f"127.0.0.1:{port}"}]}
    if limits:
        cfg["limits"] = limits
    cfg["state"] = dict(state) if state is not None else {"backend": "memory"}
    cfg["upstreams"] = ups
    if verifiers:
        cfg["verifiers"] = verifiers
    cfg["routes"] = routes
    return yaml_dump(cfg) + "\n"


class Gateway:
    def __init__(self, binary: str, config_text: str, workdir: Path, workers: int | None = None,
                 extra_args: tuple = (), ready_timeout: float = 10.0):
        m = re.search(r"address:\s*\"?127\.0\.0\.1:(\d+)", config_text)
        assert m, "config has no 127.0.0.1 listener address"
        self.port = int(m.group(1))
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.dir / "gateway.yml"
        self.config_path.write_text(config_text)
        self.stdout_path = self.dir / "stdout.log"
        self.stderr_path = self.dir / "stderr.log"
        args = [binary, "serve", "--config", str(self.config_path)]
        if workers is not None:
            args += ["--workers", str(workers)]
        args += list(extra_args)
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
                                     cwd=str(self.dir), start_new_session=True)
        try:
            wait_listening(self.port, self.proc, ready_timeout, "attest-gateway serve")
        except Exception as e:
            self.kill()
            raise RuntimeError(f"{e}\n--- stderr ---\n{self.stderr()[-3000:]}\n--- stdout ---\n{self.stdout()[-2000:]}")

    def stdout(self) -> str:
        return self.stdout_path.read_bytes().decode("utf-8", "replace")

    def stderr(self) -> str:
        return self.stderr_path.read_bytes().decode("utf-8", "replace")

    def log_lines(self) -> list[dict]:
        lines = []
        for line in self.stdout().splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    lines.append(obj)
        return lines

    def send_signal(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Sends sig, waits up to timeout; returns the exit code (None if it had to be killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the group this fixture started, by its id
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self._out, self._err):
            try:
                f.close()
            except OSError:
                pass


class DevEcho:
    """``attest-gateway-dev echo`` (``binary``: the dev tools, GATEWAY_DEV_BIN) in its own process group."""

    def __init__(self, binary: str, workdir: Path):
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self._err = open(workdir / "dev-echo.stderr", "wb")
        self.proc = subprocess.Popen([binary, "echo", "--listen", f"127.0.0.1:{self.port}"],
                                     stdout=subprocess.DEVNULL, stderr=self._err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            wait_listening(self.port, self.proc, 10.0, "attest-gateway-dev echo")
        except Exception:
            self.kill()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._err.close()



def run_cli(binary: str, *args, timeout: float = 20.0, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, timeout=timeout, cwd=cwd, stdin=subprocess.DEVNULL)


def assert_json_error(resp: U.Resp, status: int, require_reason: bool = True) -> dict:
    assert resp is not None, f"expected {status}, got no response (connection closed)"
    assert resp.status == status, f"expected {status}, got {resp.status} {resp.reason} body={resp.body[:300]!r}"
    ctype = (resp.one("content-type") or "").lower()
    assert ctype.startswith("application/json"), f"error Content-Type is {ctype!r}"
    doc = json.loads(resp.body)
    assert isinstance(doc, dict) and isinstance(doc.get("error"), str), f"error body {resp.body[:300]!r}"
    if require_reason:
        assert isinstance(doc.get("reason"), str) and doc["reason"], f"error body has no reason: {resp.body[:300]!r}"
    return doc


# ----------------------------------------------------------------------------------------------------------------
# App Check: attest-gateway-dev's development issuer and token helpers (stdlib only).

import base64 as _b64
import urllib.request as _urlreq

_NO_PROXY = _urlreq.build_opener(_urlreq.ProxyHandler({}))   # loopback only: never through an environment proxy


def b64url(data: bytes) -> str:
    return _b64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return _b64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_parts(token: str) -> tuple[dict, dict, str]:
    """(header, claims, signature segment) of a compact JWS, without verifying anything."""
    h, p, s = token.split(".")
    return json.loads(b64url_decode(h)), json.loads(b64url_decode(p)), s


def jwt_encode_segment(obj: dict) -> str:
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


class DevIssuer:
    """``attest-gateway-dev issuer`` in its own process group (killed by that group id)."""

    def __init__(self, binary: str, workdir: Path, project_number: str | None = None, project_id: str | None = None,
                 app_id: str | None = None):
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = workdir / "dev-issuer.stderr"
        self._err = open(self.stderr_path, "wb")
        args = [binary, "issuer", "--listen", f"127.0.0.1:{self.port}"]
        if project_number is not None:
            args += ["--project-number", project_number]
        if project_id is not None:
            args += ["--project-id", project_id]
        if app_id is not None:
            args += ["--app-id", app_id]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._err, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            wait_listening(self.port, self.proc, 10.0, "attest-gateway-dev issuer")
        except Exception:
            self.kill()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return self.url + "/jwks"

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = _urlreq.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with _NO_PROXY.open(req, timeout=5) as r:
            return json.loads(r.read())

    def token(self, **kw) -> str:
        """kw: app_id, ttl, limited_use, expired (as POST /token takes them)."""
        return self._call("POST", "/token", kw or None)["token"]

    def jwks(self) -> dict:
        return self._call("GET", "/jwks")

    def rotate(self, retire: bool = False) -> str:
        return self._call("POST", "/rotate" + ("?retire=1" if retire else ""), None)["kid"]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the group this helper started, by its id
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            self._err.close()
        except OSError:
            pass


def app_check_verifier(jwks_url: str, **extra) -> dict:
    """A verifier entry for gateway_config(verifiers=...) with the dev issuer's default project."""
    v = {"type": "app_check", "project_number": "123456789012", "project_id": "demo-project", "jwks_url": jwks_url,
         "clock_skew": "60s"}
    v.update(extra)
    return v


def http_get(path: str, headers: list[tuple[str, str]] = (), host: str = "gw.test") -> bytes:
    out = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
    for k, v in headers:
        out += f"{k}: {v}\r\n"
    return (out + "\r\n").encode("latin-1")


def wait_gateway_accepts(port: int, path: str, header: str, token: str, timeout: float = 10.0) -> None:
    """Polls with a valid token until 200 (the key set is fetched in the background at start)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            r = U.one_shot(port, http_get(path, [(header, token)]), timeout=5)
            last = (r.status, r.body[:200]) if r else None
            if r is not None and r.status == 200:
                return
        except OSError as e:
            last = repr(e)
        time.sleep(0.1)
    raise AssertionError(f"gateway on {port} did not accept a valid token within {timeout}s (last: {last})")



# ----------------------------------------------------------------------------------------------------------------
# Redis: a real redis-server (no persistence) in its own process group, restartable on the same port.

REDIS_SERVER_BIN = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


class RedisServer:
    """``redis-server --port P --bind 127.0.0.1 --save "" --appendonly no`` (cwd and --dir: workdir).
    ``stop()`` kills it (by its process group id); ``start()`` starts it again on the same port.
    ``persistent=True``: ``--appendonly yes --appendfsync always`` instead, so an acknowledged write survives a kill."""

    def __init__(self, workdir: Path, port: int | None = None, binary: str | None = None, persistent: bool = False,
                 extra_args: tuple = ()):
        self.persistent = persistent
        self.extra_args = tuple(extra_args)
        self.binary = binary or REDIS_SERVER_BIN
        if not self.binary:
            raise RuntimeError("redis-server not found (set REDIS_SERVER or install redis-server)")
        self.port = port or free_port()
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.dir / "redis.log"
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None or self.proc.poll() is not None, "redis-server already running"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             *(["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]),
             "--dir", str(self.dir), *self.extra_args],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(self.dir),
            start_new_session=True)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if self.command("PING") == "PONG":
                    return
            except (OSError, ValueError) as e:
                last = e
            time.sleep(0.05)
        tail = self.log_path.read_bytes()[-2000:].decode("utf-8", "replace")
        self.stop()
        raise RuntimeError(f"redis-server did not answer PING on {self.port} ({last!r})\n{tail}")

    def close(self) -> None:
        """What the test factories call at teardown."""
        self.stop()

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)   # the group this helper started, by its id
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
            self._log = None

    kill = stop

    def command(self, *args, timeout: float = 2.0):
        """One RESP2 command on a fresh connection; returns str / int / list / None; raises ValueError on -ERR."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(out)
            return _resp_read(U.Reader(s))


def _resp_read(r):
    line = r.readline()
    if not line.endswith(b"\r\n"):
        raise OSError("redis: connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise ValueError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = r.read_exact(n + 2)
        return data[:-2].decode("utf-8", "replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(r) for _ in range(n)]
    raise ValueError(f"redis: unexpected reply {line[:50]!r}")


def log_records(path: Path, message: str) -> list[dict]:
    """The gateway's operational log lines (JSON on standard error) whose `msg` is `message`, in order."""
    out = []
    for line in path.read_text().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("msg") == message:
            out.append(doc)
    return out
