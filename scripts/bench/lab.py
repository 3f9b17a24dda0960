"""One bench run's peers and rows: the nginx upstream and redis-server on core 1, each proxy under test on core 0 (a
Proxy from one of Lab's starters; the limited-use and App Attest ones start again on fresh state before each measured
run), and each row: the proxy it loads, its load, and what must hold after each of its measured runs."""

from __future__ import annotations

import itertools
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import peers as P
from material import AppAttest, Tokens, register_device
from peers import Proxy, free_ports, start_gateway, start_haproxy, start_nginx, start_redis
from load import H2Load, Run, WrkLoad, WrkRun, measure_h2, measure_wrk
from settings import HERE, Settings, die, loud

PORT_NAMES = ("upstream", "nginx", "gateway", "rs256", "haproxy", "lu-sqlite", "lu-redis", "redis", "aa",
              "h2-gateway", "h2-gateway-tls", "h2-nginx", "h2-nginx-tls")


class Lab:
    def __init__(self, s: Settings, tmp: Path, tokens: Tokens | None, aa: AppAttest | None,
                 tls: tuple[Path, Path] | None):
        self.s, self.tmp, self.tokens, self.aa, self.tls = s, tmp, tokens, aa, tls
        self.ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES))))
        self.proxies: dict[str, Proxy] = {}
        self.others: list = []                     # the upstream, redis-server
        self.lu_seq = itertools.count(1)
        self.aa_db: Path | None = None

    def close(self) -> None:
        """Kills every process it started (each by its process group)."""
        for process in [*self.proxies.values(), *self.others]:
            process.kill()

    def start(self, name: str, starter, tag: str = "start") -> None:
        self.proxies[name] = Proxy(name, starter)
        self.proxies[name].start(tag)

    def start_all(self) -> None:
        s, up = self.s, self.ports["upstream"]
        self.temp_paths = P.nginx_temp_paths(s.nginx, self.tmp)
        self.upstream = self.nginx("upstream", "upstream", [str(up)], P.UPSTREAM, 1, upstream=None)
        self.others.append(self.upstream)
        self.start("nginx", lambda tag: self.nginx("nginx proxy", "nginxproxy", [str(self.ports["nginx"])], P.PROXY))
        self.start("attest-gateway", lambda tag: self.gateway("gateway", "gateway"))
        if s.rs256:
            self.start("gw-rs256", lambda tag: self.gateway("gateway-rs256", "rs256", verifiers=self.app_check()))
            self.start("haproxy", self.haproxy)
        if s.h2:
            self.start("nginx-h2", self.h2_nginx)
            self.start("gw-h2", self.h2_gateway)
        if s.lu:
            self.redis = start_redis(s.redis, self.tmp / "redis", self.ports["redis"])
            self.others.append(self.redis)
            self.start("gw-lu-sqlite", self.lu_sqlite_gateway, "sanity")
            self.start("gw-lu-redis", self.lu_redis_gateway, "sanity")
        if s.aa:
            self.start("gw-appattest-sqlite", self.aa_gateway, "sanity")

    def nginx(self, name: str, workdir: str, listens: list[str], location: str, core: int = 0, **conf):
        """nginx (the upstream on core 1, a proxy_pass on core 0), ready once each listen's port accepts."""
        conf.setdefault("upstream", self.ports["upstream"])
        text = P.nginx_conf(self.tmp / workdir, self.temp_paths, listens, location, **conf)
        return start_nginx(name, self.s.nginx, self.tmp / workdir, text, core, [int(l.split()[0]) for l in listens])

    def h2_nginx(self, tag: str):
        """keepalive_requests also bounds the streams of one HTTP/2 connection in 1.22: raised so that no connection
        is closed within a run."""
        p = self.ports
        listens = [f"{p['h2-nginx']} http2"] + ([f"{p['h2-nginx-tls']} ssl http2"] if self.tls else [])
        return self.nginx("nginx h2", "nginxh2", listens, P.PROXY, keepalive=100000000, tls=self.tls)

    def haproxy(self, tag: str):
        cfg = P.haproxy_cfg(self.ports["haproxy"], self.ports["upstream"], self.tokens.dir / "public.pem")
        return start_haproxy(self.s.haproxy, self.tmp / "haproxy", cfg, self.ports["haproxy"])

    def app_check(self) -> dict:
        return P.app_check_verifier(self.tokens.dir / "jwks.json")

    def gateway(self, workdir: str, port: str, **cfg):
        config = P.gateway_yaml([{"address": f"127.0.0.1:{self.ports[port]}"}], self.ports["upstream"], **cfg)
        return start_gateway(self.s.gateway, self.tmp / workdir, config)

    def h2_gateway(self, tag: str):
        """The plain config on an `http2: true` listener (h2c) and, with TLS, a second one with `tls:` (ALPN h2)."""
        listeners = [{"name": "h2c", "address": f"127.0.0.1:{self.ports['h2-gateway']}", "http2": True}]
        if self.tls:
            listeners.append({"name": "h2-tls", "address": f"127.0.0.1:{self.ports['h2-gateway-tls']}", "http2": True,
                              "tls": {"certificate": str(self.tls[0]), "private_key": str(self.tls[1])}})
        return start_gateway(self.s.gateway, self.tmp / "gateway-h2", P.gateway_yaml(listeners, self.ports["upstream"]),
                             (self.ports["h2-gateway-tls"],) if self.tls else ())

    def fresh_sqlite(self, workdir: Path, tag: str) -> dict:
        """A state file nobody has seen: the previous ones deleted."""
        workdir.mkdir(parents=True, exist_ok=True)
        for old in workdir.glob("state-*.db*"):
            old.unlink()
        return {"backend": "sqlite", "path": str(workdir / f"state-{tag}.db")}

    def lu_sqlite_gateway(self, tag: str):
        state = self.fresh_sqlite(self.tmp / "lu", tag)
        return self.gateway("lu/sqlite", "lu-sqlite", verifiers=self.app_check(), state=state, limited_use=True)

    def lu_redis_gateway(self, tag: str):
        """On a flushed redis, with a key_prefix never used before."""
        flushed = subprocess.run([self.s.redis_cli, "-p", str(self.ports["redis"]), "FLUSHALL"], capture_output=True,
                                 text=True, timeout=10)
        if flushed.stdout.strip() != "OK":
            die(f"redis-cli FLUSHALL failed: {flushed.stdout}{flushed.stderr}")
        state = {"backend": "redis", "url": f"redis://127.0.0.1:{self.ports['redis']}/0",
                 "key_prefix": f"bench-{tag}-{next(self.lu_seq)}:"}
        return self.gateway("lu/redis", "lu-redis", verifiers=self.app_check(), state=state, limited_use=True)

    def aa_gateway(self, tag: str):
        """On a new SQLite file, so no counter is known to it, with each device's key registered again (the sanity
        device for the sanity check, every wrk device before a measured run)."""
        state = self.fresh_sqlite(self.tmp / "aa" / "gateway", tag)
        self.aa_db = Path(state["path"])
        gw = self.gateway("aa/gateway", "aa", verifiers=P.app_attest_verifier(self.aa.root), state=state)
        try:
            for device in [self.aa.sanity] if tag == "sanity" else self.aa.devices:
                register_device(self.aa, device, self.ports["aa"])
        except BaseException:
            gw.kill()
            raise
        return gw


@dataclass(frozen=True)
class Row:
    name: str
    proxy: str                                  # in Lab.proxies
    port: int = 0
    wrk: tuple[WrkLoad, WrkLoad] | None = None  # (warm-up, measured run)
    h2: H2Load | None = None
    h2_desc: str = ""                           # the h2load column of the HTTP/2 table
    skip: str = ""                              # why an HTTP/2 row is not run
    fresh: bool = False                         # its proxy starts again on fresh state before each measured run
    side_pid: int | None = None                 # redis-server: its own CPU µs/req
    check: Callable[[str, WrkRun, Lab], None] | None = None


def tokens_load(lab: Lab, tokens: Path, start: str) -> WrkLoad:
    """tokens.lua: the next token of the file in every request, from `start` (a fraction of the list) on."""
    return WrkLoad(lab.s.conns, script=HERE / "tokens.lua", env=(
        ("BENCH_TOKEN_FILE", str(tokens)), ("BENCH_TOKEN_START", start), ("BENCH_WRK_THREADS", "1")))


def assertions_load(lab: Lab, first: int, last: int) -> WrkLoad:
    """appattest.lua: thread k = device k on one connection, lines first..last of its list."""
    n = lab.s.aa_devices
    return WrkLoad(n, threads=n, script=HERE / "appattest.lua", env=(
        ("BENCH_AA_DIR", str(lab.aa.dir)), ("BENCH_AA_FIRST", str(first)), ("BENCH_AA_LAST", str(last))))


def token_wraps(label: str, run: WrkRun, lab: Lab) -> None:
    """A wrapped list is reported (tokens recur), not invalid: the gateway's cache cannot hold that many."""
    if run.wraps:
        n = lab.s.tokens
        run.notes.append(f"token list wrapped {run.wraps}x (raise BENCH_TOKENS)")
        print(f"bench: {label}: the {n}-token list wrapped {run.wraps} time(s): tokens recurred after {n} others (the "
              "gateway's 10 000-entry LRU cannot hold them; raise BENCH_TOKENS for strictly distinct)")


def refusals(run: Run) -> str | None:
    return next((e.split()[1] for e in run.errors if e.startswith("non-2xx")), None)


def limited_use_check(label: str, run: WrkRun, lab: Lab) -> None:
    token_wraps(label, run, lab)
    if refusals(run):
        loud(f"{label}: {refusals(run)} requests were refused in a limited-use run: a REPLAY slipped in, or the store "
             "failed (see its stderr at the end)")


def accepted_assertions(lab: Lab) -> int | None:
    """How far the devices' counters in the gateway's SQLite file advanced past the warm-up's."""
    w = lab.s.aa_per_warm
    try:
        with closing(sqlite3.connect(lab.aa_db, timeout=5)) as db:
            return db.execute("SELECT COALESCE(SUM(counter - ?), 0) FROM keys WHERE counter > ?", (w, w)).fetchone()[0]
    except sqlite3.Error as e:
        print(f"bench: reading the counters from {lab.aa_db} failed: {e}")
        return None


def app_attest_check(label: str, run: WrkRun, lab: Lab) -> None:
    """The lists must last the run (after a wrap every request is a replayed counter, 401), and the store's counters
    must have advanced once per completed request, plus at most one in flight per device when wrk stopped, plus one:
    wrk checks thread 0's request() once in its main thread, which skips a line (a counter) of device 0."""
    s = lab.s
    if run.warm_wraps:
        print(f"bench: {label}: the warm-up used up its {s.aa_per_warm} assertions per device and replayed them (401s "
              "in the warm-up only)")
    if run.wraps:
        run.fail(f"assertion lists exhausted {run.wraps}x (raise BENCH_APPATTEST_ASSERTIONS)",
                 f"{label}: a device's {s.aa_per_run} assertions ran out ({run.wraps} wrap-arounds): replays followed, "
                 "the run is INVALID; raise BENCH_APPATTEST_ASSERTIONS")
    if refusals(run):
        loud(f"{label}: {refusals(run)} requests were REJECTED: the row is INVALID (a counter replayed or out of "
             "order, or the store failed; see its stderr at the end)")
    run.stored = accepted_assertions(lab)
    if run.stored is not None and not run.reqs <= run.stored <= run.reqs + s.aa_devices + 1:
        run.fail(f"store accepted {run.stored} assertions for {run.reqs} requests",
                 f"{label}: the store's counters advanced by {run.stored} for {run.reqs} completed requests: not one "
                 "accepted assertion per request")


def wrk_rows(lab: Lab) -> list[Row]:
    s, p, plain = lab.s, lab.ports, WrkLoad(lab.s.conns)
    rows = [Row("nginx", "nginx", p["nginx"], (plain, plain)),
            Row("attest-gateway", "attest-gateway", p["gateway"], (plain, plain))]
    if s.rs256:
        t = lab.tokens
        repeated = WrkLoad(s.conns, header=f"X-Firebase-AppCheck: {t.repeated}")
        distinct = (tokens_load(lab, t.distinct, "0.5"), tokens_load(lab, t.distinct, "0"))
        rows += [Row("gw-rs256-distinct", "gw-rs256", p["rs256"], distinct, check=token_wraps),
                 Row("gw-rs256-repeated", "gw-rs256", p["rs256"], (repeated, repeated)),
                 Row("haproxy-distinct", "haproxy", p["haproxy"], distinct, check=token_wraps),
                 Row("haproxy-repeated", "haproxy", p["haproxy"], (repeated, repeated))]
    if s.lu:
        lu = (tokens_load(lab, lab.tokens.lu_warmup, "0"), tokens_load(lab, lab.tokens.distinct, "0"))
        rows += [Row("gw-lu-sqlite", "gw-lu-sqlite", p["lu-sqlite"], lu, fresh=True, check=limited_use_check),
                 Row("gw-lu-redis", "gw-lu-redis", p["lu-redis"], lu, fresh=True, side_pid=lab.redis.proc.pid,
                     check=limited_use_check)]
    if s.aa:
        w, r = s.aa_per_warm, s.aa_per_run
        rows.append(Row("gw-appattest-sqlite", "gw-appattest-sqlite", p["aa"],
                        (assertions_load(lab, 1, w), assertions_load(lab, w + 1, w + r)), fresh=True,
                        check=app_attest_check))
    return rows


def h2_rows(lab: Lab, gw_h2c: bool, gw_tls: bool) -> list[Row]:
    """A gateway that did not answer HTTP/2 in the sanity check (a build from before it) has its rows skipped."""
    s, p, c, mc, ms = lab.s, lab.ports, lab.s.conns, lab.s.mux_conns, lab.s.mux_streams
    no_h2c = "" if gw_h2c else "gateway did not answer h2c (sanity)"
    no_tls = "" if gw_tls else "gateway did not answer h2 over TLS (sanity)"
    rows = [Row("gw-h1-h2load", "attest-gateway", h2=H2Load("h1", c, 1, p["gateway"]), h2_desc=f"--h1 -c{c} -m1"),
            Row("gw-h2c", "gw-h2", h2=H2Load("h2c", c, 1, p["h2-gateway"]), h2_desc=f"h2c -c{c} -m1", skip=no_h2c),
            Row("nginx-h2c", "nginx-h2", h2=H2Load("h2c", c, 1, p["h2-nginx"]), h2_desc=f"h2c -c{c} -m1"),
            Row("gw-h2c-mux", "gw-h2", h2=H2Load("mux", mc, ms, p["h2-gateway"]), h2_desc=f"h2c -c{mc} -m{ms}",
                skip=no_h2c),
            Row("nginx-h2c-mux", "nginx-h2", h2=H2Load("mux", mc, ms, p["h2-nginx"]), h2_desc=f"h2c -c{mc} -m{ms}")]
    if s.h2_tls:
        rows += [Row("gw-h2-tls", "gw-h2", h2=H2Load("tls", c, 1, p["h2-gateway-tls"]), h2_desc=f"h2 TLS -c{c} -m1",
                     skip=no_tls),
                 Row("nginx-h2-tls", "nginx-h2", h2=H2Load("tls", c, 1, p["h2-nginx-tls"]),
                     h2_desc=f"h2 TLS -c{c} -m1")]
    return rows


def run_row(lab: Lab, row: Row, round_no: int) -> Run:
    """One measured run (after its warm-up) of the row, on a proxy that runs, with fresh state where it needs it."""
    proxy = lab.proxies[row.proxy]
    if row.fresh:
        proxy.restart(f"r{round_no}")
    else:
        proxy.ensure_running()
    label, s = f"{row.name} round {round_no}", lab.s
    if row.h2:
        return measure_h2(label, proxy, row.h2, s.seconds, s.warmup)
    run = measure_wrk(label, proxy, row.port, *row.wrk, s.seconds, s.warmup, row.side_pid)
    if row.check and run.rps is not None:
        row.check(label, run, lab)
    return run
