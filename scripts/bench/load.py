"""Load runs on core 1 and what they measure: wrk's `--latency` text and h2load's summary parsed into a Run, the
proxy's CPU from /proc/<pid>/stat (utime + stime, all threads), core 1's busy share from /proc/stat."""

from __future__ import annotations

import os
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from peers import Proxy, pinned
from settings import HERE, Settings, loud

CLK_TCK = os.sysconf("SC_CLK_TCK")
UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def to_us(text: str | None) -> float | None:
    """A wrk or h2load time (812.00us, 1.23ms, 1.01s) in µs."""
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", (text or "").strip())
    return float(m.group(1)) * UNITS_US[m.group(2)] if m else None


def cpu_ticks(pid: int | list[int] | None) -> int | None:
    """utime + stime in clock ticks: fields 14 and 15 of /proc/<pid>/stat, counted after the ')' of comm; for a list
    of pids, their sum (None if any is gone)."""
    if isinstance(pid, list):
        ticks = [cpu_ticks(p) for p in pid]
        return None if not ticks or None in ticks else sum(ticks)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def core1_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of core 1 (busy: all but idle and iowait)."""
    line = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("cpu1 "))
    ticks = [int(v) for v in line.split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


@dataclass
class Run:
    """One measured run: its figures by column (absent when it produced none), its errors (any makes the row
    INVALID) and notes."""
    fig: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, message: str, shout: str) -> None:
        self.errors.append(message)
        loud(shout)


@dataclass(frozen=True)
class WrkLoad:
    conns: int
    threads: int = 1
    header: str | None = None               # one fixed header line (-H)
    script: Path | None = None              # tokens.lua / appattest.lua, configured by env
    env: tuple[tuple[str, str], ...] = ()
    more_headers: tuple[str, ...] = ()      # further fixed header lines (-H each)

    def argv(self, seconds: int, port: int, measured: bool) -> list[str]:
        return (["wrk", f"-t{self.threads}", f"-c{self.conns}", f"-d{seconds}s"] + ["--latency"] * measured
                + (["-H", self.header] if self.header else []) + [a for h in self.more_headers for a in ("-H", h)]
                + (["-s", str(self.script)] if self.script else [])
                + [f"http://127.0.0.1:{port}/bench"])


@dataclass(frozen=True)
class H2Load:
    kind: str            # h1 (--h1), h2c (prior knowledge), mux (h2c, many streams), tls (ALPN h2 only), grpc (h2c)
    conns: int
    streams: int
    path: str = "/bench"
    data: Path | None = None                # a POST body (-d), sent in every request
    headers: tuple[str, ...] = ()           # -H each
    answer: int = 0                         # bytes of DATA every response must carry (0: not checked)
    env = ()

    def argv(self, seconds: int, port: int, measured: bool) -> list[str]:
        proto = {"h1": "--h1", "tls": "--npn-list=h2"}.get(self.kind, "--no-tls-proto=h2c")
        return (["h2load", "-t1", f"-c{self.conns}", f"-m{self.streams}", "-D", str(seconds), proto]
                + (["-d", str(self.data)] if self.data else []) + [a for h in self.headers for a in ("-H", h)]
                + [f"{'https' if self.kind == 'tls' else 'http'}://127.0.0.1:{port}{self.path}"])


@dataclass(frozen=True)
class WsLoad:
    """ws_echo.py's client: `messages` in all over `conns` connections, each awaiting its echo, until all are echoed
    or the run's seconds have passed (a warm-up sends a tenth of them, at least 500)."""
    conns: int
    messages: int
    path: str = "/ws/echo"
    env = ()

    def argv(self, seconds: int, port: int, measured: bool) -> list[str]:
        count = self.messages if measured else max(self.messages // 10, 500)
        return [sys.executable, str(HERE / "ws_echo.py"), "client", f"ws://127.0.0.1:{port}{self.path}",
                "--connections", str(self.conns), "--messages", str(count), "--seconds", str(seconds)]


def on_core1(load: WrkLoad | H2Load | WsLoad, seconds: int, port: int, measured: bool = False) -> str:
    try:
        with pinned(1):
            p = subprocess.run(load.argv(seconds, port, measured), capture_output=True, text=True,
                               timeout=seconds + 60, stdin=subprocess.DEVNULL, env={**os.environ, **dict(load.env)})
    except subprocess.TimeoutExpired:
        return ""
    return p.stdout + p.stderr


def found(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def wraps_in(output: str) -> int:
    """Wrap-arounds summed over the `bench-tokens:` / `bench-appattest:` lines the Lua scripts' done() prints."""
    return sum(int(n) for n in re.findall(r"^bench-(?:tokens|appattest): .*, (\d+) wrap-arounds$", output, re.M))


def parse_wrk(output: str, load: WrkLoad, run: Run) -> int | None:   # the completed requests, as parse_h2load
    reqs, rps = found(r"^\s*(\d+) requests in ", output), found(r"^Requests/sec:\s+([0-9.]+)\s*$", output)
    p50, p99 = (to_us(found(rf"^\s+{p}%\s+(\S+)\s*$", output)) for p in (50, 99))
    if None in (reqs, rps, p50, p99) or int(reqs) == 0:
        return None
    run.fig.update(reqs=int(reqs), rps=float(rps), p50=p50, p99=p99, wraps=wraps_in(output))
    non2xx, sockets = found(r"Non-2xx or 3xx responses:\s*(\d+)", output), found(r"Socket errors:\s*(.+?)\s*$", output)
    run.errors += [f"non-2xx {non2xx}"] * bool(non2xx) + [f"socket {sockets}"] * bool(sockets)
    return int(reqs)


def parse_h2load(output: str, load: H2Load, run: Run) -> int | None:
    """The succeeded requests (None when there is none or a figure is missing); run gets the figures."""
    def count(prefix: str, word: str) -> int | None:   # the number before `word` on a `requests:` … line
        n = found(rf"^{prefix}.*?(\d+) {word}\b", output)
        return None if n is None else int(n)
    rps, ok = found(r"^finished in [^,]+, ([0-9.]+) req/s", output), count("requests:", "succeeded")
    proto = found(r"^Application protocol: (\S+)", output)
    times = (found(r"^time for request:(.*)$", output) or "").split() + ["", "", ""]
    if rps is None or not ok or None in (to_us(times[1]), to_us(times[2])):
        return None
    failed = [count("requests:", w) for w in ("failed", "errored", "timeout")]
    non2xx = [count("status codes:", w) or 0 for w in ("3xx", "4xx", "5xx")]
    tls, cipher = found(r"^TLS Protocol: (\S+)", output), found(r"^Cipher: (\S+)", output)
    want = {"h1": "http/1.1", "tls": "h2"}.get(load.kind, "h2c")
    run.fig.update(rps=float(rps), ok=ok, max=to_us(times[1]), mean=to_us(times[2]),
                   fail_count=sum(n or 0 for n in failed),
                   proto=f"{proto} {tls} {cipher}" if tls else proto)
    if run.fig["fail_count"] or None in failed:
        run.errors.append("failed {}, errored {}, timeout {}".format(*("?" if n is None else n for n in failed)))
    if sum(non2xx):
        run.errors.append("non-2xx {}/{}/{} (3xx/4xx/5xx)".format(*non2xx))
    if proto != want:
        run.errors.append(f"protocol {proto or 'none'}, not {want}")
    if load.answer:   # h2load cannot see trailers; a response without the message (trailers-only) shows here
        data, started = found(r"^traffic:.*\((\d+)\) data$", output), count("requests:", "started")
        run.fig["data"] = None if data is None else int(data)
        if data is None or started is None:
            run.errors.append("no DATA byte count in h2load's output")
        elif int(data) < ok * load.answer:
            run.errors.append(f"DATA {data} bytes for {ok} succeeded (each must carry {load.answer}): "
                              f"{ok - int(data) // load.answer} or more without the message")
        elif int(data) > started * load.answer:
            run.errors.append(f"DATA {data} bytes: more than {started} started requests' {load.answer} each")
    return ok


def parse_ws(output: str, load: WsLoad, run: Run) -> int | None:
    """ws_echo.py's `bench-ws:` line: the messages echoed (None when there is none); run gets the figures."""
    line = found(r"^bench-ws: (\{.*\})\s*$", output)
    try:
        r = json.loads(line) if line else None
    except ValueError:
        r = None
    if not r or not r.get("messages") or not r.get("seconds"):
        run.errors += [f"ws client: {e}" for e in (r or {}).get("errors", [])]
        return None
    run.fig.update(rps=r["messages"] / r["seconds"], ok=r["messages"], mean=r["mean_us"], p99=r["p99_us"],
                   max=r["max_us"], fail_count=r["error_count"])
    if r["error_count"]:
        run.errors.append(f"{r['error_count']} connection(s) failed: " + "; ".join(r["errors"][:2]))
    if r["messages"] < r["asked"] and not r["error_count"]:
        run.notes.append(f"stopped at the time limit: {r['messages']} of {r['asked']} messages")
    return r["messages"]


TOOLS = {WrkLoad: ("wrk", parse_wrk), H2Load: ("h2load", parse_h2load), WsLoad: ("ws client", parse_ws)}


def measure(label: str, proxy: Proxy, port: int, warm: WrkLoad | H2Load | WsLoad, load: WrkLoad | H2Load | WsLoad,
            s: Settings, side_pid: int | list[int] | None = None) -> Run:
    """The warm-up, then the measured load between two readings of the proxy's (and side process's) CPU and of core
    1's; CPU µs per request over the requests the load generator completed (h2load: succeeded; the WebSocket
    client: messages echoed)."""
    run, (tool, parse) = Run(), TOOLS[type(load)]
    run.fig["warm_wraps"] = wraps_in(on_core1(warm, s.warmup, port))
    if not proxy.alive():
        run.fail("died during warm-up", f"{label}: {proxy.name} (pid {proxy.current.proc.pid}) DIED during warm-up")
        return run
    s0, t0, (b0, a0) = cpu_ticks(side_pid), cpu_ticks(proxy.current.proc.pid), core1_ticks()
    output = on_core1(load, s.seconds, port, measured=True)
    s1, t1, (b1, a1) = cpu_ticks(side_pid), cpu_ticks(proxy.current.proc.pid), core1_ticks()
    shown = "\n".join([line for line in output.splitlines() if not line.startswith("progress:")][-25:])
    if t0 is None or t1 is None or not proxy.alive():
        run.fail("died during the measured run", f"{label}: {proxy.name} DIED during the run")
        print(shown)
        return run
    requests = parse(output, load, run)
    if requests is None:
        run.fail(f"no result ({tool} output not understood)", f"{label}: {tool} produced no result")
        print(shown)
        return run
    run.fig.update(cpu=(t1 - t0) / CLK_TCK * 1e6 / requests, cpus=(t1 - t0) / CLK_TCK,
                   core1=(b1 - b0) * 100 / (a1 - a0) if a1 > a0 else None)
    if None not in (s0, s1):   # with no side process both are None (/proc/None/stat)
        run.fig["scpu"] = (s1 - s0) / CLK_TCK * 1e6 / requests
    if run.errors:
        loud(f"{label}: {tool} reported ERRORS: {'; '.join(run.errors)}: the row is INVALID")
    return run
