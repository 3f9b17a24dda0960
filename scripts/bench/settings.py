"""The bench's settings from the environment (listed in bench.py), the one way to call the gateway's dev tools, and
the two ways the bench speaks up (die, loud)."""

from __future__ import annotations

import math
import os
import shutil
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TOKEN_PROJECT_NUMBER = "123456789012"   # must match mint_tokens.py
AA_TEAM, AA_BUNDLE, AA_REG = "BENCH12345", "com.example.bench", "/.attest/ios"
DEPS = "run: scripts/install-deps.sh bench"


def die(message: str) -> NoReturn:
    print(f"bench: ERROR: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def loud(message: str) -> None:
    print(f"\n{'!' * 72}\n!!! {message}\n{'!' * 72}\n", flush=True)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name) or str(default)
    if not raw.isdigit() or int(raw) < 1:
        die(f"{name}={raw!r}: must be a positive integer")
    return int(raw)


def env_on(name: str) -> bool:
    """A switch, on unless set to anything but 1."""
    return os.environ.get(name, "1") == "1"


def program(env: str, name: str, directory: str) -> str:
    return os.environ.get(env) or shutil.which(name) or f"{directory}/{name}"


def gateway_bin() -> str:
    return os.environ.get("GATEWAY_BIN") or str(REPO / ".build" / "release" / "attest-gateway")


def dev_command(*args: str) -> list[str]:
    """argv of a dev-tool call (`appattest ca …`): GATEWAY_DEV_BIN if set, else the attest-gateway-dev beside
    GATEWAY_BIN if there is one, else `GATEWAY_BIN dev` (from before the dev tools had an executable of their own)."""
    beside = Path(gateway_bin()).parent / "attest-gateway-dev"
    if os.environ.get("GATEWAY_DEV_BIN"):
        return [os.environ["GATEWAY_DEV_BIN"], *args]
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside), *args]
    return [gateway_bin(), "dev", *args]


@dataclass(frozen=True)
class Settings:
    gateway: str
    nginx: str
    haproxy: str
    redis: str
    redis_cli: str
    seconds: int
    rounds: int
    warmup: int
    conns: int
    tokens: int
    rs256: bool
    lu: bool
    aa: bool
    aa_devices: int
    aa_assertions: int
    h2: bool
    h2_tls: bool
    mux_conns: int
    mux_streams: int

    @property
    def lu_warm(self) -> int:
        """Tokens of the limited-use rows' own warm-up slice (never sent in a measured run)."""
        return max(self.warmup * 22000, 5000) if self.lu else 0

    @property
    def aa_per_warm(self) -> int:
        return math.ceil(max(self.warmup * 20000, 5000) / self.aa_devices)

    @property
    def aa_per_run(self) -> int:
        return math.ceil(self.aa_assertions / self.aa_devices)


def settings_from_env() -> Settings:
    seconds, rs256, h2 = env_int("BENCH_SECONDS", 10), env_on("BENCH_RS256"), env_on("BENCH_H2")
    return Settings(
        gateway=gateway_bin(), nginx=program("NGINX_BIN", "nginx", "/usr/sbin"),
        haproxy=program("HAPROXY_BIN", "haproxy", "/usr/sbin"), redis=program("REDIS_BIN", "redis-server", "/usr/bin"),
        redis_cli=program("REDIS_CLI", "redis-cli", "/usr/bin"), seconds=seconds, rounds=env_int("BENCH_ROUNDS", 3),
        warmup=env_int("BENCH_WARMUP_SECONDS", 1), conns=env_int("BENCH_CONNECTIONS", 64),
        tokens=env_int("BENCH_TOKENS", max(seconds * 22000, 20000)), rs256=rs256, lu=rs256 and env_on("BENCH_LU"),
        aa=env_on("BENCH_APPATTEST"), aa_devices=env_int("BENCH_APPATTEST_DEVICES", 8),
        aa_assertions=env_int("BENCH_APPATTEST_ASSERTIONS", seconds * 20000), h2=h2,
        h2_tls=h2 and env_on("BENCH_H2_TLS"),
        mux_conns=env_int("BENCH_H2_MUX_CONNECTIONS", 8), mux_streams=env_int("BENCH_H2_MUX_STREAMS", 32))


def check_prerequisites(s: Settings) -> None:
    """Everything the selected rows need, before anything starts."""
    programs = [("gateway binary", s.gateway, True, "run: make build"), ("nginx", s.nginx, True, DEPS),
                ("haproxy", s.haproxy, s.rs256, DEPS), ("redis-server", s.redis, s.lu, DEPS + ", or BENCH_LU=0"),
                ("redis-cli", s.redis_cli, s.lu, DEPS + ", or BENCH_LU=0")]
    programs += [(tool, shutil.which(tool) or tool, needed, DEPS + hint) for tool, needed, hint in (
        ("wrk", True, ""), ("h2load", s.h2, ", or BENCH_H2=0"), ("nghttp", s.h2, ", or BENCH_H2=0"),
        ("openssl", s.h2_tls, ", or BENCH_H2_TLS=0"))]
    for what, path, needed, hint in programs:
        if needed and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            die(f"{what} not found at {path} ({hint})")
    if s.rs256 and find_spec("cryptography") is None:
        die(f"python cryptography missing, the token minter needs it ({DEPS})")
    if not {0, 1} <= os.sched_getaffinity(0):
        die("needs cores 0 and 1 for the pinning (core 0: proxy, core 1: load + upstream)")
