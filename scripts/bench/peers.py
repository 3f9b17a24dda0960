"""The bench's processes, each in its own process group, pinned to a core, killed by its group id (gateways are the e2e
harness's Gateway, nginx and HAProxy a Proc), and their config files; a Proxy is a measured one that can start again."""

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
from settings import PROJECT_NUMBER, die, loud

BODY = "attest-gateway bench upstream: 50-byte body ok.\\n"   # 47 characters + newline = 48 bytes
BODY_MARK = b"50-byte body ok."
UPSTREAM = f'default_type text/plain; return 200 "{BODY}";'
PROXY = 'proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection "";'
GRPC_PROXY = "grpc_pass grpc://api;"   # the `api` upstream block (keepalive) on the gRPC upstream
WS_PROXY = ('proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; '
            'proxy_set_header Connection "upgrade";')


def nginx_conf(nginx: str, workdir: Path, listens: list[str], location: str, upstream: int | None,
               keepalive: int = 100000, tls: tuple[Path, Path] | None = None) -> str:
    """One process, no access log, temp paths in workdir (only for the modules this nginx has); with `upstream` an
    `api` upstream block (keepalive 256) for proxy_pass."""
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, timeout=10).stderr
    temp = [f"{m}_temp_path {workdir}/{m};" for m in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            if f"--without-http_{m}_module" not in built]
    api = f"upstream api {{ server 127.0.0.1:{upstream}; keepalive 256; keepalive_requests 100000; }}"
    ssl = f"ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]}; ssl_protocols TLSv1.2 TLSv1.3;" if tls else ""
    return f"""daemon off; master_process off; worker_processes 1;
error_log {workdir}/err.log; pid {workdir}/pid;
events {{ worker_connections 4096; }}
http {{
  access_log off; keepalive_requests {keepalive}; keepalive_timeout 75s;
  {" ".join(temp)}
  {api if upstream else ""}
  server {{
    {" ".join(f"listen 127.0.0.1:{listen};" for listen in listens)} {ssl}
    location / {{ {location} }}
  }}
}}
"""


def haproxy_cfg(port: int, upstream_port: int, public_pem: Path) -> str:
    """HAProxy 2.6: no JWKS, no claim checks of its own: the key is a PEM file, each claim is an ACL. Every jwt_*
    converter call decodes the token again; jwt_verify returns 1 only for a good signature."""
    aud, iss = f"-m str projects/{PROJECT_NUMBER} projects/demo-project", "https://firebaseappcheck.googleapis.com/"
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
  acl jwt_iss var(txn.bearer),jwt_payload_query('$.iss') -m str {iss}{PROJECT_NUMBER}
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


@contextmanager
def pinned(core: int) -> Iterator[None]:
    """Processes started inside inherit affinity to this core alone (what `taskset -c CORE` gives one command)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def free_ports(count: int) -> list[int]:
    """Ports from below the kernel's ephemeral range when it leaves room (20000 up to its start), so that no client
    connection made meanwhile (a gateway's pooled ones included) holds one when a server binds it again."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
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
    """nginx or HAProxy: its config file written and accepted by `check`, then the process, its output in
    stdout.log beside the config, ready once every port accepts; `log_path` is the log worth showing when it fails.
    A server without a config file (nghttpd, the Python upstreams) has `check` None: `text` is its command line."""

    def __init__(self, config: Path, text: str, argv: list[str], check: list[str] | None, core: int,
                 ports: list[int], log_path: Path):
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(text)
        p = subprocess.run(check, capture_output=True, text=True, timeout=30) if check else None
        if p is not None and p.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} config check failed:\n{p.stdout}{p.stderr}")
        self.log_path, output = log_path, config.parent / "stdout.log"
        with open(output, "ab") as out, pinned(core):
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        try:
            for port in ports:
                H.wait_listening(port, self.proc, 10.0, Path(argv[0]).name)
        except RuntimeError as e:
            self.kill()
            raise RuntimeError(f"{e}\n{tail(output)}\n{tail(log_path)}") from None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the group this Proc started, by its id
            self.proc.wait(timeout=5)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
            pass


def log_of(process) -> Path | None:
    return getattr(process, "stderr_path", None) or getattr(process, "log_path", None)


class Proxy:
    """A measured process from `starter(proxy, tag)` on proxy.ports (the tag names a starter's fresh state). `fresh`:
    it starts again on fresh state before each measured run. One on the baseline binary (`base`) that does not start
    or fails its sanity check is `broken`, its rows INVALID; any other failure stops the bench."""

    def __init__(self, name: str, starter: Callable[[Proxy, str], object], ports: list[int], binary: str,
                 dev: list[str], fresh: bool, base: bool):
        self.name, self.starter, self.ports, self.binary, self.dev = name, starter, ports, binary, dev
        self.fresh, self.base, self.current, self.broken = fresh, base, None, ""

    def alive(self) -> bool:
        return self.current is not None and self.current.proc.poll() is None

    def fail(self, why: str) -> None:
        if not self.base:
            die(f"{self.name}: {why}")
        loud(f"{self.name} (BENCH_BASELINE_BIN): {why}\n!!! its rows are INVALID")
        self.kill()
        self.broken, self.current = why.splitlines()[0], None

    def kill(self) -> None:
        if self.current is not None:
            self.current.kill()

    def start(self, tag: str) -> None:
        if self.current is not None and not self.alive():
            print(f"--- {self.name} had exited; its log (last 30 lines):\n{tail(log_of(self.current))}")
        self.kill()
        try:
            self.current = self.starter(self, tag)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
            self.current = None
            self.fail(f"did not start: {e}")

    def ready(self, tag: str) -> bool:
        """Before a measured run: on fresh state where it needs it, else started again if it died in an earlier run
        (which reported it); False when it is broken."""
        if self.broken:
            return False
        if self.fresh:
            self.start(tag)
        elif not self.alive():
            print(f"bench: restarting {self.name}")
            self.start("restart")
        return not self.broken
