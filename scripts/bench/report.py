"""The bench's tables, one per round and then the median of the rounds, and the ratios under them (against the
targets, an INVALID side flagged), in the shape docs/performance.md quotes. Rows holds every row's runs; a row with a
failed or erroneous run is INVALID."""

from __future__ import annotations

from dataclasses import dataclass, field

from load import Run

# (header, Run attribute, width: negative = left-aligned, format, how rounds combine: median | sum | last)
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


@dataclass
class Rows:
    wrk: list[str] = field(default_factory=list)
    h2: dict[str, str] = field(default_factory=dict)          # HTTP/2 row -> its h2load column
    skipped: dict[str, str] = field(default_factory=dict)     # HTTP/2 row -> why it is not run
    runs: dict[str, list[Run]] = field(default_factory=dict)  # row -> its runs, round by round

    def values(self, name: str, attr: str) -> list:
        return [v for r in self.runs.get(name, []) if (v := getattr(r, attr, None)) is not None]

    def median(self, name: str, attr: str) -> float | None:
        v, n = sorted(self.values(name, attr)), len(self.values(name, attr))
        return None if not n else v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2

    def invalid(self, name: str) -> str:
        bad = [k + 1 for k, r in enumerate(self.runs.get(name, [])) if r.rps is None or r.errors]
        return f"INVALID: errors in round {bad[-1]} (see above)" if bad else ""

    def any_errors(self) -> bool:
        return any(self.invalid(name) for name in self.runs)


def figure(run: Run, attr: str, fmt: str) -> str:
    value = getattr(run, attr, None)
    return "-" if value is None else fmt % value


def line(columns: list, cells: dict[str, str]) -> str:
    padded = [("%-*s" if w < 0 else "%*s") % (abs(w), cells.get(attr, "-")) for _, attr, w, _, _ in columns[:-1]]
    return "| " + " | ".join(padded + [cells.get(columns[-1][1], "none")])


def header(columns: list) -> str:
    rule = "|".join("-" * (abs(c[2]) + 2) for c in columns[:-1]) + "|" + "-" * (len(columns[-1][0]) + 1)
    return line(columns, {attr: head for head, attr, *_ in columns}) + "\n|" + rule


def round_cells(columns: list, run: Run) -> dict[str, str]:
    cells = {attr: fmt % getattr(run, attr) for _, attr, _, fmt, _ in columns
             if fmt and getattr(run, attr, None) is not None}
    return {**cells, "rps": cells.get("rps", "FAILED"), "errors": "; ".join(run.errors + run.notes) or "none"}


def median_cells(rows: Rows, columns: list, name: str) -> dict[str, str]:
    """The median as a round prints it (odd count), else the mean of the two middle values to 2 decimals; `failed`
    summed over the rounds, the last protocol."""
    cells = {}
    for _, attr, _, fmt, how in columns:
        values, m = rows.values(name, attr), rows.median(name, attr) if how == "median" else None
        if values and how == "median":
            cells[attr] = fmt % m if len(values) % 2 else "%.2f" % m
        elif values and how in ("sum", "last"):
            cells[attr] = fmt % (sum(values) if how == "sum" else values[-1])
    return {**cells, "rps": cells.get("rps", "FAILED"), "errors": rows.invalid(name) or "none"}


def print_tables(rows: Rows, cells_of, h2_title: str) -> None:
    print(header(WRK_COLUMNS))
    for name in rows.wrk:
        print(line(WRK_COLUMNS, {"name": name, **cells_of(WRK_COLUMNS, name)}))
    if rows.h2:
        print(f"   HTTP/2 rows ({h2_title}):\n{header(H2_COLUMNS)}")
    for name, desc in rows.h2.items():
        cells = {"rps": "skipped", "errors": rows.skipped[name]} if name in rows.skipped else cells_of(H2_COLUMNS, name)
        print(line(H2_COLUMNS, {"name": name, "desc": desc, **cells}))


def print_round(rows: Rows, k: int, order: list[str], lu: bool, aa: bool) -> None:
    """Round k (0-based) as it was measured."""
    def run_of(name: str) -> Run:
        return rows.runs[name][k] if k < len(rows.runs.get(name, [])) else Run(errors=["not run"])
    print(f"-- round {k + 1} (order: {' '.join(order)} )")
    print_tables(rows, lambda columns, name: round_cells(columns, run_of(name)),
                 "h2load; mean/max: h2load's time for request; core1 %: busy share of core 1, h2load + upstream")
    if lu:
        print(f"   redis-server CPU us/req during gw-lu-redis: {figure(run_of('gw-lu-redis'), 'scpu', '%.2f')}")
    if aa:
        print("   assertions the SQLite store accepted during gw-appattest-sqlite: "
              f"{figure(run_of('gw-appattest-sqlite'), 'stored', '%d')}")
    print()


def print_medians(rows: Rows, rounds: int, lu: bool) -> None:
    print(f"-- median of {rounds} rounds")
    print_tables(rows, lambda columns, name: median_cells(rows, columns, name),
                 "h2load; failed: summed over the rounds")
    if lu:
        print(f"   redis-server CPU us/req during gw-lu-redis: "
              f"{median_cells(rows, [('', 'scpu', 0, '%.2f', 'median')], 'gw-lu-redis').get('scpu', '-')}")
    print()


TARGET_CPU_RATIO = 0.8   # gateway CPU µs/req ÷ nginx CPU µs/req must be ≤ this
TARGET_RPS_RATIO = 1.2   # gateway req/s ÷ nginx req/s must be ≥ this
TARGET_DISTINCT = 1.5    # gw-rs256-distinct req/s ÷ haproxy-distinct req/s must be ≥ this
TARGET_REPEATED = 1.0    # gw-rs256-repeated req/s ÷ nginx (proxy_pass, no token) req/s must be ≥ this
TARGET_LU_SQLITE = 0.7   # gw-lu-sqlite req/s ÷ gw-rs256-distinct req/s must be ≥ this
LABELS = {"rps": "req/s      ", "cpu": "CPU µs/req "}
BOTH = ("rps", "cpu")

# section: (label width, [(metrics, numerator, denominator, target, at least?)])
PLAIN = (34, [(("cpu",), "attest-gateway", "nginx", TARGET_CPU_RATIO, False),
              (("rps",), "attest-gateway", "nginx", TARGET_RPS_RATIO, True)])
RS256 = (36, [(("rps",), "gw-rs256-distinct", "haproxy-distinct", TARGET_DISTINCT, True),
              (("cpu",), "gw-rs256-distinct", "haproxy-distinct", None, True),
              (("rps",), "gw-rs256-repeated", "nginx", TARGET_REPEATED, True),
              (("cpu",), "gw-rs256-repeated", "nginx", None, True),
              (BOTH, "gw-rs256-repeated", "haproxy-repeated", None, True)])
LIMITED_USE = (33, [(("rps",), "gw-lu-sqlite", "gw-rs256-distinct", TARGET_LU_SQLITE, True),
                    (("cpu",), "gw-lu-sqlite", "gw-rs256-distinct", None, True),
                    (BOTH, "gw-lu-redis", "gw-rs256-distinct", None, True)])
HTTP2 = (32, [(BOTH, a, b, None, True) for a, b in (("gw-h2c", "nginx-h2c"), ("gw-h2c-mux", "nginx-h2c-mux"),
                                                    ("gw-h2c", "gw-h1-h2load"), ("gw-h2c-mux", "gw-h1-h2load"))])
HTTP2_TLS = (32, [(BOTH, "gw-h2-tls", "nginx-h2-tls", None, True)])


def ratio(rows: Rows, width: int, metric: str, a: str, b: str, target: float | None, at_least: bool,
          b_label: str = "") -> str:
    """`<metric> a ÷ b = r`, against the target if there is one; `unavailable` when a side has no result."""
    label = f"{LABELS[metric]} {f'{a} ÷ {b_label or b}':<{width}}"
    x, y = rows.median(a, metric), rows.median(b, metric)
    flags = "".join(f" [{n} INVALID]" for n in (a, b) if rows.invalid(n))
    if x is None or not y:
        return f"{label} = unavailable (no result){flags}"
    if target is None:
        return f"{label} = {x / y:.2f}{flags}"
    met = "MET" if (x / y >= target if at_least else x / y <= target) else "MISSED"
    return f"{label} = {x / y:.2f}  (target {'≥' if at_least else '≤'} {target}: {met}){flags}"


def section(rows: Rows, spec: tuple) -> list[str]:
    width, entries = spec
    return [ratio(rows, width, m, a, b, target, at_least)
            for metrics, a, b, target, at_least in entries for m in metrics]


def added(rows: Rows, a: str, b: str) -> float | None:
    """CPU µs/req of row a over row b."""
    x, y = rows.median(a, "cpu"), rows.median(b, "cpu")
    return None if x is None or y is None else x - y


def verification_cost(rows: Rows) -> str:
    gd, gr = added(rows, "gw-rs256-distinct", "attest-gateway"), added(rows, "gw-rs256-repeated", "attest-gateway")
    hd = added(rows, "haproxy-distinct", "nginx")
    text = ("CPU µs/req added by verification: gateway distinct %+.2f, gateway repeated %+.2f (vs attest-gateway)"
            % (gd, gr) if gd is not None and gr is not None else "")
    return text + ("; haproxy distinct %+.2f (vs nginx proxy_pass)" % hd if hd is not None else "")


def store_cost(rows: Rows) -> list[str]:
    sqlite, redis = added(rows, "gw-lu-sqlite", "gw-rs256-distinct"), added(rows, "gw-lu-redis", "gw-rs256-distinct")
    side = rows.median("gw-lu-redis", "scpu")
    if rows.median("gw-rs256-distinct", "cpu") is None:
        return []
    text = "CPU µs/req added by the store (vs gw-rs256-distinct): sqlite %+.2f" % sqlite if sqlite is not None else ""
    text += "; redis %+.2f in the gateway" % redis if redis is not None else ""
    if redis is not None and side is not None:
        text += " + %.2f in redis-server (core 1, not in the gateway figure) = %+.2f" % (side, redis + side)
    return [text]


def app_attest(rows: Rows, devices: int, conns: int, with_rs256: bool) -> list[str]:
    lines = [f"-- App Attest assertions (binding: request; ECDSA P-256 verify + SQLite counter compare-and-set per "
             f"request; wrk -c{devices}, the others -c{conns})"]
    lines += section(rows, (39, [(BOTH, "gw-appattest-sqlite", "attest-gateway", None, True)]))
    lines += (section(rows, (39, [(BOTH, "gw-appattest-sqlite", "gw-rs256-distinct", None, True)])) if with_rs256 else
              [f"{LABELS[m]} gw-appattest-sqlite ÷ gw-rs256-distinct = n/a (BENCH_RS256=0)" for m in BOTH])
    a, d = added(rows, "gw-appattest-sqlite", "attest-gateway"), added(rows, "gw-appattest-sqlite", "gw-rs256-distinct")
    more = "; %+.2f more than RS256 App Check (vs gw-rs256-distinct)" % d if d is not None else ""
    if a is not None:
        lines.append("CPU µs/req added by App Attest (vs attest-gateway): %+.2f%s" % (a, more))
    return lines


def summary(rows: Rows, s) -> list[str]:
    """Every section the selected rows have, then a line per row that is skipped or INVALID."""
    lines = ["-- plain proxy path (no verification)", *section(rows, PLAIN)]
    if s.rs256:
        lines += ["-- RS256 App Check tokens", *section(rows, RS256), verification_cost(rows)]
    if s.lu:
        lines += ["-- limited use (each jti consumed once; SQLite: one WAL commit per request, Redis: one Lua script "
                  "round trip)", *section(rows, LIMITED_USE), *store_cost(rows)]
    if s.aa:
        lines += app_attest(rows, s.aa_devices, s.conns, s.rs256)
    if s.h2:
        lines += ["-- HTTP/2 (h2load for every row here; no HTTP/2 target is set: information)", *section(rows, HTTP2)]
        lines += section(rows, HTTP2_TLS) if s.h2_tls else []
        # the same process under both load generators: how far h2load's and wrk's figures differ
        lines.append(ratio(rows, 32, "cpu", "gw-h1-h2load", "attest-gateway", None, True, "attest-gateway (wrk)"))
    lines += [f"{n}: skipped: {why}" for n, why in rows.skipped.items()]
    return lines + [f"{n}: {rows.invalid(n)}: its figures do not count" for n in rows.runs if rows.invalid(n)]
