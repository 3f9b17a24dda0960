"""Load runs on core 1 and what they measure: wrk (`--latency` text) and h2load output parsed into records, the
proxy's CPU from /proc/<pid>/stat (utime + stime, all threads), core 1's busy share from /proc/stat."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from peers import Proxy, pinned
from settings import loud

CLK_TCK = os.sysconf("SC_CLK_TCK")
UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def to_us(text: str) -> float | None:
    """A wrk or h2load time (812.00us, 1.23ms, 1.01s) in µs."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text.strip())
    return float(m.group(1)) * UNITS_US[m.group(2)] if m else None


def cpu_ticks(pid: int | None) -> int | None:
    """utime + stime in clock ticks: fields 14 and 15 of /proc/<pid>/stat, counted after the ')' of comm."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def core_ticks(core: int) -> tuple[int, int]:
    """(busy, total) clock ticks of that core (busy: all but idle and iowait)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            ticks = [int(v) for v in line.split()[1:]]
            return sum(ticks) - ticks[3] - ticks[4], sum(ticks)
    return 0, 0


def run_on_core1(argv: list[str], seconds: int, env: tuple[tuple[str, str], ...] = ()) -> str:
    """stdout + stderr of a load generator, which is killed after seconds + 60 ("" then)."""
    try:
        with pinned(1):
            p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, stdin=subprocess.DEVNULL,
                               env={**os.environ, **dict(env)})
    except subprocess.TimeoutExpired:
        return ""
    return p.stdout + p.stderr


@dataclass
class Run:
    """One measured run of one row; figures stay None when it produced none."""
    rps: float | None = None
    cpu: float | None = None            # CPU µs of the proxy per completed request
    cpus: float | None = None           # CPU seconds of the proxy during the run
    errors: list[str] = field(default_factory=list)   # any of them makes the row INVALID
    notes: list[str] = field(default_factory=list)

    def fail(self, message: str, shout: str | None = None) -> None:
        self.errors.append(message)
        if shout:
            loud(shout)

    def count_cpu(self, ticks: int, requests: int) -> None:
        self.cpu, self.cpus = ticks / CLK_TCK * 1e6 / requests, ticks / CLK_TCK


@dataclass
class WrkRun(Run):
    p50: float | None = None
    p99: float | None = None
    reqs: int | None = None
    scpu: float | None = None           # CPU µs per request of the side process (redis-server)
    stored: int | None = None           # assertions the App Attest store accepted
    wraps: int = 0                      # times a Lua script's list started over in the measured run
    warm_wraps: int = 0                 # the same in the warm-up


@dataclass
class H2Run(Run):
    mean: float | None = None
    max: float | None = None
    core1: float | None = None
    ok: int | None = None
    fail_count: int | None = None
    proto: str | None = None


@dataclass(frozen=True)
class WrkLoad:
    conns: int
    threads: int = 1
    header: str | None = None               # one fixed header line (-H)
    script: Path | None = None              # tokens.lua / appattest.lua, configured by env
    env: tuple[tuple[str, str], ...] = ()

    def run(self, seconds: int, port: int, latency: bool = False) -> str:
        return run_on_core1(["wrk", f"-t{self.threads}", f"-c{self.conns}", f"-d{seconds}s"]
                            + ["--latency"] * latency + (["-H", self.header] if self.header else [])
                            + (["-s", str(self.script)] if self.script else []) + [f"http://127.0.0.1:{port}/bench"],
                            seconds, self.env)


@dataclass(frozen=True)
class H2Load:
    kind: str            # h1 (--h1), h2c (prior knowledge), mux (h2c, many streams), tls (ALPN h2 only)
    conns: int
    streams: int
    port: int

    def run(self, seconds: int) -> str:
        proto = {"h1": "--h1", "tls": "--npn-list=h2"}.get(self.kind, "--no-tls-proto=h2c")
        return run_on_core1(["h2load", "-t1", f"-c{self.conns}", f"-m{self.streams}", "-D", str(seconds), proto,
                             f"{'https' if self.kind == 'tls' else 'http'}://127.0.0.1:{self.port}/bench"], seconds)


@dataclass
class Sample:
    warm_output: str
    output: str
    ticks: int
    side_ticks: int | None
    core1: float | None


def sample(label: str, proxy: Proxy, warm, measure, run: Run, side_pid: int | None = None) -> Sample | None:
    """The warm-up, then the measured load between two readings of the proxy's (and side's) CPU and of core 1."""
    warm_output = warm()
    if not proxy.alive():
        run.fail("died during warm-up", f"{label}: {proxy.name} (pid {proxy.pid}) DIED during warm-up")
        return None
    s0, t0, (b0, a0) = cpu_ticks(side_pid), cpu_ticks(proxy.pid), core_ticks(1)
    output = measure()
    s1, t1, (b1, a1) = cpu_ticks(side_pid), cpu_ticks(proxy.pid), core_ticks(1)
    if t0 is None or t1 is None or not proxy.alive():
        run.fail("died during the measured run", f"{label}: {proxy.name} (pid {proxy.pid}) DIED during the run")
        print("\n".join(output.splitlines()[-20:]))
        return None
    return Sample(warm_output, output, t1 - t0, s1 - s0 if None not in (s0, s1) else None,
                  (b1 - b0) * 100 / (a1 - a0) if a1 > a0 else None)


def found(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def wraps_in(output: str) -> int:
    """Wrap-arounds summed over the `bench-tokens:` / `bench-appattest:` lines the Lua scripts' done() prints."""
    return sum(int(n) for n in re.findall(r"^bench-(?:tokens|appattest): .*, (\d+) wrap-arounds$", output, re.M))


def parse_wrk(output: str, run: WrkRun) -> bool:
    """Fills run from wrk --latency output; False (run unchanged) when a figure is missing."""
    reqs, rps = found(r"^\s*(\d+) requests in ", output), found(r"^Requests/sec:\s+([0-9.]+)\s*$", output)
    p50, p99 = (to_us(found(rf"^\s+{p}%\s+(\S+)\s*$", output) or "") for p in (50, 99))
    if None in (reqs, rps, p50, p99) or int(reqs) == 0:
        return False
    run.reqs, run.rps, run.p50, run.p99, run.wraps = int(reqs), float(rps), p50, p99, wraps_in(output)
    non2xx, sockets = found(r"Non-2xx or 3xx responses:\s*(\d+)", output), found(r"Socket errors:\s*(.+?)\s*$", output)
    run.errors += [f"non-2xx {non2xx}"] * bool(non2xx) + [f"socket {sockets}"] * bool(sockets)
    return True


def measure_wrk(label: str, proxy: Proxy, port: int, warm: WrkLoad, load: WrkLoad, seconds: int, warmup: int,
                side_pid: int | None = None) -> WrkRun:
    run = WrkRun()
    got = sample(label, proxy, lambda: warm.run(warmup, port), lambda: load.run(seconds, port, True), run, side_pid)
    if got is None:
        return run
    run.warm_wraps = wraps_in(got.warm_output)
    if not parse_wrk(got.output, run):
        run.fail("no result (wrk output not understood)", f"{label}: wrk produced no result")
        print(got.output)
        return run
    run.count_cpu(got.ticks, run.reqs)
    run.scpu = got.side_ticks / CLK_TCK * 1e6 / run.reqs if got.side_ticks is not None else None
    if run.errors:
        loud(f"{label}: wrk reported ERRORS: {'; '.join(run.errors)}")
    return run


def h2load_count(output: str, prefix: str, word: str) -> int | None:
    """The number before `word` on h2load's `requests:` or `status codes:` line."""
    n = found(rf"^{prefix}.*?(\d+) {word}\b", output)
    return None if n is None else int(n)


def parse_h2load(output: str, want: str, run: H2Run) -> bool:
    """Fills run from h2load's summary; False when it has no succeeded request or a figure is missing."""
    rps, ok = found(r"^finished in [^,]+, ([0-9.]+) req/s", output), h2load_count(output, "requests:", "succeeded")
    times = (found(r"^time for request:(.*)$", output) or "").split()
    run.proto = found(r"^Application protocol: (\S+)", output)
    if rps is None or not ok or len(times) < 3 or None in (to_us(times[1]), to_us(times[2])):
        return False
    run.rps, run.ok, run.max, run.mean = float(rps), ok, to_us(times[1]), to_us(times[2])
    failed = [h2load_count(output, "requests:", w) for w in ("failed", "errored", "timeout")]
    non2xx = [h2load_count(output, "status codes:", w) or 0 for w in ("3xx", "4xx", "5xx")]
    run.fail_count = sum(n or 0 for n in failed)
    if run.fail_count or None in failed:
        run.errors.append("failed {}, errored {}, timeout {}".format(*("?" if n is None else n for n in failed)))
    if sum(non2xx):
        run.errors.append("non-2xx {}/{}/{} (3xx/4xx/5xx)".format(*non2xx))
    if run.proto != want:
        run.errors.append(f"protocol {run.proto or 'none'}, not {want}")
    tls, cipher = found(r"^TLS Protocol: (\S+)", output), found(r"^Cipher: (\S+)", output)
    if tls:
        run.proto = f"{run.proto} {tls} {cipher}"
    return True


def measure_h2(label: str, proxy: Proxy, load: H2Load, seconds: int, warmup: int) -> H2Run:
    run = H2Run()
    got = sample(label, proxy, lambda: load.run(warmup), lambda: load.run(seconds), run)
    if got is None:
        return run
    if not parse_h2load(got.output, {"h1": "http/1.1", "tls": "h2"}.get(load.kind, "h2c"), run):
        run.fail(f"no result (protocol {run.proto})", f"{label}: h2load produced no successful request")
        print("\n".join([l for l in got.output.splitlines() if not l.startswith("progress:")][-25:]))
        return run
    run.count_cpu(got.ticks, run.ok)
    run.core1 = got.core1
    if run.errors:
        loud(f"{label}: h2load reported ERRORS: {'; '.join(run.errors)} the row is INVALID")
    return run
