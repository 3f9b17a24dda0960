"""The bench's peers and their config files: each process in its own process group, pinned to a core, killed by its
group id. Gateways and redis-server are the e2e harness's Gateway and RedisServer, nginx and HAProxy a Proc; a Proxy
is a measured process that can start again (after a crash, or on fresh state before each run)."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import harness as H
from settings import AA_BUNDLE, AA_REG, AA_TEAM, TOKEN_PROJECT_NUMBER, die


BODY = "attest-gateway bench upstream: 50-byte body ok.\\n"   # 47 characters + newline = 48 bytes
BODY_MARK = b"50-byte body ok."
UPSTREAM = f'default_type text/plain; return 200 "{BODY}";'
PROXY = 'proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection "";'


def nginx_temp_paths(nginx: str, tmp: Path) -> str:
    """Temp paths inside tmp so nginx needs nothing from /var/lib/nginx; only for modules this nginx has."""
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, timeout=10).stderr
    return " ".join([f"client_body_temp_path {tmp}/body;", f"proxy_temp_path {tmp}/proxy;"]
                    + [f"{m}_temp_path {tmp}/{m};" for m in ("fastcgi", "uwsgi", "scgi")
                       if f"--without-http_{m}_module" not in built])


def nginx_conf(workdir: Path, temp_paths: str, listens: list[str], location: str, upstream: int | None = None,
               keepalive: int = 100000, tls: tuple[Path, Path] | None = None) -> str:
    """One process, no access log; with `upstream` an `api` upstream block (keepalive 256) for proxy_pass."""
    api = (f"upstream api {{ server 127.0.0.1:{upstream}; keepalive 256; keepalive_requests 100000; }}"
           if upstream else "")
    ssl = (f"ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]}; ssl_protocols TLSv1.2 TLSv1.3;" if tls else "")
    return f"""daemon off; master_process off; worker_processes 1;
error_log {workdir}/err.log; pid {workdir}/pid;
events {{ worker_connections 4096; }}
http {{
  access_log off; keepalive_requests {keepalive}; keepalive_timeout 75s;
  {temp_paths}
  {api}
  server {{
    {" ".join(f"listen 127.0.0.1:{listen};" for listen in listens)} {ssl}
    location / {{ {location} }}
  }}
}}
"""


def haproxy_cfg(port: int, upstream_port: int, public_pem: Path) -> str:
    """HAProxy 2.6: no JWKS, no claim checks of its own: the key is a PEM file, each claim is an ACL. Every jwt_*
    converter call decodes the token again; jwt_verify returns 1 only for a good signature."""
    aud = f"-m str projects/{TOKEN_PROJECT_NUMBER} projects/demo-project"
    iss = f"https://firebaseappcheck.googleapis.com/{TOKEN_PROJECT_NUMBER}"
    return f"""global
  nbthread 1
  maxconn 8192
defaults
  mode http
  timeout connect 5s
  timeout client 75s
  timeout server 75s
  timeout http-keep-alive 75s
  option http-keep-alive
  http-reuse always
frontend fe
  bind 127.0.0.1:{port}
  http-request set-var(txn.bearer) req.hdr(X-Firebase-AppCheck)
  http-request set-var(txn.now) date()
  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('$.exp','int')
  http-request set-var(txn.iat) var(txn.bearer),jwt_payload_query('$.iat','int')
  acl jwt_alg var(txn.bearer),jwt_header_query('$.alg') -m str RS256
  acl jwt_typ var(txn.bearer),jwt_header_query('$.typ') -m str JWT
  acl jwt_kid var(txn.bearer),jwt_header_query('$.kid') -m str bench
  acl jwt_sig var(txn.bearer),jwt_verify("RS256","{public_pem}") -m int 1
  acl jwt_iss var(txn.bearer),jwt_payload_query('$.iss') -m str {iss}
  acl jwt_aud var(txn.bearer),jwt_payload_query('$.aud[0]') {aud}
  acl jwt_aud var(txn.bearer),jwt_payload_query('$.aud[1]') {aud}
  acl jwt_exp var(txn.exp),sub(txn.now) -m int gt 0
  acl jwt_iat var(txn.iat),sub(txn.now) -m int le 0
  acl jwt_sub var(txn.bearer),jwt_payload_query('$.sub') -m found
  http-request deny deny_status 401 unless jwt_alg jwt_typ jwt_kid jwt_sig jwt_iss jwt_aud jwt_exp jwt_iat jwt_sub
  default_backend api
backend api
  server up 127.0.0.1:{upstream_port}
"""


def gateway_yaml(listeners: list[dict], upstream_port: int, verifiers: dict | None = None,
                 state: dict | None = None, limited_use: bool = False) -> str:
    """One route `bench` (path_prefix /) to upstream `api` (256 idle connections), verified by every verifier."""
    route = {"name": "bench", "match": {"path_prefix": "/"}, "upstream": "api", "verify": list(verifiers or {})}
    cfg = {"version": 1, "listeners": listeners, "state": state or {"backend": "memory"},
           "upstreams": {"api": {"url": f"http://127.0.0.1:{upstream_port}", "max_idle_connections": 256}},
           "verifiers": verifiers, "routes": [{**route, "limited_use": True} if limited_use else route]}
    return H.yaml_dump({k: v for k, v in cfg.items() if v}) + "\n"


def app_check_verifier(jwks_file: Path) -> dict:
    return {"fb": {"type": "app_check", "project_number": TOKEN_PROJECT_NUMBER, "project_id": "demo-project",
                   "jwks_file": str(jwks_file)}}


def app_attest_verifier(root_ca: Path) -> dict:
    return {"aa": {"type": "app_attest", "team_id": AA_TEAM, "bundle_ids": [AA_BUNDLE], "root_ca": str(root_ca),
                   "binding": "request", "max_skew": "24h", "registration_path": AA_REG}}


@contextmanager
def pinned(core: int) -> Iterator[None]:
    """Processes started inside inherit affinity to this core alone (what `taskset -c CORE` gives one command)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def tail(path: Path | None, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except (OSError, AttributeError):
        return ""


def free_ports(count: int) -> list[int]:
    """Ports from below the kernel's ephemeral range when it leaves room (20000 up to its start), so that no client
    connection made meanwhile (a gateway's pooled ones included) holds one when a server binds it again."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    span, ports = low - 20000 if 25000 < low < 50000 else 30000, []
    for port in random.sample(range(20000, 20000 + span), min(span, 200 + count)):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == count:
            return ports
    die("no free loopback ports found")


class Proc:
    """nginx or HAProxy, its stdout and stderr in `output`, ready once every port accepts; log_path is the log
    worth showing when it fails."""

    def __init__(self, name: str, argv: list[str], core: int, ports: list[int], output: Path, log_path: Path):
        self.log_path = log_path
        with open(output, "ab") as out, pinned(core):
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        try:
            for port in ports:
                H.wait_listening(port, self.proc, 10.0, name)
        except RuntimeError as e:
            self.kill()
            die(f"{e}\n{tail(output)}\n{tail(log_path)}")

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the group this Proc started, by its id
            self.proc.wait(timeout=5)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass


def start_peer(name: str, check: list[str], argv: list[str], core: int, ports: list[int], workdir: Path,
               log: str) -> Proc:
    """The config check (its failure stops the bench), then the process."""
    p = subprocess.run(check, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        die(f"{name} config check failed:\n{p.stdout}{p.stderr}")
    return Proc(name, argv, core, ports, workdir / "stdout.log", workdir / log)


def start_nginx(name: str, nginx: str, workdir: Path, conf: str, core: int, ports: list[int]) -> Proc:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "nginx.conf").write_text(conf)
    args = ["-e", str(workdir / "err.log"), "-p", str(workdir), "-c", str(workdir / "nginx.conf")]
    return start_peer(name, [nginx, "-t", "-q", *args], [nginx, *args], core, ports, workdir, "err.log")


def start_haproxy(haproxy: str, workdir: Path, cfg: str, port: int) -> Proc:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "haproxy.cfg").write_text(cfg)
    args = ["-f", str(workdir / "haproxy.cfg")]
    return start_peer("haproxy", [haproxy, "-c", "-q", *args], [haproxy, "-db", *args], 0, [port], workdir,
                      "stdout.log")


def start_gateway(binary: str, workdir: Path, config: str, extra_ports: tuple[int, ...] = ()) -> H.Gateway:
    """`serve --workers 1` on core 0, its access log (stdout) into /dev/null as before."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "stdout.log").unlink(missing_ok=True)
    (workdir / "stdout.log").symlink_to(os.devnull)   # the path the harness opens for the gateway's stdout
    try:
        with pinned(0):
            gw = H.Gateway(binary, config, workdir, workers=1)
    except RuntimeError as e:
        die(f"attest-gateway ({workdir.name}) did not start: {e}")
    try:
        for port in extra_ports:
            H.wait_listening(port, gw.proc, 10.0, "attest-gateway serve")
    except RuntimeError as e:
        gw.kill()
        die(f"attest-gateway ({workdir.name}): {e}\n{tail(gw.stderr_path)}")
    return gw


def start_redis(binary: str, workdir: Path, port: int) -> H.RedisServer:
    try:
        with pinned(1):
            return H.RedisServer(workdir, port=port, binary=binary)
    except RuntimeError as e:
        die(f"redis-server did not start: {e}")


def log_of(process) -> Path | None:
    return getattr(process, "stderr_path", None) or getattr(process, "log_path", None)


class Proxy:
    """A measured process from `starter(tag)`; the tag names the fresh state of a starter that keeps any."""

    def __init__(self, name: str, starter: Callable[[str], object]):
        self.name, self.starter, self.current = name, starter, None

    @property
    def pid(self) -> int:
        return self.current.proc.pid

    def alive(self) -> bool:
        return self.current is not None and self.current.proc.poll() is None

    def start(self, tag: str) -> Proxy:
        self.current = self.starter(tag)
        return self

    def kill(self) -> None:
        if self.current is not None:
            self.current.kill()

    def restart(self, tag: str) -> None:
        if self.current is not None and not self.alive():
            print(f"--- {self.name} (pid {self.pid}) had exited; its log (last 30 lines):")
            print(tail(log_of(self.current)))
        self.kill()
        self.current = None
        self.start(tag)

    def ensure_running(self) -> None:
        """Starts it again if it died in an earlier run (that run reported it)."""
        if not self.alive():
            print(f"bench: restarting {self.name}")
            self.restart("restart")
