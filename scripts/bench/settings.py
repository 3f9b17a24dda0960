"""The bench's settings from the environment (docs/performance.md lists it), the dev tools' command line, die, loud."""

from __future__ import annotations

import math
import os
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
PROJECT_NUMBER = "123456789012"   # of the minted tokens (mint_tokens.py) and of both RS256 verifiers
AA_TEAM, AA_BUNDLE, AA_REG = "BENCH12345", "com.example.bench", "/.attest/ios"
PLAY_PACKAGE = "com.example.bench"   # of the Play Integrity row's classic token and verifier


def die(message: str) -> NoReturn:
    print(f"bench: ERROR: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def loud(message: str) -> None:
    print(f"\n{'!' * 72}\n!!! {message}\n{'!' * 72}\n", flush=True)


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def dev_command(gateway: str, env: str) -> list[str]:
    """The dev tools (`appattest ca …`) of a gateway binary: $env if set, else the attest-gateway-dev beside it if
    there is one, else `<gateway> dev` (from before the dev tools had an executable of their own)."""
    beside = str(Path(gateway).parent / "attest-gateway-dev")
    return [os.environ[env]] if os.environ.get(env) else [beside] if executable(beside) else [gateway, "dev"]


def number(name: str, default: int) -> int:
    raw = os.environ.get(name) or str(default)
    if not raw.isdigit() or int(raw) < 1:
        die(f"{name}={raw!r}: must be a positive integer")
    return int(raw)


def on(name: str) -> bool:
    return os.environ.get(name, "1") == "1"   # a switch is on unless set to anything but 1


class Settings:
    def __init__(self) -> None:
        env = os.environ.get
        self.gateway = env("GATEWAY_BIN") or str(HERE.parents[1] / ".build" / "release" / "attest-gateway")
        self.dev = dev_command(self.gateway, "GATEWAY_DEV_BIN")
        self.base = env("BENCH_BASELINE_BIN", "")
        self.base_dev = dev_command(self.base, "BENCH_BASELINE_DEV_BIN") if self.base else []
        self.nginx = env("NGINX_BIN") or shutil.which("nginx") or "/usr/sbin/nginx"
        self.haproxy = env("HAPROXY_BIN") or shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.redis = env("REDIS_BIN") or shutil.which("redis-server") or "/usr/bin/redis-server"
        self.seconds, self.rounds = number("BENCH_SECONDS", 10), number("BENCH_ROUNDS", 3)
        self.warmup, self.conns = number("BENCH_WARMUP_SECONDS", 1), number("BENCH_CONNECTIONS", 64)
        self.tokens = number("BENCH_TOKENS", max(self.seconds * 30000, 20000))
        self.rs256 = on("BENCH_RS256")
        self.lu = self.rs256 and on("BENCH_LU")
        self.aa, self.aa_devices = on("BENCH_APPATTEST"), number("BENCH_APPATTEST_DEVICES", 8)
        self.aa_assertions = number("BENCH_APPATTEST_ASSERTIONS", self.seconds * 20000)
        self.h2 = on("BENCH_H2")
        self.h2_tls = self.h2 and on("BENCH_H2_TLS")
        self.mux_conns, self.mux_streams = number("BENCH_H2_MUX_CONNECTIONS", 8), number("BENCH_H2_MUX_STREAMS", 32)
        self.grpc, self.grpc_upstream = on("BENCH_GRPC"), env("BENCH_GRPC_UPSTREAM") or "nghttpd"
        self.grpc_conns, self.grpc_streams = number("BENCH_GRPC_CONNECTIONS", 8), number("BENCH_GRPC_STREAMS", 16)
        self.nghttpd = env("NGHTTPD_BIN") or shutil.which("nghttpd") or "/usr/sbin/nghttpd"
        self.ws, self.ws_conns = on("BENCH_WS"), number("BENCH_WS_CONNECTIONS", 4)
        self.play = on("BENCH_PLAY")
        self.ws_messages = number("BENCH_WS_MESSAGES", 20000)
        # the limited-use rows' own warm-up tokens (never sent in a measured run); assertions per device
        self.lu_warm = max(self.warmup * 30000, 5000) if self.lu else 0
        self.aa_per_warm = math.ceil(max(self.warmup * 20000, 5000) / self.aa_devices)
        self.aa_per_run = math.ceil(self.aa_assertions / self.aa_devices)

    def check_prerequisites(self) -> None:
        for what, path, needed, off in [
                ("gateway binary", self.gateway, True, ""), ("BENCH_BASELINE_BIN", self.base, bool(self.base), ""),
                ("nginx", self.nginx, True, ""), ("haproxy", self.haproxy, self.rs256, "BENCH_RS256=0"),
                ("redis-server", self.redis, self.lu, "BENCH_LU=0"), ("wrk", shutil.which("wrk") or "wrk", True, ""),
                ("h2load", shutil.which("h2load") or "h2load", self.h2, "BENCH_H2=0"),
                ("nghttp", shutil.which("nghttp") or "nghttp", self.h2, "BENCH_H2=0"),
                ("openssl", shutil.which("openssl") or "openssl", self.h2_tls, "BENCH_H2_TLS=0"),
                ("openssl", shutil.which("openssl") or "openssl", self.play, "BENCH_PLAY=0"),
                ("h2load", shutil.which("h2load") or "h2load", self.grpc, "BENCH_GRPC=0"),
                ("nghttp", shutil.which("nghttp") or "nghttp", self.grpc, "BENCH_GRPC=0"),
                ("nghttpd", self.nghttpd, self.grpc and self.grpc_upstream == "nghttpd", "BENCH_GRPC=0")]:
            if needed and not executable(path):
                die(f"{what} not found at {path} (run: make build / scripts/install-deps.sh bench"
                    + (f", or {off})" if off else ")"))
        if self.rs256 and find_spec("cryptography") is None:
            die("python cryptography missing, the token minter needs it (run: scripts/install-deps.sh bench)")
        if self.grpc and self.grpc_upstream not in ("nghttpd", "grpcio"):
            die(f"BENCH_GRPC_UPSTREAM={self.grpc_upstream!r}: must be nghttpd or grpcio")
        if self.grpc and self.grpc_upstream == "grpcio" and find_spec("grpc") is None:
            die("python grpcio missing, BENCH_GRPC_UPSTREAM=grpcio needs it (pip install grpcio, or BENCH_GRPC=0)")
        if self.ws and find_spec("websockets") is None:
            die("python websockets missing, the WebSocket rows need it (run: scripts/install-deps.sh bench, or "
                "BENCH_WS=0)")
        if not {0, 1} <= os.sched_getaffinity(0):
            die("needs cores 0 and 1 for the pinning (core 0: proxy, core 1: load + upstream)")
