"""One bench run's peers, sanity checks and rows: the nginx upstream and redis-server on core 1, each proxy under test
on core 0 (a Proxy; with BENCH_BASELINE_BIN every gateway has a twin `<name>@base` on that binary), and each row: the
proxy it loads, its load, and what must hold after each of its measured runs."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import struct
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import apple_fakes
import harness as H
import peers as P
import upstreams as U
from load import H2Load, Run, WrkLoad, WsLoad, measure
from material import AppAttest, PlayIntegrity
from mint_tokens import mint
from peers import Proxy
from settings import AA_BUNDLE, AA_REG, AA_TEAM, HERE, PROJECT_NUMBER, Settings, loud


class Lab:
    def __init__(self, s: Settings, tmp: Path):
        self.s, self.tmp, self.tokens = s, tmp, mint(tmp / "tokens", s.tokens, s.lu_warm) if s.rs256 else None
        self.aa = AppAttest(s, tmp) if s.aa else None
        self.play = PlayIntegrity(s, tmp) if s.play else None
        tls = apple_fakes.make_tls(tmp / "tls") if s.h2_tls else None   # a P-256 leaf of the e2e test CA
        self.tls = (tls.cert, tls.key) if tls else None
        self.ports, self.proxies, self.skips = iter(P.free_ports(32)), {}, {}   # skips: row -> why it is not run
        self.seq, self.upstream, self.redis, self.cluster = itertools.count(1), None, None, []
        self.grpc_up = self.ws_up = None   # the gRPC rows' h2c upstream, the WebSocket rows' echo server (core 1)

    def close(self) -> None:
        for process in [*self.proxies.values(), self.upstream, self.redis, *self.cluster, self.grpc_up, self.ws_up]:
            if process is not None:
                process.kill()

    def start(self) -> None:
        s, gw, self.up = self.s, self.gateway, next(self.ports)
        self.upstream = self.nginx("upstream", [str(self.up)], P.UPSTREAM, core=1, upstream=False)
        if s.lu:
            # One redis-server for both Redis rows: its plain port and a TLS port (a certificate of the e2e test CA).
            self.redis_tls_port, redis_pki = next(self.ports), apple_fakes.make_tls(self.tmp / "redis-tls")
            self.redis_ca = redis_pki.ca
            with P.pinned(1):
                self.redis = H.RedisServer(self.tmp / "redis", port=next(self.ports), binary=s.redis, extra_args=(
                    "--tls-port", str(self.redis_tls_port), "--tls-cert-file", str(redis_pki.cert),
                    "--tls-key-file", str(redis_pki.key), "--tls-ca-cert-file", str(redis_pki.ca),
                    "--tls-auth-clients", "no"))
            self.start_cluster()
        fb = {"fb": {"type": "app_check", "project_number": PROJECT_NUMBER, "project_id": "demo-project",
                     "jwks_file": str(self.tokens.dir / "jwks.json")}} if s.rs256 else {}
        self.add("nginx", lambda p, tag: self.nginx(p.name, [str(p.ports[0])], P.PROXY), gateway=False)
        self.add("attest-gateway", lambda p, tag: gw(p))
        if s.rs256:
            self.add("gw-rs256", lambda p, tag: gw(p, verifiers=fb))
            self.add("haproxy", self.haproxy, gateway=False)
        if s.h2:
            self.add("nginx-h2", self.h2_nginx, ports=1 + bool(self.tls), gateway=False)
            self.add("gw-h2", self.h2_gateway, ports=1 + bool(self.tls))
        if s.lu:
            self.add("gw-lu-sqlite", lambda p, tag: gw(p, verifiers=fb, state=self.fresh_sqlite(p, tag),
                                                       limited_use=True), fresh=True)
            self.add("gw-lu-redis", lambda p, tag: gw(p, verifiers=fb, state=self.fresh_redis(tag), limited_use=True),
                     fresh=True)
            self.add("gw-lu-rediss", lambda p, tag: gw(p, verifiers=fb, state=self.fresh_redis(tag, tls=True),
                                                       limited_use=True), fresh=True)
            self.add("gw-lu-redis-cluster", lambda p, tag: gw(p, verifiers=fb, state=self.fresh_cluster(tag),
                                                              limited_use=True), fresh=True)
        if s.aa:
            self.add("gw-appattest-sqlite", self.aa_gateway, fresh=True)
        if s.play:
            self.add("gw-play-classic", lambda p, tag: gw(p, verifiers=self.play.verifier))
        if s.grpc:
            self.grpc_up = self.grpc_upstream(next(self.ports))
            self.add("nginx-grpc", lambda p, tag: self.nginx(p.name, [f"{p.ports[0]} http2"], P.GRPC_PROXY,
                                                              upstream_port=self.grpc_up.port, keepalive=100000000),
                     gateway=False)
            self.add("gw-grpc", lambda p, tag: gw(p, [{"name": "h2c", "address": f"127.0.0.1:{p.ports[0]}",
                                                       "http2": True}], upstreams={
                "grpc": {"url": f"http://127.0.0.1:{self.grpc_up.port}", "protocol": "h2c"}}, routes=[
                {"name": "grpc", "match": {"path_prefix": "/bench.Echo/"}, "upstream": "grpc", "verify": []}]))
        if s.ws:
            self.ws_up = self.server("ws-echo", [sys.executable, str(HERE / "ws_echo.py"), "serve"], next(self.ports))
            self.add("nginx-ws", lambda p, tag: self.nginx(p.name, [str(p.ports[0])], P.WS_PROXY,
                                                            upstream_port=self.ws_up.port), gateway=False)
            self.add("gw-ws", lambda p, tag: gw(p, upstreams={"ws": {"url": f"http://127.0.0.1:{self.ws_up.port}"}},
                                                routes=[{"name": "ws", "match": {"path_prefix": "/ws/"},
                                                         "upstream": "ws", "websocket": True, "verify": []}]))

    def server(self, name: str, argv: list[str], port: int) -> P.Proc:
        """An upstream without a config file on core 1, listening on `port` (the last argument)."""
        workdir = self.tmp / name
        proc = P.Proc(workdir / "argv", " ".join(argv + [str(port)]) + "\n", argv + [str(port)], None, 1, [port],
                      workdir / "stdout.log")
        proc.port = port
        return proc

    def grpc_upstream(self, port: int) -> P.Proc:
        """nghttpd (h2c, one worker): `--echo-upload` answers a POST with its body (the request's 5-byte-prefixed
        message) and `--trailer` adds grpc-status: 0; or grpc_echo.py (grpcio). The message file h2load posts."""
        payload = b"attest-gateway bench gRPC message, 48 bytes ok.\n"
        self.grpc_msg, self.grpc_answer = self.tmp / "grpc-message.bin", 5 + len(payload)
        self.grpc_msg.write_bytes(b"\0" + struct.pack(">I", len(payload)) + payload)
        if self.s.grpc_upstream == "grpcio":
            return self.server("grpc-upstream", [sys.executable, str(HERE / "grpc_echo.py")], port)
        htdocs = self.tmp / "grpc-upstream" / "htdocs"
        htdocs.mkdir(parents=True, exist_ok=True)
        return self.server("grpc-upstream", [self.s.nghttpd, "--no-tls", "--echo-upload", "--trailer",
                                             "grpc-status: 0", "-n", "1", "-m", "1024", "-d", str(htdocs),
                                             "-a", "127.0.0.1"], port)

    def add(self, name: str, starter, ports: int = 1, gateway: bool = True, fresh: bool = False) -> None:
        """Starts a proxy and, with BENCH_BASELINE_BIN, a gateway's twin on the baseline binary."""
        s, twins = self.s, [("", self.s.gateway, self.s.dev)]
        if gateway and s.base:
            twins.append(("@base", s.base, s.base_dev))
        for suffix, binary, dev in twins:
            proxy = Proxy(name + suffix, starter, [next(self.ports) for _ in range(ports)], binary if gateway else "",
                          dev, fresh, base=bool(suffix))
            self.proxies[proxy.name] = proxy
            proxy.start("sanity" if fresh else "start")

    def nginx(self, name: str, listens: list[str], location: str, core: int = 0, upstream: bool = True,
              upstream_port: int | None = None, **conf) -> P.Proc:
        """`upstream_port`: the `api` upstream block's server, when not the nginx `return 200` upstream."""
        workdir = self.tmp / name
        args = ["-e", str(workdir / "err.log"), "-p", str(workdir), "-c", str(workdir / "nginx.conf")]
        text = P.nginx_conf(self.s.nginx, workdir, listens, location, (upstream_port or self.up) if upstream else None,
                            **conf)
        return P.Proc(workdir / "nginx.conf", text, [self.s.nginx, *args], [self.s.nginx, "-t", "-q", *args], core,
                      [int(listen.split()[0]) for listen in listens], workdir / "err.log")

    def h2_nginx(self, proxy: Proxy, tag: str) -> P.Proc:
        """keepalive_requests also bounds the streams of one HTTP/2 connection in 1.22: raised so that no connection
        is closed within a run."""
        listens = [f"{proxy.ports[0]} http2"] + ([f"{proxy.ports[1]} ssl http2"] if self.tls else [])
        return self.nginx(proxy.name, listens, P.PROXY, keepalive=100000000, tls=self.tls)

    def haproxy(self, proxy: Proxy, tag: str) -> P.Proc:
        cfg, haproxy = self.tmp / proxy.name / "haproxy.cfg", self.s.haproxy
        text = P.haproxy_cfg(proxy.ports[0], self.up, self.tokens.dir / "public.pem")
        return P.Proc(cfg, text, [haproxy, "-db", "-f", str(cfg)], [haproxy, "-c", "-q", "-f", str(cfg)], 0,
                      proxy.ports, cfg.parent / "stdout.log")

    def gateway(self, proxy: Proxy, listeners: list[dict] | None = None, verifiers: dict | None = None,
                state: dict | None = None, limited_use: bool = False, upstreams: dict | None = None,
                routes: list[dict] | None = None) -> H.Gateway:
        """`serve --workers 1` on core 0, its access log into /dev/null; one route `bench` (path_prefix /) to
        upstream `api` (256 idle connections), verified by every verifier; `routes` (to `upstreams`) before it."""
        route = {"name": "bench", "match": {"path_prefix": "/"}, "upstream": "api", "verify": list(verifiers or {})}
        cfg = {"version": 1, "listeners": listeners or [{"address": f"127.0.0.1:{proxy.ports[0]}"}],
               "state": state or {"backend": "memory"}, "verifiers": verifiers,
               "upstreams": {**(upstreams or {}),
                             "api": {"url": f"http://127.0.0.1:{self.up}", "max_idle_connections": 256}},
               "routes": [*(routes or []), {**route, "limited_use": True} if limited_use else route]}
        workdir = self.tmp / proxy.name
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "stdout.log").unlink(missing_ok=True)
        (workdir / "stdout.log").symlink_to(os.devnull)   # the path the harness opens for the gateway's stdout
        with P.pinned(0):
            gw = H.Gateway(proxy.binary, H.yaml_dump({k: v for k, v in cfg.items() if v}) + "\n", workdir, workers=1)
        try:   # the harness waits for the first listener only
            for port in proxy.ports[1:]:
                H.wait_listening(port, gw.proc, 10.0, "attest-gateway serve")
        except RuntimeError as e:
            gw.kill()
            raise RuntimeError(f"{e}\n{P.tail(gw.stderr_path)}") from None
        return gw

    def h2_gateway(self, proxy: Proxy, tag: str) -> H.Gateway:
        """The plain config on an `http2: true` listener (h2c) and, with TLS, a second one with `tls:` (ALPN h2)."""
        listeners = [{"name": "h2c", "address": f"127.0.0.1:{proxy.ports[0]}", "http2": True}]
        if self.tls:
            listeners.append({"name": "h2-tls", "address": f"127.0.0.1:{proxy.ports[1]}", "http2": True,
                              "tls": {"certificate": str(self.tls[0]), "private_key": str(self.tls[1])}})
        return self.gateway(proxy, listeners)

    def fresh_sqlite(self, proxy: Proxy, tag: str) -> dict:
        workdir = self.tmp / proxy.name
        workdir.mkdir(parents=True, exist_ok=True)
        for old in workdir.glob("state-*.db*"):
            old.unlink()
        return {"backend": "sqlite", "path": str(workdir / f"state-{tag}.db")}

    def fresh_redis(self, tag: str, tls: bool = False) -> dict:
        """A new key prefix on the emptied Redis; `tls`: over its TLS port (`rediss://`, the test CA as ca_file)."""
        self.redis.command("FLUSHALL", timeout=10)
        state = {"backend": "redis", "url": self.redis.url, "key_prefix": f"bench-{tag}-{next(self.seq)}:"}
        if tls:
            state |= {"url": f"rediss://127.0.0.1:{self.redis_tls_port}/0", "ca_file": str(self.redis_ca)}
        return state

    def start_cluster(self) -> None:
        """Three cluster-enabled redis-servers on core 1 (each with its own bus port), joined with no replicas."""
        with P.pinned(1):
            for i in range(3):
                self.cluster.append(H.RedisServer(self.tmp / f"redis-cluster-{i}", port=next(self.ports), binary=self.s.redis,
                                                  extra_args=("--cluster-enabled", "yes", "--cluster-port", str(next(self.ports)))))
        cli = str(Path(self.s.redis).with_name("redis-cli"))
        subprocess.run([cli, "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.cluster], "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + 20
        while not all("cluster_state:ok" in n.command("CLUSTER", "INFO") for n in self.cluster):
            if time.monotonic() > deadline:
                raise RuntimeError("bench: the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def fresh_cluster(self, tag: str) -> dict:
        """A new key prefix on the emptied cluster (every master flushed), seeded with its first node."""
        for n in self.cluster:
            n.command("FLUSHALL", timeout=10)
        return {"backend": "redis", "cluster": {"nodes": [f"127.0.0.1:{self.cluster[0].port}"]},
                "key_prefix": f"bench-{tag}-{next(self.seq)}:"}

    def aa_gateway(self, proxy: Proxy, tag: str) -> H.Gateway:
        """On a new SQLite file, so no counter is known to it, with each device's key registered again (the sanity
        device for the sanity check, every wrk device before a measured run) by the proxy's own dev tools."""
        aa = {"aa": {"type": "app_attest", "team_id": AA_TEAM, "bundle_ids": [AA_BUNDLE], "root_ca": str(self.aa.root),
                     "binding": "request", "max_skew": "24h", "registration_path": AA_REG}}
        gw = self.gateway(proxy, verifiers=aa, state=self.fresh_sqlite(proxy, tag))
        try:
            for device in [self.aa.sanity] if tag == "sanity" else self.aa.devices:
                self.aa.register(proxy.dev, device, proxy.ports[0])
        except BaseException:
            gw.kill()
            raise
        return gw

    def sanity(self) -> None:
        """Before measuring: each proxy must return the upstream's 200 + body (over HTTP/2 where a row asks for it),
        and each verifying one must refuse what it should."""
        s, t = self.s, self.tokens
        sections = [("", ["nginx", "attest-gateway"], [("", [], "200")])]
        if s.h2:
            sections.append(("HTTP/2 (nghttp; h2c = prior knowledge, TLS = ALPN h2)", ["nginx-h2", "gw-h2"], None))
        if s.rs256:
            sections.append(("RS256 tokens", ["gw-rs256", "haproxy"], [
                ("valid repeated token", token(t.repeated), "200"),
                ("valid distinct token", token(t.first_distinct), "200"),
                ("bad signature", token(t.bad), "401"), ("no token", [], "401")]))
        if s.lu:
            sections.append(("limited use", ["gw-lu-sqlite", "gw-lu-redis", "gw-lu-rediss", "gw-lu-redis-cluster"], [
                ("fresh token", token(t.lu_fresh), "200"),
                ("same token again", token(t.lu_fresh), "401 token_replayed"),
                ("token without jti", token(t.repeated), "401 missing_jti")]))   # repeated.jwt has no jti
        if s.aa:
            first, second = self.aa.headers(self.aa.sanity)
            sections.append(("app attest", ["gw-appattest-sqlite"], [
                ("counter 2", second, "200"), ("counter 2 again", second, "401 counter_not_increasing"),
                ("counter 1 after it", first, "401 counter_not_increasing"),
                ("no assertion", [], "401 missing_token")]))
        if s.play:
            pi = self.play
            sections.append(("Play Integrity classic tokens", ["gw-play-classic"], [
                ("valid token", pi.headers(pi.token), "200"), ("again", pi.headers(pi.token), "200"),
                ("tampered ciphertext", pi.headers(pi.tampered), "401 malformed_token"),
                ("another request's hash", pi.headers(pi.other_request), "401 bad_assertion"),
                ("no token", [], "401 missing_token")]))
        if s.grpc:
            grpc_answers("upstream", self.grpc_up.port, self.grpc_msg, s.grpc_upstream == "grpcio", required=True)
            sections.append(("gRPC (nghttp POST /bench.Echo/Unary, h2c prior knowledge; must be: :status 200, "
                             "the message echoed, trailer grpc-status: 0)", ["nginx-grpc", "gw-grpc"],
                             lambda proxy: grpc_answers(proxy.name, proxy.ports[0], self.grpc_msg,
                                                        s.grpc_upstream == "grpcio")))
        if s.ws:
            sections.append(("WebSocket (ws_echo.py client, 1 connection, 20 messages; must be: every echo right)",
                             ["nginx-ws", "gw-ws"], lambda proxy: ws_answers(proxy.name, proxy.ports[0])))
        for what, names, probes in sections:
            if what:
                must = (f" (must be: {', '.join(f'{label} {want}' for label, _, want in probes)})"
                        if isinstance(probes, list) else "")
                print(f"sanity, {what}{must}:")
            for proxy in [self.proxies.get(n + sfx) for n in names for sfx in ("", "@base")]:
                try:
                    if proxy and not proxy.broken:
                        (self.check_h2 if probes is None else probes if callable(probes) else
                         lambda p: check_answers(p, probes))(proxy)
                except RuntimeError as e:
                    proxy.fail(str(e))
            if what:
                print()

    def check_h2(self, proxy: Proxy) -> None:
        """nginx must answer over HTTP/2; a gateway that does not (a build from before it) has its rows skipped."""
        urls = {"h2c": f"http://127.0.0.1:{proxy.ports[0]}/bench"}
        urls.update({"h2-tls": f"https://127.0.0.1:{proxy.ports[1]}/bench"} if self.tls else {})
        if proxy.binary:
            check_answers(proxy, [("", [], "200")])   # the http2 listener still takes HTTP/1.1
        for kind, url in urls.items():
            sfx, rows = "@base" * proxy.base, ["gw-h2c", "gw-h2c-mux"] if kind == "h2c" else ["gw-h2-tls"]
            if h2_answers(("gw-" if proxy.binary else "nginx-") + kind + sfx, url):
                continue
            if not proxy.binary:
                raise RuntimeError(f"nginx does not proxy {kind} (nginx built without http_v2?)")
            loud(f"attest-gateway ({proxy.binary}) does not answer {kind} on its http2: true listener (a build from "
                 f"before HTTP/2?): {', '.join(rows)} SKIPPED")
            self.skips.update({row + sfx: f"gateway did not answer {kind} (sanity)" for row in rows})

    def rows(self) -> list[Row]:
        """Every row in order, each gateway row followed by its baseline twin."""
        s, p, c, mc, ms = self.s, self.proxies, self.s.conns, self.s.mux_conns, self.s.mux_streams
        plain = WrkLoad(c)
        rows = [Row("nginx", p["nginx"], plain, plain), Row("attest-gateway", p["attest-gateway"], plain, plain)]
        if s.rs256:
            distinct = (self.tokens_load("distinct", "0.5"), self.tokens_load("distinct", "0"))
            repeated = WrkLoad(c, header=f"X-Firebase-AppCheck: {self.tokens.repeated}")
            rows += [Row("gw-rs256-distinct", p["gw-rs256"], *distinct, tokens=True),
                     Row("gw-rs256-repeated", p["gw-rs256"], repeated, repeated),
                     Row("haproxy-distinct", p["haproxy"], *distinct, tokens=True),
                     Row("haproxy-repeated", p["haproxy"], repeated, repeated)]
        if s.lu:
            lu = (self.tokens_load("lu-warmup", "0"), self.tokens_load("distinct", "0"))
            replay = "in a limited-use run: a REPLAY slipped in, or the store failed"
            rows += [Row("gw-lu-sqlite", p["gw-lu-sqlite"], *lu, tokens=True, refused=replay),
                     Row("gw-lu-redis", p["gw-lu-redis"], *lu, side=True, tokens=True, refused=replay),
                     Row("gw-lu-rediss", p["gw-lu-rediss"], *lu, side=True, tokens=True, refused=replay),
                     Row("gw-lu-redis-cluster", p["gw-lu-redis-cluster"], *lu, side=True, tokens=True, refused=replay)]
        if s.aa:
            w, r, n = s.aa_per_warm, s.aa_per_run, s.aa_devices
            aa = [WrkLoad(n, threads=n, script=HERE / "appattest.lua", env=(   # thread k = device k, 1 connection
                ("BENCH_AA_DIR", str(self.aa.dir)), ("BENCH_AA_FIRST", str(lo)), ("BENCH_AA_LAST", str(hi))))
                for lo, hi in ((1, w), (w + 1, w + r))]
            rows.append(Row("gw-appattest-sqlite", p["gw-appattest-sqlite"], *aa, check=app_attest_check,
                            refused="(INVALID): a counter replayed or out of order, or the store failed"))
        if s.play:
            first, *more = (f"{n}: {v}" for n, v in self.play.headers(self.play.token))
            play = WrkLoad(c, header=first, more_headers=tuple(more))
            rows.append(Row("gw-play-classic", p["gw-play-classic"], play, play,
                            refused="(INVALID): a classic token was refused"))
        h2 = [("gw-h1-h2load", "attest-gateway", "h1", c, 1), ("gw-h2c", "gw-h2", "h2c", c, 1),
              ("nginx-h2c", "nginx-h2", "h2c", c, 1), ("gw-h2c-mux", "gw-h2", "mux", mc, ms),
              ("nginx-h2c-mux", "nginx-h2", "mux", mc, ms)] if s.h2 else []
        if s.h2_tls:
            h2 += [("gw-h2-tls", "gw-h2", "tls", c, 1), ("nginx-h2-tls", "nginx-h2", "tls", c, 1)]
        for name, proxy, kind, conns, streams in h2:
            desc = {"h1": "--h1", "tls": "h2 TLS"}.get(kind, "h2c") + f" -c{conns} -m{streams}"
            rows.append(Row(name, p[proxy], H2Load(kind, conns, streams), H2Load(kind, conns, streams), h2=desc,
                            port=int(kind == "tls")))
        if s.grpc:   # POST /bench.Echo/Unary, a 5-byte-prefixed message; every answer must carry the echoed one
            grpc = H2Load("grpc", s.grpc_conns, s.grpc_streams, path="/bench.Echo/Unary", data=self.grpc_msg,
                          headers=("content-type: application/grpc", "te: trailers"), answer=self.grpc_answer)
            desc = f"gRPC h2c -c{s.grpc_conns} -m{s.grpc_streams}"
            rows += [Row("gw-grpc", p["gw-grpc"], grpc, grpc, h2=desc), Row("nginx-grpc", p["nginx-grpc"], grpc, grpc,
                                                                             h2=desc)]
        if s.ws:
            ws = WsLoad(s.ws_conns, s.ws_messages)
            desc = f"-c{s.ws_conns} {s.ws_messages} msgs"
            rows += [Row("gw-ws", p["gw-ws"], ws, ws, ws=desc), Row("nginx-ws", p["nginx-ws"], ws, ws, ws=desc)]
        twins = []
        for row in rows:
            base = p.get(row.proxy.name + "@base")
            twins += [row] + ([replace(row, name=row.name + "@base", proxy=base)] if base else [])
        return [replace(row, skip=self.skips.get(row.name, "")) for row in twins]

    def side_pids(self, row: Row) -> int | list[int]:
        """The Redis a row's store runs on: the cluster's three masters, or the one server."""
        return [n.proc.pid for n in self.cluster] if row.name.startswith("gw-lu-redis-cluster") else self.redis.proc.pid

    def tokens_load(self, tokens: str, start: str) -> WrkLoad:
        """tokens.lua: the next token of a list in every request, from `start` (a fraction of the list) on."""
        return WrkLoad(self.s.conns, script=HERE / "tokens.lua", env=(
            ("BENCH_TOKEN_FILE", str(self.tokens.dir / f"{tokens}.jwt")), ("BENCH_TOKEN_START", start),
            ("BENCH_WRK_THREADS", "1")))

    def run(self, row: Row, round_no: int) -> Run:
        if not row.proxy.ready(f"r{round_no}"):
            return Run(errors=[f"baseline not running: {row.proxy.broken}"])
        label = f"{row.name} round {round_no}"
        run = measure(label, row.proxy, row.proxy.ports[row.port], row.warm, row.load, self.s,
                      self.side_pids(row) if row.side else None)
        if "rps" not in run.fig:
            return run
        if row.tokens and (wraps := run.fig["wraps"]):   # reported, not invalid: the cache could not hold them anyway
            run.notes.append(f"token list wrapped {wraps}x (raise BENCH_TOKENS)")
            print(f"bench: {label}: the {self.s.tokens}-token list wrapped {wraps} time(s): tokens recurred (the "
                  "gateway's 10 000-entry LRU cannot hold them; raise BENCH_TOKENS for strictly distinct)")
        if row.refused and (n := next((e.split()[1] for e in run.errors if e.startswith("non-2xx")), None)):
            loud(f"{label}: {n} requests were REFUSED {row.refused} (see its stderr at the end)")
        if row.check:
            row.check(self, row, label, run)
        return run


@dataclass(frozen=True)
class Row:
    name: str
    proxy: Proxy
    warm: WrkLoad | H2Load
    load: WrkLoad | H2Load                  # the measured run's
    h2: str = ""                            # an HTTP/2 row: its h2load column
    ws: str = ""                            # a WebSocket row: its client column
    port: int = 0                           # which of the proxy's ports
    side: bool = False                      # redis-server's CPU µs/req too (a cluster: its three masters')
    tokens: bool = False                    # a token list: its wrap-arounds are noted
    refused: str = ""                       # what non-2xx answers mean here
    skip: str = ""                          # why it is not run
    check: Callable[[Lab, Row, str, Run], None] | None = None


def token(value: str | None) -> list[tuple[str, str]]:
    return [("X-Firebase-AppCheck", value)] if value else []


def check_answers(proxy: Proxy, probes: list[tuple[str, list, str]]) -> None:
    """GET /bench with each probe's header fields on a new connection: "200" must be the upstream's 200 + body, any
    other answer is compared (and printed) as written: a status, or a status and the reason of a local JSON answer."""
    port, got, wrong = proxy.ports[0], [], []
    for label, headers, want in probes:
        try:
            r = U.one_shot(port, H.http_get("/bench", [*headers, ("Connection", "close")], "127.0.0.1"), timeout=5)
        except (OSError, ValueError, EOFError):
            r = None
        try:
            reason = json.loads(r.body).get("reason")
        except (AttributeError, TypeError, ValueError):
            reason = None
        if want == "200" and (r is None or r.status != 200 or P.BODY_MARK not in (r.body or b"")):
            loud(f"sanity request through {proxy.name} (127.0.0.1:{port}) did not return the upstream's 200 + body")
            print((r.raw_head + (r.body or b""))[:2000].decode("latin-1") if r else "(no answer)")
            raise RuntimeError("does not proxy correctly")
        status = "none" if r is None else str(r.status)
        answer = f"{status} {reason or '-'}" if " " in want else status
        got.append(f"{label} {answer}")
        wrong += [f"{label}: {answer}, not {want}"] * (answer != want)
    if probes[0][0]:
        print(f"  {proxy.name:<22} {', '.join(got)}")
    if wrong:
        raise RuntimeError(f"does not refuse what it should ({'; '.join(wrong)})")


def h2_answers(name: str, url: str) -> bool:
    """nghttp GET (http://: h2c with prior knowledge; https://: ALPN h2, certificate not verified): True when it
    answered :status 200 with the upstream's body over HTTP/2."""
    try:
        out = subprocess.run(["nghttp", "-v", url], capture_output=True, text=True, timeout=10).stdout
    except subprocess.TimeoutExpired:
        out = "(nghttp timed out after 10 s)"
    ok = (") :status: 200" in out and P.BODY_MARK.decode() in out
          and (not url.startswith("https:") or "The negotiated protocol: h2" in out))
    print(f"  {name:<22} {url}: {'200 + body over HTTP/2' if ok else 'NO HTTP/2 200 + body; nghttp said:'}")
    if not ok:
        shown = [line for line in out.splitlines() if not line.startswith(" " * 10) and "PRIORITY frame" not in line]
        print("\n".join("      " + line for line in shown[:12]))
    return ok


def grpc_answers(name: str, port: int, message: Path, grpcio: bool, required: bool = False) -> None:
    """nghttp POST of the gRPC message (h2c prior knowledge): :status 200, the message echoed in the DATA, the
    trailer grpc-status: 0 (and content-type application/grpc from grpcio; nghttpd's echo sends none). `required`
    (the upstream itself): a failure stops the bench; else RuntimeError, the proxy's failure."""
    url = f"http://127.0.0.1:{port}/bench.Echo/Unary"
    try:
        out = subprocess.run(["nghttp", "-v", "-d", str(message), "-H", "content-type: application/grpc", "-H",
                              "te: trailers", url], capture_output=True, timeout=10).stdout.decode("latin-1")
    except subprocess.TimeoutExpired:
        out = "(nghttp timed out after 10 s)"
    payload = message.read_bytes()[5:].decode().strip()
    want = [") :status: 200", payload, ") grpc-status: 0"] + [") content-type: application/grpc"] * grpcio
    ok = all(w in out for w in want)
    print(f"  {name:<22} {url}: " + ("200, message echoed, grpc-status 0" if ok else "NOT a good gRPC answer; nghttp "
                                        "said:"))
    if not ok:
        shown = [line for line in out.splitlines() if not line.startswith(" " * 10) and "PRIORITY frame" not in line]
        print("\n".join("      " + line for line in shown[:16]))
        if required:
            raise RuntimeError(f"the gRPC upstream on 127.0.0.1:{port} does not answer as it should")
        raise RuntimeError("does not proxy gRPC (see above)")


def ws_answers(name: str, port: int) -> None:
    """ws_echo.py's client through the proxy: 20 messages on 1 connection, every echo right."""
    out = subprocess.run([sys.executable, str(HERE / "ws_echo.py"), "client", f"ws://127.0.0.1:{port}/ws/echo",
                          "--connections", "1", "--messages", "20", "--seconds", "10"],
                         capture_output=True, text=True, timeout=30)
    line = next((x for x in out.stdout.splitlines() if x.startswith("bench-ws: ")), "")
    r = json.loads(line.split(": ", 1)[1]) if line else {}
    ok = r.get("messages") == 20 and not r.get("error_count")
    print(f"  {name:<22} ws://127.0.0.1:{port}/ws/echo: {'20 of 20 echoed' if ok else 'FAILED'}")
    if not ok:
        print(f"      {r.get('errors') or (out.stdout + out.stderr)[-1500:]}")
        raise RuntimeError("does not proxy WebSocket (see above)")


def app_attest_check(lab: Lab, row: Row, label: str, run: Run) -> None:
    """The lists must last the run (after a wrap every request is a replayed counter, 401), and the store's counters
    must have advanced once per completed request, plus at most one in flight per device when wrk stopped, plus one:
    wrk checks thread 0's request() once in its main thread, which skips a line (a counter) of device 0."""
    s, f, reqs, w = lab.s, run.fig, run.fig["reqs"], lab.s.aa_per_warm
    if f["warm_wraps"]:
        print(f"bench: {label}: the warm-up used up its {s.aa_per_warm} assertions per device and replayed them (401s "
              "in the warm-up only)")
    if f["wraps"]:
        run.fail(f"assertion lists exhausted {f['wraps']}x (raise BENCH_APPATTEST_ASSERTIONS)",
                 f"{label}: a device's {s.aa_per_run} assertions ran out ({f['wraps']} wrap-arounds): replays "
                 "followed, the run is INVALID; raise BENCH_APPATTEST_ASSERTIONS")
    db = next((lab.tmp / row.proxy.name).glob("state-*.db"))   # fresh_sqlite left only this run's
    try:   # how far the devices' counters advanced past the warm-up's
        with closing(sqlite3.connect(db, timeout=5)) as c:
            query = "SELECT COALESCE(SUM(counter - ?), 0) FROM keys WHERE counter > ?"
            f["stored"] = c.execute(query, (w, w)).fetchone()[0]
    except sqlite3.Error as e:
        print(f"bench: reading the counters from {db} failed: {e}")
        return
    if not reqs <= f["stored"] <= reqs + s.aa_devices + 1:
        run.fail(f"store accepted {f['stored']} assertions for {reqs} requests",
                 f"{label}: the store's counters advanced by {f['stored']} for {reqs} completed requests: not one "
                 "accepted assertion per request")
