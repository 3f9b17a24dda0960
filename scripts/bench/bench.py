#!/usr/bin/env python3
"""Benchmarks attest-gateway as a reverse proxy against nginx proxy_pass and HAProxy 2.6 on loopback (`make bench`;
docs/performance.md describes every row and has the results). The upstream (nginx `return 200`), the load (wrk
-t1 -c64 --latency, h2load for the HTTP/2 rows) and redis-server run on core 1, each proxy under test on core 0,
loaded one after the other, the order reversed every round:

  nginx, attest-gateway                   proxy_pass and the gateway's plain proxy path, no token
  gw-rs256-distinct|repeated              app_check verifier (RS256, jwks_file): a new token per request | one token
  haproxy-distinct|repeated               HAProxy jwt_verify + claim ACLs, the same two loads
  gw-lu-sqlite, gw-lu-redis               the RS256 route with limited_use: true, on a fresh store before each run
  gw-appattest-sqlite                     app_attest verifier (binding: request): a fresh assertion per request
  gw-h1-h2load, gw-h2c, nginx-h2c, gw-h2c-mux, nginx-h2c-mux, gw-h2-tls, nginx-h2-tls   h2load: HTTP/1.1, h2c
                                          (-c64 -m1, and -c8 -m32: multiplexing), h2 over TLS (ALPN h2)

Per run: req/s, latency (wrk p50/p99, h2load mean/max), CPU µs per request = Δ(utime+stime) of the proxy process
(/proc/<pid>/stat, all threads) / requests completed. A run with a failure, a non-2xx answer, an exhausted assertion
list, unparsable load output or another protocol than asked for makes its row INVALID in the median table.

Environment: GATEWAY_BIN (.build/release/attest-gateway), GATEWAY_DEV_BIN (the dev tools: default attest-gateway-dev
beside GATEWAY_BIN, else `GATEWAY_BIN dev`), NGINX_BIN, HAPROXY_BIN, REDIS_BIN, REDIS_CLI (default: on PATH),
BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (1), BENCH_CONNECTIONS (64), BENCH_TOKENS (22000 x
BENCH_SECONDS, at least 20000), BENCH_RS256 (1; 0 skips the token rows, HAProxy and the limited-use rows), BENCH_LU (1),
BENCH_APPATTEST (1), BENCH_APPATTEST_DEVICES (8), BENCH_APPATTEST_ASSERTIONS (per measured run: 20000 x BENCH_SECONDS),
BENCH_H2 (1), BENCH_H2_TLS (1), BENCH_H2_MUX_CONNECTIONS (8), BENCH_H2_MUX_STREAMS (32); a switch is off unless 1.
Exits non-zero only when something fails to start; missing a target is reported, never asserted. Every process it
starts has its own process group, killed by that group's id on exit (Ctrl-C included).
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

import sanity  # noqa: E402
from lab import Lab, Row, h2_rows, run_row, wrk_rows  # noqa: E402
from material import make_app_attest, mint_tokens, tls_pair  # noqa: E402
from peers import log_of, tail  # noqa: E402
from report import Rows, print_medians, print_round, summary  # noqa: E402
from settings import Settings, check_prerequisites, loud, settings_from_env  # noqa: E402


def version(argv: list[str]) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    return ((p.stdout or p.stderr).splitlines() or [""])[0]


def print_preamble(lab: Lab) -> None:
    s, pid, tmp = lab.s, {name: proxy.pid for name, proxy in lab.proxies.items()}, lab.tmp
    cpu = next((l.split(": ", 1)[1] for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    print(f"== attest-gateway benchmark\nmachine : {len(os.sched_getaffinity(0))} cores, kernel {os.uname().release}, "
          f"CPU {cpu}\ngateway : {s.gateway} (pid {pid['attest-gateway']}, core 0, --workers 1, access log -> "
          "/dev/null)"
          f"\nnginx   : {version([s.nginx, '-v']).split(': ')[-1]} proxy_pass (pid {pid['nginx']}, core 0); upstream "
          f"nginx return 200 (pid {lab.upstream.proc.pid}, core 1)")
    if s.rs256:
        haproxy = version([s.haproxy, "-v"]).split()
        print(f"rs256   : gateway with app_check verifier (pid {pid['gw-rs256']}, core 0); {haproxy[0]} {haproxy[2]} "
              f"jwt_verify (pid {pid['haproxy']}, core 0, nbthread 1)\ntokens  : {s.tokens} distinct (scripts/bench/"
              "tokens.lua, measured runs from the start of the list, warm-ups from its middle), 1 repeated (-H); "
              f"{len(lab.tokens.repeated) + 1} bytes each")
    if s.lu:
        fs = subprocess.run(["df", "-PT", str(tmp)], capture_output=True, text=True).stdout.split()[-6]
        print("lu      : gw-lu-sqlite / gw-lu-redis: the rs256 gateway + limited_use: true (core 0), restarted before "
              f"each run on a new\n          SQLite file in {tmp}/lu ({fs}) / a flushed redis + new key_prefix; "
              f"warm-ups from a separate\n          {s.lu_warm}-token slice; "
              f"{' '.join(version([s.redis, '--version']).split()[:3])} (pid {lab.redis.proc.pid}, core 1, no "
              "persistence)")
    if s.aa:
        print("aa      : gw-appattest-sqlite: app_attest verifier, binding request (core 0), restarted before each run "
              f"on a new SQLite\n          file in {tmp}/aa, its {s.aa_devices} devices registered again; wrk "
              f"-t{s.aa_devices} -c{s.aa_devices} (device k = thread k = 1 connection);\n          {s.aa_per_warm} "
              f"assertions per device for warm-ups, then {s.aa_per_run} for the measured run (from counter "
              f"{s.aa_per_warm + 1})")
    if s.h2:
        tls = f", *-h2-tls --npn-list=h2 -c{s.conns} -m1 (P-256, e2e test CA)" if s.h2_tls else ""
        print(f"h2      : {version(['h2load', '--version'])}, taskset -c 1 h2load -t1 -D {s.seconds}s (where wrk "
              f"runs): gw-h1-h2load --h1 -c{s.conns} -m1 on the\n          plain gateway; http2 gateway (pid "
              f"{pid['gw-h2']}, core 0, --workers 1) and nginx h2 proxy_pass (pid {pid['nginx-h2']}, core 0):\n"
              f"          *-h2c -c{s.conns} -m1, *-h2c-mux -c{s.mux_conns} -m{s.mux_streams} (h2c prior "
              f"knowledge){tls}")
    switches = {"RS256": s.rs256, "LU": s.lu, "APPATTEST": s.aa, "H2": s.h2, "H2_TLS": s.h2_tls}
    print(f"load    : taskset -c 1 wrk -t1 -c{s.conns} -d{s.seconds}s --latency http://127.0.0.1:<port>/bench   "
          f"(warm-up {s.warmup}s before each run, {s.rounds} rounds, order reverses every round)\ncommand : "
          f"GATEWAY_BIN={s.gateway} BENCH_SECONDS={s.seconds} BENCH_ROUNDS={s.rounds} "
          + " ".join(f"BENCH_{k}={int(v)}" for k, v in switches.items()) + f" {sys.argv[0]}\n")


def print_summary(lab: Lab, table: Rows) -> None:
    print_medians(table, lab.s.rounds, lab.s.lu)
    print("\n".join(summary(table, lab.s)))
    if table.any_errors():
        loud("SOME RUNS HAD ERRORS (see above): their figures are not comparable")
        for log in filter(None, map(log_of, [p.current for p in lab.proxies.values()] + lab.others)):
            if log.is_file() and log.stat().st_size:
                print(f"--- {log.relative_to(lab.tmp)} (last 30 lines):\n{tail(log)}")


def measure(lab: Lab, rows: list[Row]) -> Rows:
    """Every round, the order reversed each time; each round's table as it ends."""
    table = Rows(wrk=[r.name for r in rows if r.wrk], h2={r.name: r.h2_desc for r in rows if r.h2},
                 skipped={r.name: r.skip for r in rows if r.skip})
    measured = [r for r in rows if not r.skip]
    for k in range(lab.s.rounds):
        order = measured if k % 2 == 0 else measured[::-1]
        for row in order:
            table.runs.setdefault(row.name, []).append(run_row(lab, row, k + 1))
        print_round(table, k, [r.name for r in order], lab.s.lu, lab.s.aa)
    return table


def bench(s: Settings, tmp: Path) -> int:
    tokens = mint_tokens(s, tmp) if s.rs256 else None
    tls = tls_pair(tmp) if s.h2_tls else None
    lab = Lab(s, tmp, tokens, make_app_attest(s, tmp) if s.aa else None, tls)
    try:
        lab.start_all()
        h2c, h2_tls = sanity.check_all(lab)
        rows = wrk_rows(lab) + (h2_rows(lab, h2c, h2_tls) if s.h2 else [])
        print_preamble(lab)
        print_summary(lab, measure(lab, rows))
    finally:
        lab.close()
    return 0


def main() -> int:
    s = settings_from_env()
    check_prerequisites(s)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="attest-bench."))
    try:
        return bench(s, tmp)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
