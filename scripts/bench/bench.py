#!/usr/bin/env python3
"""Benchmarks attest-gateway as a reverse proxy against nginx proxy_pass and HAProxy 2.6 on loopback (`make bench`;
docs/performance.md describes every row, the environment and the results). The upstream (nginx `return 200`), the
load (wrk -t1 -c64 --latency, h2load for the HTTP/2 rows) and redis-server run on core 1, each proxy under test on
core 0, loaded one after the other, the order reversed every round. Rows: nginx, attest-gateway (plain proxy path);
gw-rs256-distinct|repeated, haproxy-distinct|repeated (RS256 App Check tokens: a new one per request | one);
gw-lu-sqlite, gw-lu-redis, gw-lu-rediss, gw-lu-redis-cluster (limited use; rediss: Redis over TLS; cluster: a three-master
Redis Cluster, the CPU of all three counted); gw-appattest-sqlite (App Attest); gw-h1-h2load, gw-h2c, nginx-h2c,
gw-h2c-mux, nginx-h2c-mux, gw-h2-tls, nginx-h2-tls (h2load: HTTP/1.1, h2c -c64 -m1 and -c8 -m32, h2 over TLS);
gw-play-classic (a Play Integrity classic token decoded in full on every request: AES key unwrap, AES-256-GCM, ECDSA
P-256 verify; `openssl speed` of the three on core 0 after the rounds is its limit); gw-grpc, nginx-grpc (h2load gRPC unary POSTs over h2c -c8 -m16 → the proxy → nghttpd --echo-upload, h2c, on core 1;
nginx: grpc_pass); gw-ws, nginx-ws (ws_echo.py: 20 000 WebSocket messages over 4 connections, each awaiting its echo
from a websockets echo server on core 1; CPU µs per message). Per run: req/s, latency, CPU µs per request =
Δ(utime+stime) of the proxy process / requests completed; a run with a failure, a non-2xx answer, an exhausted
assertion list, unparsable load output, another protocol than asked for, a gRPC answer without its message or a
wrong WebSocket echo makes its row INVALID.

BENCH_BASELINE_BIN=/path/to/an/older/attest-gateway runs every gateway row (attest-gateway, gw-*) on that binary too,
as `<row>@base` right beside the current binary's run in each round (the order reversal includes it), with the same
gateway.yml and its own dev tools (BENCH_BASELINE_DEV_BIN, default: attest-gateway-dev beside it, else `<bin> dev`);
the summary ends with each gateway row's baseline and current medians, current ÷ baseline, and the h2c cost per
request (gw-h2c ÷ gw-h1-h2load CPU µs/req) of both. A baseline gateway that does not start or fails its sanity check
has its rows INVALID; the bench goes on.

Environment (defaults in docs/performance.md): GATEWAY_BIN, GATEWAY_DEV_BIN, BENCH_BASELINE_BIN,
BENCH_BASELINE_DEV_BIN, NGINX_BIN, HAPROXY_BIN, REDIS_BIN, BENCH_SECONDS, BENCH_ROUNDS, BENCH_WARMUP_SECONDS,
BENCH_CONNECTIONS, BENCH_TOKENS, BENCH_APPATTEST_DEVICES, BENCH_APPATTEST_ASSERTIONS, BENCH_H2_MUX_CONNECTIONS,
BENCH_H2_MUX_STREAMS, BENCH_GRPC_UPSTREAM (nghttpd | grpcio), BENCH_GRPC_CONNECTIONS, BENCH_GRPC_STREAMS,
NGHTTPD_BIN, BENCH_WS_CONNECTIONS, BENCH_WS_MESSAGES, and the switches (on unless set to anything but 1)
BENCH_RS256, BENCH_LU, BENCH_APPATTEST, BENCH_PLAY, BENCH_H2, BENCH_H2_TLS, BENCH_GRPC, BENCH_WS. Exits non-zero only when
something fails to start; missing a target is reported, never asserted. Every process it starts has its own process
group, killed by that group's id on exit (Ctrl-C included).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Tests" / "e2e"))   # the e2e harness

import crypto_limit  # noqa: E402
from lab import Lab  # noqa: E402
from peers import log_of, tail  # noqa: E402
from report import Table, print_medians, print_round, summary  # noqa: E402
from settings import Settings, die, loud  # noqa: E402


def version(argv: list[str]) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    return ((p.stdout or p.stderr).splitlines() or [""])[0]


def print_preamble(lab: Lab) -> None:
    s, pids = lab.s, {name: proxy.current.proc.pid for name, proxy in lab.proxies.items() if proxy.current}
    cpu = next((line.split(": ", 1)[1] for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    peers = [f"upstream nginx return 200 (core 1, pid {lab.upstream.proc.pid})",
             version([s.nginx, "-v"]).split(": ")[-1]]
    peers += [" ".join(version([s.haproxy, "-v"]).split()[:3:2]) + " (nbthread 1)"] if s.rs256 else []
    peers += [" ".join(version([s.redis, "--version"]).split()[:3]) + f" (core 1, pid {lab.redis.proc.pid}, no "
              "persistence; a 3-master cluster too, pids " + " ".join(str(n.proc.pid) for n in lab.cluster) + ")"] if s.lu else []
    peers += [version(["h2load", "--version"])] if s.h2 or s.grpc else []
    if s.grpc:
        up = (f"grpcio {version([sys.executable, '-c', 'import grpc; print(grpc.__version__)'])}"
              if s.grpc_upstream == "grpcio" else version([s.nghttpd, "--version"]) + " --echo-upload")
        peers += [f"gRPC upstream {up} (h2c, core 1, pid {lab.grpc_up.proc.pid})"]
    if s.ws:
        ws = version([sys.executable, "-c", "import websockets; print(websockets.__version__)"])
        peers += [f"WebSocket echo upstream websockets {ws} (core 1, pid {lab.ws_up.proc.pid})"]
    print(f"== attest-gateway benchmark\nmachine : {len(os.sched_getaffinity(0))} cores, kernel {os.uname().release}, "
          f"CPU {cpu}\ngateway : {s.gateway} (--workers 1, access log -> /dev/null)"
          + (f"\nbaseline: {s.base} (the same configs; dev tools: {' '.join(s.base_dev)})" if s.base else "")
          + f"\npeers   : {'; '.join(peers)}\nproxies : core 0, pids "
          + ", ".join(f"{name} {pid}" for name, pid in pids.items()) + f"\nstate   : {lab.tmp}")
    if s.rs256:
        print(f"tokens  : {s.tokens} distinct (tokens.lua: measured runs from the start of the list, warm-ups from its "
              f"middle; the limited-use rows' warm-ups from {s.lu_warm} others), 1 repeated (-H); "
              f"{len(lab.tokens.repeated) + 1} bytes each")
    if s.aa:
        print(f"aa      : {s.aa_devices} devices, wrk -t{s.aa_devices} -c{s.aa_devices} (device k = thread k = 1 "
              f"connection); {s.aa_per_warm} assertions per device for warm-ups, then {s.aa_per_run} per measured run")
    switches = {"RS256": s.rs256, "LU": s.lu, "APPATTEST": s.aa, "PLAY": s.play, "H2": s.h2, "H2_TLS": s.h2_tls, "GRPC": s.grpc,
                "WS": s.ws}
    print(f"load    : taskset -c 1 wrk -t1 -c{s.conns} -d{s.seconds}s --latency http://127.0.0.1:<port>/bench, "
          f"h2load -t1 -D {s.seconds}"
          + (f", ws_echo.py -c{s.ws_conns} {s.ws_messages} messages (at most {s.seconds}s)" if s.ws else "")
          + f" (warm-up {s.warmup}s before each run, {s.rounds} rounds, order reverses every round)\n"
          f"command : GATEWAY_BIN={s.gateway} {f'BENCH_BASELINE_BIN={s.base} ' if s.base else ''}"
          f"BENCH_SECONDS={s.seconds} BENCH_ROUNDS={s.rounds} "
          + " ".join(f"BENCH_{k}={int(v)}" for k, v in switches.items()) + f" {sys.argv[0]}\n")


def bench(s: Settings, tmp: Path) -> None:
    lab = Lab(s, tmp)
    try:
        lab.start()
        lab.sanity()
        table = Table(lab.rows())
        print_preamble(lab)
        measured = [r for r in table.rows if not r.skip]
        for k in range(s.rounds):   # every round, the order reversed each time; each round's table as it ends
            order = measured if k % 2 == 0 else measured[::-1]
            for row in order:
                table.runs[row.name].append(lab.run(row, k + 1))
            print_round(table, k, [r.name for r in order])
        print_medians(table, s.rounds)
        table.crypto = crypto_limit.measure(len(lab.tokens.repeated) if s.rs256 else None,
                                            lab.play.ciphertext_bytes if s.play else None)
        print("\n".join(summary(table, s)))
        if table.any_errors():
            loud("SOME RUNS HAD ERRORS (see above): their figures are not comparable")
            processes = [p.current for p in lab.proxies.values()] + [lab.upstream, lab.redis, *lab.cluster, lab.grpc_up, lab.ws_up]
            for log in filter(None, map(log_of, processes)):
                if log.is_file() and log.stat().st_size:
                    print(f"--- {log.relative_to(tmp)} (last 30 lines):\n{tail(log)}")
    finally:
        lab.close()


def main() -> int:
    s = Settings()
    s.check_prerequisites()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="attest-bench."))
    try:
        bench(s, tmp)
        return 0
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, subprocess.CalledProcessError) as e:   # something did not start
        die(f"{e}{e.stderr.decode(errors='replace') if getattr(e, 'stderr', None) else ''}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
