"""The bench's tables, one per round and then the median of the rounds, the ratios under them (against the targets,
an INVALID side flagged) in the shape docs/performance.md quotes, and with BENCH_BASELINE_BIN each gateway row against
its `@base` twin. A row with a failed or erroneous run is INVALID."""

from __future__ import annotations

import statistics

from load import Run

# (header, figure, width: negative = left-aligned, format, how rounds combine: median | sum | last)
WRK_COLUMNS = [("proxy", "name", -19, "", ""), ("req/s", "rps", 10, "%.2f", "median"),
               ("p50 us", "p50", 8, "%.1f", "median"), ("p99 us", "p99", 8, "%.1f", "median"),
               ("CPU us/req", "cpu", 12, "%.2f", "median"), ("CPU s", "cpus", 8, "%.2f", "median"),
               ("requests", "reqs", 11, "%d", "median"), ("wrk errors", "errors", 0, "", "")]
H2_COLUMNS = [("row", "name", -14, "", ""), ("h2load", "desc", -21, "", ""), ("req/s", "rps", 10, "%.2f", "median"),
              ("mean us", "mean", 8, "%.1f", "median"), ("max us", "max", 8, "%.1f", "median"),
              ("CPU us/req", "cpu", 10, "%.2f", "median"), ("CPU s", "cpus", 7, "%.2f", "median"),
              ("core1 %", "core1", 7, "%.0f", "median"), ("succeeded", "ok", 9, "%d", "median"),
              ("failed", "fail_count", 6, "%d", "sum"), ("protocol", "proto", -8, "%s", "last"),
              ("errors", "errors", 0, "", "")]
WS_COLUMNS = [("row", "name", -14, "", ""), ("client", "desc", -21, "", ""), ("msg/s", "rps", 10, "%.2f", "median"),
              ("mean us", "mean", 8, "%.1f", "median"), ("p99 us", "p99", 8, "%.1f", "median"),
              ("CPU us/msg", "cpu", 10, "%.2f", "median"), ("CPU s", "cpus", 7, "%.2f", "median"),
              ("core1 %", "core1", 7, "%.0f", "median"), ("messages", "ok", 9, "%d", "median"),
              ("errors", "errors", 0, "", "")]
WS_TITLE = ("WebSocket rows (ws_echo.py client on core 1: each message awaits its echo; mean/p99: round trip; "
            "CPU us/msg: the proxy's CPU per echoed message, one frame each way)")
BASE_COLUMNS = [("row", "name", -19, "", ""), ("base req/s", "base_rps", 10, "%.2f", ""),
                ("req/s", "rps", 10, "%.2f", ""), ("ratio", "rps_ratio", 6, "%.3f", ""),
                ("base CPU us/req", "base_cpu", 15, "%.2f", ""), ("CPU us/req", "cpu", 10, "%.2f", ""),
                ("ratio", "cpu_ratio", 6, "%.3f", ""), ("CPU ratio per round", "errors", 0, "", "")]


class Table:
    def __init__(self, rows: list) -> None:
        self.rows, self.runs = rows, {r.name: [] for r in rows if not r.skip}   # row -> its runs, round by round
        self.crypto: dict[str, float] = {}   # crypto_limit.measure's figures (the limits of the verifying rows)

    def values(self, name: str, attr: str) -> list:
        return [v for r in self.runs.get(name, []) if (v := r.fig.get(attr)) is not None]

    def median(self, name: str, attr: str) -> float | None:
        return statistics.median(self.values(name, attr)) if self.values(name, attr) else None

    def invalid(self, name: str) -> str:
        bad = [k + 1 for k, r in enumerate(self.runs.get(name, [])) if "rps" not in r.fig or r.errors]
        return f"INVALID: errors in round {bad[-1]} (see above)" if bad else ""

    def any_errors(self) -> bool:
        return any(map(self.invalid, self.runs))


def line(columns: list, cells: dict[str, str]) -> str:
    padded = [("%-*s" if w < 0 else "%*s") % (abs(w), cells.get(attr, "-")) for _, attr, w, _, _ in columns[:-1]]
    return "| " + " | ".join(padded + [cells.get(columns[-1][1], "none")])


def table(columns: list, names: list[str]) -> tuple[list, str]:
    """The columns with the name column as wide as the longest name (`@base` can make it wider), and the header."""
    head, attr, width, *rest = columns[0]
    columns = [(head, attr, -max([-width, *map(len, names)]), *rest), *columns[1:]]
    rule = "|".join("-" * (abs(c[2]) + 2) for c in columns[:-1]) + "|" + "-" * (len(columns[-1][0]) + 1)
    return columns, line(columns, {attr: head for head, attr, *_ in columns}) + "\n|" + rule


def round_cells(columns: list, run: Run) -> dict[str, str]:
    cells = {attr: fmt % run.fig[attr] for _, attr, _, fmt, _ in columns if fmt and run.fig.get(attr) is not None}
    return {**cells, "rps": cells.get("rps", "FAILED"), "errors": "; ".join(run.errors + run.notes) or "none"}


def median_cells(t: Table, columns: list, name: str) -> dict[str, str]:
    """The median as a round prints it (odd count), else the mean of the two middle values to 2 decimals; `failed`
    summed over the rounds, the last protocol."""
    cells = {}
    for _, attr, _, fmt, how in columns:
        values = t.values(name, attr)
        if values and how == "median":
            cells[attr] = (fmt if len(values) % 2 else "%.2f") % t.median(name, attr)
        elif values and how in ("sum", "last"):
            cells[attr] = fmt % (sum(values) if how == "sum" else values[-1])
    return {**cells, "rps": cells.get("rps", "FAILED"), "errors": t.invalid(name) or "none"}


def print_tables(t: Table, title: str, h2_title: str, cells_of, stored: bool) -> None:
    """Both tables, then redis-server's CPU (and the App Attest store's count) beside its row."""
    print(title)
    for kind, all_columns, heading in (("wrk", WRK_COLUMNS, ""), ("h2", H2_COLUMNS, f"HTTP/2 rows ({h2_title})"),
                                       ("ws", WS_COLUMNS, WS_TITLE)):
        rows = [r for r in t.rows if ("h2" if r.h2 else "ws" if r.ws else "wrk") == kind]
        columns, head = table(all_columns, [r.name for r in rows])
        if rows:
            print(f"   {heading}:\n{head}" if heading else head)
        for row in rows:
            cells = {"rps": "skipped", "errors": row.skip} if row.skip else cells_of(columns, row.name)
            print(line(columns, {"name": row.name, "desc": row.h2 or row.ws, **cells}))
    for name in t.runs:
        side = cells_of([("", "scpu", 0, "%.2f", "median"), ("", "stored", 0, "%d", "median")], name)
        if name.startswith("gw-lu-redis"):
            print(f"   redis-server CPU us/req during {name}: {side.get('scpu', '-')}")
        if stored and name.startswith("gw-appattest-sqlite"):
            print(f"   assertions the SQLite store accepted during {name}: {side.get('stored', '-')}")
    print()


def print_round(t: Table, k: int, order: list[str]) -> None:
    def run_of(name: str) -> Run:
        return t.runs[name][k] if k < len(t.runs.get(name, [])) else Run(errors=["not run"])
    print_tables(t, f"-- round {k + 1} (order: {' '.join(order)} )", "h2load; mean/max: h2load's time for request; "
                 "core1 %: busy share of core 1, h2load + upstream", lambda c, name: round_cells(c, run_of(name)), True)


def print_medians(t: Table, rounds: int) -> None:
    print_tables(t, f"-- median of {rounds} rounds", "h2load; failed: summed over the rounds",
                 lambda c, name: median_cells(t, c, name), False)


TARGET_CPU_RATIO = 0.8   # gateway CPU µs/req ÷ nginx CPU µs/req must be ≤ this
TARGET_RPS_RATIO = 1.2   # gateway req/s ÷ nginx req/s must be ≥ this
TARGET_DISTINCT = 1.5    # gw-rs256-distinct req/s ÷ haproxy-distinct req/s must be ≥ this
TARGET_REPEATED = 1.0    # gw-rs256-repeated req/s ÷ nginx (proxy_pass, no token) req/s must be ≥ this
TARGET_LU_SQLITE = 0.7   # gw-lu-sqlite req/s ÷ gw-rs256-distinct req/s must be ≥ this
LABELS = {"rps": "req/s      ", "cpu": "CPU µs/req "}
MSG_LABELS = {"rps": "msg/s      ", "cpu": "CPU µs/msg "}   # the WebSocket rows': per echoed message
RPS, CPU, BOTH = ("rps",), ("cpu",), ("rps", "cpu")


def ratio(t: Table, width: int, metric: str, a: str, b: str, target: float | None = None, at_least: bool = True,
          b_label: str = "", labels: dict = LABELS) -> str:
    """`<metric> a ÷ b = r`, against the target if there is one; `unavailable` when a side has no result."""
    label = f"{labels[metric]} {f'{a} ÷ {b_label or b}':<{width}}"
    x, y = t.median(a, metric), t.median(b, metric)
    flags = "".join(f" [{n} INVALID]" for n in (a, b) if t.invalid(n))
    if x is None or not y:
        return f"{label} = unavailable (no result){flags}"
    if target is None:
        return f"{label} = {x / y:.2f}{flags}"
    met = "MET" if (x / y >= target if at_least else x / y <= target) else "MISSED"
    return f"{label} = {x / y:.2f}  (target {'≥' if at_least else '≤'} {target}: {met}){flags}"


def summary(t: Table, s) -> list[str]:
    """Every section the selected rows have, then a line per row that is skipped or INVALID."""
    def section(width: int, *entries) -> list[str]:   # entries: (metrics, a, b[, target, at least?])
        return [ratio(t, width, m, a, b, *target) for metrics, a, b, *target in entries for m in metrics]

    def added(a: str, b: str) -> float | None:   # CPU µs/req of row a over row b
        x, y = t.median(a, "cpu"), t.median(b, "cpu")
        return None if x is None or y is None else x - y
    lines = ["-- plain proxy path (no verification)",
             *section(34, (CPU, "attest-gateway", "nginx", TARGET_CPU_RATIO, False),
                      (RPS, "attest-gateway", "nginx", TARGET_RPS_RATIO))]
    if s.rs256:
        gd, gr, hd = (added(a, b) for a, b in (("gw-rs256-distinct", "attest-gateway"),
                                               ("gw-rs256-repeated", "attest-gateway"), ("haproxy-distinct", "nginx")))
        lines += ["-- RS256 App Check tokens",
                  *section(36, (RPS, "gw-rs256-distinct", "haproxy-distinct", TARGET_DISTINCT),
                           (CPU, "gw-rs256-distinct", "haproxy-distinct"),
                           (RPS, "gw-rs256-repeated", "nginx", TARGET_REPEATED), (CPU, "gw-rs256-repeated", "nginx"),
                           (BOTH, "gw-rs256-repeated", "haproxy-repeated")),
                  ("CPU µs/req added by verification: gateway distinct %+.2f, gateway repeated %+.2f (vs "
                   "attest-gateway)" % (gd, gr) if None not in (gd, gr) else "")
                  + ("; haproxy distinct %+.2f (vs nginx proxy_pass)" % hd if hd is not None else "")]
    if s.lu:
        sqlite, redis = added("gw-lu-sqlite", "gw-rs256-distinct"), added("gw-lu-redis", "gw-rs256-distinct")
        store = "CPU µs/req added by the store (vs gw-rs256-distinct): "
        store += "sqlite %+.2f" % sqlite if sqlite is not None else ""
        store += "; redis %+.2f in the gateway" % redis if redis is not None else ""
        if redis is not None and (side := t.median("gw-lu-redis", "scpu")) is not None:
            store += " + %.2f in redis-server (core 1, not in the gateway figure) = %+.2f" % (side, redis + side)
        lines += ["-- limited use (each jti consumed once; SQLite: one WAL commit per batch, Redis: one Lua "
                  "script call per batch of up to 128; a Cluster: the batch pipelined per master)", *section(33, (RPS, "gw-lu-sqlite", "gw-rs256-distinct", TARGET_LU_SQLITE),
                                          (CPU, "gw-lu-sqlite", "gw-rs256-distinct"),
                                          (BOTH, "gw-lu-redis", "gw-rs256-distinct"))]
        lines += [store] if t.median("gw-rs256-distinct", "cpu") is not None else []
        tls, plain = t.median("gw-lu-rediss", "cpu"), t.median("gw-lu-redis", "cpu")
        tls_side, plain_side = t.median("gw-lu-rediss", "scpu"), t.median("gw-lu-redis", "scpu")
        if None not in (tls, plain):
            line = "Redis over TLS vs plain: gateway CPU µs/req %.2f vs %.2f (%.2fx)" % (tls, plain, tls / plain)
            if None not in (tls_side, plain_side) and plain_side > 0:
                line += "; redis-server %.2f vs %.2f (%.2fx)" % (tls_side, plain_side, tls_side / plain_side)
            lines += [line, *section(33, (RPS, "gw-lu-rediss", "gw-lu-redis"))]
        cluster, cluster_side = t.median("gw-lu-redis-cluster", "cpu"), t.median("gw-lu-redis-cluster", "scpu")
        if None not in (cluster, plain):
            line = ("Redis Cluster (3 masters) vs one Redis: gateway CPU µs/req %.2f vs %.2f (%.2fx)"
                    % (cluster, plain, cluster / plain))
            if None not in (cluster_side, plain_side) and plain_side > 0:
                line += "; redis-server (the 3 masters together) %.2f vs %.2f (%.2fx)" % (
                    cluster_side, plain_side, cluster_side / plain_side)
            lines += [line, *section(33, (RPS, "gw-lu-redis-cluster", "gw-lu-redis"))]
    if s.aa:
        lines += [f"-- App Attest assertions (binding: request; ECDSA P-256 verify + SQLite counter compare-and-set "
                  f"per request; wrk -c{s.aa_devices}, the others -c{s.conns})",
                  *section(39, (BOTH, "gw-appattest-sqlite", "attest-gateway"))]
        lines += (section(39, (BOTH, "gw-appattest-sqlite", "gw-rs256-distinct")) if s.rs256 else
                  [f"{LABELS[m]} gw-appattest-sqlite ÷ gw-rs256-distinct = n/a (BENCH_RS256=0)" for m in BOTH])
        a, d = added("gw-appattest-sqlite", "attest-gateway"), added("gw-appattest-sqlite", "gw-rs256-distinct")
        more = "; %+.2f more than RS256 App Check (vs gw-rs256-distinct)" % d if d is not None else ""
        lines += ["CPU µs/req added by App Attest (vs attest-gateway): %+.2f%s" % (a, more)] if a is not None else []
    if s.play:
        lines += ["-- Play Integrity classic tokens (decoded locally on every request: AES-256 key unwrap, AES-256-GCM, "
                  "ECDSA P-256 verify; binding: request)", *section(39, (BOTH, "gw-play-classic", "attest-gateway"))]
        a, c = added("gw-play-classic", "attest-gateway"), t.crypto
        if "gcm" in c and "p256_verify" in c:
            limit = c["p256_verify"] + c["gcm"] + c["unwrap"]
            lines.append("openssl speed on core 0, this run: P-256 verify %.2f µs + AES-256-GCM of %d bytes %.2f µs + "
                         "AES-256 unwrap %.2f µs = %.2f µs" % (c["p256_verify"], c["bytes"], c["gcm"], c["unwrap"], limit))
            lines += ["CPU µs/req added by a classic token (vs attest-gateway): %+.2f = %.2f x the cryptography's limit"
                      % (a, a / limit)] if a is not None else []
        else:
            lines.append("openssl speed: its output could not be read (no limit for the Play Integrity row)")
    if s.h2:
        lines += ["-- HTTP/2 (h2load for every row here; no HTTP/2 target is set: information)",
                  *section(32, (BOTH, "gw-h2c", "nginx-h2c"), (BOTH, "gw-h2c-mux", "nginx-h2c-mux"),
                           (BOTH, "gw-h2c", "gw-h1-h2load"), (BOTH, "gw-h2c-mux", "gw-h1-h2load")),
                  *(section(32, (BOTH, "gw-h2-tls", "nginx-h2-tls")) if s.h2_tls else []),
                  # the same process under both load generators: how far h2load's and wrk's figures differ
                  ratio(t, 32, "cpu", "gw-h1-h2load", "attest-gateway", b_label="attest-gateway (wrk)")]
    if s.grpc:
        lines += [f"-- gRPC unary over h2c (h2load POST -c{s.grpc_conns} -m{s.grpc_streams} → proxy → "
                  f"{s.grpc_upstream} echo, h2c; no target: information)",
                  *section(32, (BOTH, "gw-grpc", "nginx-grpc"))]
        for name in ("gw-grpc", "nginx-grpc"):
            core1 = t.median(name, "core1")
            lines += [f"{name}: core 1 (h2load + upstream) {core1:.0f} % busy: req/s is bounded there, compare "
                      "CPU µs/req"] if core1 is not None and core1 >= 90 else []
    if s.ws:
        lines += [f"-- WebSocket echo ({s.ws_conns} connections, {s.ws_messages} messages, each awaiting its echo; "
                  "the client does not saturate either proxy: compare CPU µs/msg; no target: information)",
                  *(ratio(t, 32, m, "gw-ws", "nginx-ws", labels=MSG_LABELS) for m in ("cpu", "rps"))]
    lines += targets(t, s)
    lines += baseline(t, s) if s.base else []
    lines += [f"{r.name}: skipped: {r.skip}" for r in t.rows if r.skip]
    return lines + [f"{n}: {t.invalid(n)}: its figures do not count" for n in t.runs if t.invalid(n)]


def targets(t: Table, s) -> list[str]:
    """The performance issue's targets, each as this run's figure against its limit (`openssl speed` on core 0 in
    this run where the limit is cryptography): MET / MISSED, or `n/a` with why (a row not run, a limit not read)."""
    c = t.crypto

    def cpu(a: str, b: str) -> float | None:
        x, y = t.median(a, "cpu"), t.median(b, "cpu")
        return None if x is None or y is None else x - y

    def quotient(metric: str, a: str, b: str) -> float | None:
        x, y = t.median(a, metric), t.median(b, metric)
        return None if x is None or not y else x / y

    def row(figure: str, rows: tuple[str, ...], value: float | None, limit: float | None, unit: str,
            why: str = "") -> str:
        flags = "".join(f" [{n} INVALID]" for n in rows if t.invalid(n))
        if value is None or limit is None:
            return f"{figure:<62} n/a ({why or 'a row was not run'}){flags}"
        shown = {"µs": f"{value:+.2f} µs", "µs/req": f"{value:.2f} µs"}.get(unit, f"{value:.2f}x")
        bound = f"{limit:.2f} µs" if unit.startswith("µs") else f"{limit:.2f}x"
        met = "MET" if value <= limit else "MISSED"
        return f"{figure:<62} {shown:>11}  limit {bound:>10}  {met}{flags}"

    def at_least(figure: str, rows: tuple[str, ...], value: float | None, limit: float) -> str:
        flags = "".join(f" [{n} INVALID]" for n in rows if t.invalid(n))
        if value is None:
            return f"{figure:<62} n/a (a row was not run){flags}"
        return f"{figure:<62} {value:>10.2f}x  least {limit:>9.2f}x  {'MET' if value >= limit else 'MISSED'}{flags}"

    rsa, p256, sha = c.get("rsa_verify"), c.get("p256_verify"), c.get("sha256")
    lines = ["-- targets of the performance issue (this run; limits: openssl speed on core 0 after the rounds: " +
             ", ".join(f"{k} {v:.2f} µs" for k, v in (("RSA-2048 verify", rsa), ("P-256 verify", p256),
                                                      (f"SHA-256 of {c.get('token_bytes', 0):.0f} bytes", sha)) if v)
             + ")"]
    if s.rs256:
        lines += [row("CPU added by a distinct RS256 token (≤ 1.3 x RSA-2048 verify)", ("gw-rs256-distinct",),
                      cpu("gw-rs256-distinct", "attest-gateway"), rsa and 1.3 * rsa, "µs", "openssl speed unread"),
                  at_least("req/s distinct tokens ÷ haproxy-distinct", ("gw-rs256-distinct", "haproxy-distinct"),
                           quotient("rps", "gw-rs256-distinct", "haproxy-distinct"), TARGET_DISTINCT),
                  row("CPU added by a repeated RS256 token (≤ plain + 3 µs)", ("gw-rs256-repeated",),
                      cpu("gw-rs256-repeated", "attest-gateway"), 3.0, "µs"),
                  at_least("req/s repeated token ÷ nginx proxy_pass", ("gw-rs256-repeated", "nginx"),
                           quotient("rps", "gw-rs256-repeated", "nginx"), TARGET_REPEATED)]
    if s.rs256 and s.lu:
        lines += [row("CPU the SQLite store adds in the gateway (≤ 15 µs)", ("gw-lu-sqlite",),
                      cpu("gw-lu-sqlite", "gw-rs256-distinct"), 15.0, "µs"),
                  row("CPU the Redis store adds in the gateway (≤ 15 µs)", ("gw-lu-redis",),
                      cpu("gw-lu-redis", "gw-rs256-distinct"), 15.0, "µs"),
                  row("redis-server's own CPU per request (≤ 20 µs)", ("gw-lu-redis",),
                      t.median("gw-lu-redis", "scpu"), 20.0, "µs/req")]
    if s.aa:
        lines.append(row("CPU added by an App Attest assertion (≤ P-256 verify + 30 µs)", ("gw-appattest-sqlite",),
                         cpu("gw-appattest-sqlite", "attest-gateway"), p256 and p256 + 30, "µs", "openssl speed unread"))
    if s.h2:
        lines.append(row("h2c CPU per request ÷ HTTP/1.1's, both under h2load (≤ 1.1)", ("gw-h2c", "gw-h1-h2load"),
                         quotient("cpu", "gw-h2c", "gw-h1-h2load"), 1.1, "x"))
    lines.append(row("plain proxy CPU per request ÷ nginx proxy_pass (≤ 0.8)", ("attest-gateway", "nginx"),
                     quotient("cpu", "attest-gateway", "nginx"), TARGET_CPU_RATIO, "x"))
    return lines


def baseline(t: Table, s) -> list[str]:
    """Each gateway row against its twin on BENCH_BASELINE_BIN, measured in the same rounds right beside it: medians,
    current ÷ baseline, and the spread of the rounds' CPU ratios (what noise does to the ratio); then the h2c cost."""
    names = [n.removesuffix("@base") for n in t.runs if n.endswith("@base") and n.removesuffix("@base") in t.runs]
    columns, head = table(BASE_COLUMNS, names)
    lines = [f"-- baseline: {s.base} (rows <row>@base), each run right beside the current binary's in every round; "
             "ratio = current ÷ baseline", head]
    for name in names:
        cells = {}
        for attr in ("rps", "cpu"):
            now, base = t.median(name, attr), t.median(name + "@base", attr)
            cells.update({attr: now, f"base_{attr}": base, f"{attr}_ratio": now / base if now and base else None})
        cells = {attr: fmt % cells[attr] for _, attr, _, fmt, _ in columns if fmt and cells.get(attr) is not None}
        rounds = [a.fig["cpu"] / b.fig["cpu"] for a, b in zip(t.runs[name], t.runs[name + "@base"])
                  if a.fig.get("cpu") and b.fig.get("cpu")]
        spread = f"{min(rounds):.3f} .. {max(rounds):.3f}" if rounds else "-"
        spread += "; higher in every round" if len(rounds) > 1 and min(rounds) > 1 else ""
        flags = "".join(f" [{n} INVALID]" for n in (name, name + "@base") if t.invalid(n))
        lines.append(line(columns, {**cells, "name": name, "errors": spread + flags}))

    def h2c_cost(sfx: str) -> str:
        h2c, h1 = t.median("gw-h2c" + sfx, "cpu"), t.median("gw-h1-h2load" + sfx, "cpu")
        return "unavailable" if not h2c or not h1 else f"{h2c:.2f} ÷ {h1:.2f} = {h2c / h1:.3f}"
    return lines + ([f"h2c cost per request (CPU µs/req gw-h2c ÷ gw-h1-h2load, h2load both): baseline "
                     f"{h2c_cost('@base')}, current {h2c_cost('')}"] if s.h2 else [])
