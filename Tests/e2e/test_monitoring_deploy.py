"""The fleet view: deploy/grafana/attest-gateway.json, deploy/prometheus/attest-gateway.rules.yml (and its
promtool unit tests), deploy/kubernetes/servicemonitor.yaml and networkpolicy.yaml.

- Rules: `promtool check rules` accepts the file, `promtool test rules` passes, every alert has a `for:`, a
  severity, a summary, a description and a runbook_url naming a heading of docs/runbook.md, and the unit tests show
  every alert firing at least once.
- Dashboard: a Prometheus `${datasource}` variable and a `route` variable from label_values; every PromQL expression
  (panels and variables, with the template variables filled in) is parsed by promtool.
- Metric names: every family the dashboard and the rules name (histogram `_bucket`/`_sum`/`_count` series mapped
  to their family; recorded series followed to the expressions they record), and every label name they group or
  match on, is one a REAL gateway exports: a gateway with an App Check verifier, limited-use tokens on Redis, a
  rate-limited route and an unreachable upstream serves accepted, refused, replayed, rate-limited and failed
  requests and a reload, then loses its Redis; its /metrics is scraped and its `# TYPE` lines and samples are the
  reference. Only `up` (which Prometheus writes per target) is allowed besides.
- Kubernetes: the Services and NetworkPolicies validate against the Kubernetes schema (kubernetes-validate,
  strict); the ServiceMonitor (a CRD the validator has no schema for) is checked by hand: it selects the metrics
  Service, whose port it names and which selects the gateway pods' admin port, on /metrics, with the job name the
  rules expect. The NetworkPolicies open the public port to all, the admin port only to the monitoring namespace's
  Prometheus pods, and Redis only to the gateway pods.

Needs promtool (Debian's `prometheus` package) and kubernetes-validate (PyPI); `scripts/install-deps.sh test`
installs both. Without them the tests fail, they do not skip.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import upstreams as U
from harness import REPO, app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts
from test_deploy import _gateways

DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus" / "attest-gateway.rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "attest-gateway.rules.test.yml"
DASHBOARD = DEPLOY / "grafana" / "attest-gateway.json"
SERVICE_MONITOR = DEPLOY / "kubernetes" / "servicemonitor.yaml"
NETWORK_POLICY = DEPLOY / "kubernetes" / "networkpolicy.yaml"
EXAMPLES = [DEPLOY / "kubernetes" / "sidecar.yaml", DEPLOY / "kubernetes" / "redis-replicas.yaml"]
RUNBOOK = REPO / "docs" / "runbook.md"
JOB = "attest-gateway"   # the scrape job the rules match `up` on, and the ServiceMonitor's jobLabel value

# Series Prometheus itself writes for each target; no gateway exports them.
PROMETHEUS_SERIES = {"up"}
# Labels Prometheus attaches to every scraped series.
TARGET_LABELS = {"job", "instance"}
H = "X-Firebase-AppCheck"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _promtool() -> str:
    path = shutil.which("promtool")
    if not path:
        pytest.fail("promtool not found on PATH (scripts/install-deps.sh test installs Debian's prometheus package)",
                    pytrace=False)
    return path


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=cwd, stdin=subprocess.DEVNULL)


# ----------------------------------------------------------------------------------------------------------------
# PromQL: metric and label names (enough for the expressions of these files; the syntax is promtool's to judge)

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless",
             "inf", "nan", "atan2"}
_GROUPING = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)"


def _plain(expr: str) -> str:
    """expr without string literals, template variables and range or subquery brackets."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"'(?:[^'\\]|\\.)*'", "''", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)
    return re.sub(r"\[[^\]]*\]", "", expr)


def metric_names(expr: str) -> set[str]:
    """Names of the series expr selects: identifiers that are neither functions, aggregations, keywords, label
    names (inside {…} or a by/on/… list) nor parts of a number or duration."""
    e = _plain(expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(_GROUPING, " ", e)
    e = re.sub(r"\boffset\s+-?\w+", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        before = e[m.start() - 1] if m.start() else " "
        if before.isdigit() or before == ".":
            continue                                    # 1e3, 0.5
        if e[m.end():].lstrip().startswith("(") or m.group(0).lower() in _KEYWORDS:
            continue                                    # a function, an aggregation, a keyword
        names.add(m.group(0))
    return names


def label_names(expr: str) -> set[str]:
    """Label names expr matches on ({name=…}) or groups by (by/without/on/ignoring/group_left/group_right)."""
    e = _plain(expr)
    out = set()
    for body in re.findall(r"\{([^}]*)\}", e):
        out |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", body))
    for body in re.findall(_GROUPING, e):
        out |= {x.strip() for x in body.split(",") if x.strip()}
    return out


def _fill_variables(expr: str) -> str:
    """A Grafana expression as Prometheus would get it (every variable at its "All" value)."""
    return (expr.replace("$__rate_interval", "5m").replace("${__rate_interval}", "5m")
            .replace("$__interval", "1m").replace("$__range", "1h")
            .replace('"$job"', '".*"').replace('"$instance"', '".*"').replace('"$route"', '".*"'))


def test_metric_and_label_name_extraction():
    """The extraction itself, on the shapes the two files use (so the checks below cannot pass by extracting
    nothing)."""
    e = ('histogram_quantile(0.99, sum by (route, le) (rate(attest_gateway_request_duration_seconds_bucket'
         '{job=~"$job", route=~"a|b"}[$__rate_interval]))) / on () group_left () sum(x_total offset 1h) > 1e3 '
         'unless on (verifier) y:z:rate5m')
    assert metric_names(e) == {"attest_gateway_request_duration_seconds_bucket", "x_total", "y:z:rate5m"}
    assert label_names(e) == {"route", "le", "job", "verifier"}


# ----------------------------------------------------------------------------------------------------------------
# Rules and their unit tests


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def _alerts() -> list[dict]:
    return [r for r in _rules() if "alert" in r]


def _records() -> dict[str, str]:
    return {r["record"]: r["expr"] for r in _rules() if "record" in r}


def test_promtool_check_rules():
    p = _run(_promtool(), "check", "rules", str(RULES))
    assert p.returncode == 0, p.stdout + p.stderr
    found = re.search(r"SUCCESS: (\d+) rules found", p.stdout)
    assert found and int(found.group(1)) == len(_rules()), p.stdout


def test_promtool_rule_unit_tests_pass():
    p = _run(_promtool(), "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name], "the unit tests must load the rules file"


def test_every_alert_is_unit_tested_firing():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing, quiet = set(), set()
    for t in tests:
        for case in t.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - firing == set(), f"alerts never shown firing by {RULE_TESTS.name}: {sorted(names - firing)}"
    assert (firing | quiet) - names == set(), f"tests for alerts that do not exist: {sorted((firing | quiet) - names)}"
    assert names - quiet == set(), f"alerts never shown staying quiet: {sorted(names - quiet)}"


def _runbook_anchors() -> set[str]:
    anchors = set()
    for line in RUNBOOK.read_text().splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:   # GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).lower().replace("`", "")).replace(" ", "-"))
    return anchors


def test_alerts_have_for_severity_annotations_and_a_runbook_anchor():
    anchors = _runbook_anchors()
    assert "redis-or-sqlite-outage" in anchors and "jwks-outage-googles-app-check-key-set-unreachable" in anchors
    for a in _alerts():
        name = a["alert"]
        assert re.fullmatch(r"\d+[smh]", str(a.get("for", ""))), f"{name}: no for:"
        assert a.get("labels", {}).get("severity") in ("critical", "warning", "info"), f"{name}: severity"
        notes = a.get("annotations", {})
        assert notes.get("summary") and notes.get("description"), f"{name}: summary and description"
        m = re.fullmatch(r"https://\S+/docs/runbook\.md#([\w-]+)", notes.get("runbook_url", ""))
        assert m, f"{name}: runbook_url {notes.get('runbook_url')!r}"
        assert m.group(1) in anchors, f"{name}: docs/runbook.md has no heading #{m.group(1)}"


def test_the_required_alerts_exist():
    exprs = {a["alert"]: a["expr"] for a in _alerts()}
    wanted = {
        "gateway down": lambda e: re.search(r"\bup\{[^}]*job=\"attest-gateway\"[^}]*\}\s*==\s*0", e),
        "key set stale": lambda e: "attest_gateway_jwks_expiry_seconds" in e,
        "key-set fetches failing": lambda e: "attest_gateway_jwks_consecutive_failures" in e,
        "state store unavailable": lambda e: "state_errors" in e,
        "rejection-rate jump": lambda e: "rejected" in e and "offset 1h" in e,
        "replay spike": lambda e: "replays_rejected" in e,
        "upstream errors": lambda e: "upstream_failures" in e,
    }
    for what, test in wanted.items():
        assert any(test(e) for e in exprs.values()), f"no alert for {what}"


# ----------------------------------------------------------------------------------------------------------------
# Dashboard


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(d: dict):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def _variable_query(v: dict) -> str:
    q = v.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


def _dashboard_exprs(d: dict) -> list[tuple[str, str]]:
    """(where, expr) for every panel target and every query variable's label_values metric selector."""
    out = []
    for p in _panels(d):
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", _variable_query(v).strip())
            assert m, f"variable {v['name']}: not label_values(metric, label): {_variable_query(v)!r}"
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def test_dashboard_structure():
    d = _dashboard()
    assert 36 <= d["schemaVersion"] <= 41, d["schemaVersion"]
    assert d["uid"] and d["title"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables.get("datasource")
    assert ds and ds["type"] == "datasource" and ds["query"] == "prometheus", ds
    route = variables.get("route")
    assert route and route["type"] == "query", route
    assert re.fullmatch(r"label_values\(attest_gateway_\w+(\{[^}]*\})?,\s*route\)", _variable_query(route)), route
    ids = [p["id"] for p in _panels(d)]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    graphs = [p for p in _panels(d) if p["type"] != "row"]
    assert len(graphs) >= 12
    for p in graphs:
        assert p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p.get("targets"), f"{p['title']}: no query"
        for t in p["targets"]:
            assert t.get("datasource", p["datasource"]) == p["datasource"], p["title"]
        assert {"h", "w", "x", "y"} <= p["gridPos"].keys() and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
    for v in variables.values():
        if v["type"] == "query":
            assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, v["name"]
            assert v.get("definition", _variable_query(v)) == _variable_query(v), f"{v['name']}: definition differs from query"
    # The route selector is used: requests by route follow it.
    assert any('route=~"$route"' in t["expr"] for p in graphs for t in p["targets"])


def test_dashboard_covers_the_fleet_view():
    used = set()
    for _, expr in _dashboard_exprs(_dashboard()):
        used |= metric_names(expr)
    wanted = {
        "attest_gateway_requests_total", "attest_gateway_verifications_total", "attest_gateway_replays_rejected_total",
        "attest_gateway_request_duration_seconds_bucket", "attest_gateway_upstream_response_seconds_bucket",
        "attest_gateway_jwks_age_seconds", "attest_gateway_jwks_expiry_seconds", "attest_gateway_jwks_consecutive_failures",
        "attest_gateway_state_operation_seconds_bucket", "attest_gateway_state_errors_total",
        "attest_gateway_active_connections", "process_cpu_seconds_total", "process_resident_memory_bytes",
        "process_open_fds", "attest_gateway_config_reloads_total",
    }
    assert wanted - used == set(), f"no panel shows {sorted(wanted - used)}"
    exprs = [e for _, e in _dashboard_exprs(_dashboard())]
    assert any('status="429"' in e for e in exprs), "no rate-limited (429) panel"
    assert any('result!="verified"' in e for e in exprs), "no not-verified share"
    assert any("histogram_quantile(0.99" in e for e in exprs) and any("histogram_quantile(0.5" in e for e in exprs)


def test_every_promql_expression_parses(tmp_path):
    """promtool parses every dashboard expression (as a recording rule) and every rule expression."""
    exprs = [(where, _fill_variables(e)) for where, e in _dashboard_exprs(_dashboard())]
    assert not [w for w, e in exprs if "$" in e], f"unfilled variables: {[(w, e) for w, e in exprs if '$' in e]}"
    doc = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr:{i}", "expr": e}
                                                      for i, (_, e) in enumerate(exprs)]}]}
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(yaml.safe_dump(doc))
    p = _run(_promtool(), "check", "rules", str(path))
    if p.returncode != 0:
        bad = re.findall(r"dashboard:expr:(\d+)", p.stdout + p.stderr)
        pytest.fail(f"{p.stdout}{p.stderr}\n" + "\n".join(f"{exprs[int(i)][0]}: {exprs[int(i)][1]}" for i in bad))
    assert f"SUCCESS: {len(exprs)} rules found" in p.stdout, p.stdout


# ----------------------------------------------------------------------------------------------------------------
# A real gateway's /metrics


def _admin_get(port: int, path: str) -> tuple[int, str]:
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _send(port: int, path: str, token: str | None = None) -> int:
    r = U.one_shot(port, http_get(path, [(H, token)] if token else []))
    assert r is not None, path
    return r.status


class Scrape:
    def __init__(self, text: str):
        self.text = text
        self.types: dict[str, str] = {}
        self.labels: dict[str, set[str]] = {}    # family -> label names seen on its samples
        for line in text.splitlines():
            if m := re.match(r"^# TYPE (\S+) (\S+)$", line):
                self.types[m.group(1)] = m.group(2)
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})? \S+$", line)
            assert m, f"not a sample line: {line!r}"
            family = self.family(m.group(1))
            assert family, f"sample {m.group(1)} without a # TYPE line"
            self.labels.setdefault(family, set()).update(re.findall(r'([A-Za-z_]\w*)="', m.group(3) or ""))

    def family(self, series: str) -> str | None:
        """The family a series name belongs to (a histogram's _bucket, _sum and _count series are its family's)."""
        if series in self.types:
            return series
        for suffix in ("_bucket", "_sum", "_count"):
            base = series[: -len(suffix)]
            if series.endswith(suffix) and self.types.get(base) == "histogram":
                return base
        return None


@pytest.fixture(scope="module")
def scrape(module_factory) -> Scrape:
    f = module_factory
    iss = f.dev_issuer()
    up = f.upstream(name="mon-up")
    redis = f.redis()
    port, aport = free_port(), free_port()
    routes = [
        {"name": "once", "match": {"path_prefix": "/once/"}, "upstream": "api", "verify": ["fb"], "limited_use": True},
        {"name": "limited", "match": {"path_prefix": "/limited/"}, "upstream": "api", "verify": [],
         "rate_limit": {"key": "client_address", "rate": "1/m", "burst": 1}},
        {"name": "dead", "match": {"path_prefix": "/dead/"}, "upstream": "dead", "verify": []},
        {"name": "api", "match": {"path_prefix": "/"}, "upstream": "api", "verify": ["fb"]},
    ]
    text = gateway_config(port, {"api": up.url, "dead": f"http://127.0.0.1:{free_port()}"}, routes=routes,
                          verifiers={"fb": app_check_verifier(iss.jwks_url)},
                          state={"backend": "redis", "url": redis.url, "timeout": "200ms"})
    gw = f.gateway(text + f"admin:\n  address: 127.0.0.1:{aport}\n")
    wait_gateway_accepts(port, "/", H, iss.token())

    ok, once = iss.token(), iss.token(limited_use=True)
    assert _send(port, "/a", ok) == 200
    assert _send(port, "/a") == 401                                   # missing_token
    assert _send(port, "/a", iss.token(expired=True)) == 401          # expired
    assert _send(port, "/once/x", once) == 200
    assert _send(port, "/once/x", once) == 401                        # token_replayed
    assert _send(port, "/limited/x") == 200
    assert _send(port, "/limited/x") == 429                           # rate_limited
    assert _send(port, "/dead/x") == 502                              # upstream refused
    gw.send_signal(signal.SIGHUP)                                     # a reload of the same file
    deadline = time.monotonic() + 10
    while "reload: configuration applied" not in gw.stderr():
        assert time.monotonic() < deadline, gw.stderr()[-2000:]
        time.sleep(0.1)
    redis.stop()                                                      # the state store goes away
    assert _send(port, "/once/y", iss.token(limited_use=True)) == 503   # state_unavailable
    time.sleep(0.2)
    status, body = _admin_get(aport, "/metrics")
    assert status == 200
    s = Scrape(body)
    # The traffic did what it was meant to: the families below have samples to check labels against.
    for family in ("attest_gateway_replays_rejected_total", "attest_gateway_state_errors_total",
                   "attest_gateway_upstream_response_seconds", "attest_gateway_jwks_expiry_seconds"):
        assert family in s.labels, f"{family}: no sample after the traffic"
    assert re.search(r'attest_gateway_requests_total\{route="limited",status="429"\} 1', body), body
    assert re.search(r'attest_gateway_config_reloads_total\{result="success"\} 1', body), body
    return s


def _check_names(exprs: list[tuple[str, str]], s: Scrape, records: dict[str, str]) -> None:
    problems = []

    def raw(expr: str, seen=()) -> set[str]:
        """expr's series names, recorded ones replaced by the names of the expressions they record."""
        out = set()
        for n in metric_names(expr):
            if n in records and n not in seen:
                out |= raw(records[n], (*seen, n))
            else:
                out.add(n)
        return out

    for where, expr in exprs:
        names = raw(expr)
        assert names, f"{where}: no metric found in {expr!r}"
        allowed_labels = set(TARGET_LABELS)
        for n in names:
            if n in PROMETHEUS_SERIES:
                continue
            if ":" in n:
                problems.append(f"{where}: {n} is recorded by no rule of {RULES.name}")
                continue
            family = s.family(n)
            if family is None:
                problems.append(f"{where}: {n} is not a family the gateway exports")
            elif family not in s.labels:
                problems.append(f"{where}: {family} had no sample in the scrape")
            else:
                allowed_labels |= s.labels[family]
        unknown = label_names(expr) - allowed_labels
        if unknown:
            problems.append(f"{where}: label(s) {sorted(unknown)} on none of {sorted(names)}")
    assert not problems, "\n".join(problems)


def test_dashboard_names_only_exported_metrics_and_labels(scrape):
    exprs = _dashboard_exprs(_dashboard())
    _check_names(exprs, scrape, records={})


def test_rules_name_only_exported_metrics_and_labels(scrape):
    records = _records()
    _check_names([(r.get("alert") or r["record"], r["expr"]) for r in _rules()], scrape, records)


def test_name_checks_fail_on_a_wrong_name(scrape):
    """The checks above can fail: a misspelt family, a histogram suffix on a counter, a label no family carries."""
    for expr in ("rate(attest_gateway_request_total[5m])",
                 "rate(attest_gateway_requests_total_count[5m])",
                 "sum by (verfier) (rate(attest_gateway_verifications_total[5m]))",
                 "sum(rate(route:not_recorded:rate5m[5m]))"):
        with pytest.raises(AssertionError):
            _check_names([("probe", expr)], scrape, records={})


# ----------------------------------------------------------------------------------------------------------------
# Kubernetes: the ServiceMonitor, its Service, the NetworkPolicies


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_kubernetes_objects_validate_against_the_schema():
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    kinds = []
    for path in (SERVICE_MONITOR, NETWORK_POLICY):
        for d in _docs(path):
            kinds.append(d["kind"])
            if d["kind"] == "ServiceMonitor":
                continue    # a CRD without a schema here: test_servicemonitor_scrapes_the_admin_port checks it
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                pytest.fail(f"{path.name}: {d['kind']} {d['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}")
    assert sorted(kinds) == ["NetworkPolicy", "NetworkPolicy", "Service", "ServiceMonitor"], kinds
    # The validator does refuse a wrong object (an unknown field under strict).
    bad = next(d for d in _docs(NETWORK_POLICY) if d["kind"] == "NetworkPolicy")
    bad = json.loads(json.dumps(bad))
    bad["spec"]["podSelektor"] = bad["spec"].pop("podSelector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, version, strict=True)


def _gateway_pods():
    """(example file, pod labels, gateway container, its named ports, admin port, listener ports)."""
    for path in EXAMPLES:
        for _, meta, _, c, cfg, _ in _gateways(path):
            named = {p["name"]: p["containerPort"] for p in c["ports"] if "name" in p}
            admin = int(cfg["admin"]["address"].rsplit(":", 1)[1])
            listeners = {int(l["address"].rsplit(":", 1)[1]) for l in cfg["listeners"]}
            yield path, meta.get("labels", {}), c, named, admin, listeners


def test_servicemonitor_scrapes_the_admin_port():
    docs = _docs(SERVICE_MONITOR)
    services = [d for d in docs if d["kind"] == "Service"]
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = monitor["spec"]
    selected = [s for s in services if spec["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()]
    assert len(selected) == 1, f"the ServiceMonitor selects {len(selected)} of the Services beside it"
    [svc] = selected
    assert "namespaceSelector" not in spec, "the metrics Service is in the ServiceMonitor's own namespace"
    assert svc["metadata"]["labels"].get(spec["jobLabel"]) == JOB, f"job label: the rules match up{{job=\"{JOB}\"}}"
    assert svc["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"
    port_names = {p["name"]: p for p in svc["spec"]["ports"]}
    assert spec["endpoints"], "no endpoint"
    for ep in spec["endpoints"]:
        assert ep.get("port") in port_names, f"endpoint port {ep.get('port')!r} is not a port of {svc['metadata']['name']}"
        assert ep.get("path") == "/metrics" and ep.get("scheme", "http") == "http", ep
    found = 0
    for path, labels, c, named, admin, _ in _gateway_pods():
        assert svc["spec"]["selector"].items() <= labels.items(), f"{svc['metadata']['name']} misses {path.name}'s gateways"
        found += 1
        for ep in spec["endpoints"]:
            target = port_names[ep["port"]]["targetPort"]
            assert named.get(target, target) == admin, f"{path.name}: endpoint {ep['port']} reaches {target}, not admin :{admin}"
    assert found == len(EXAMPLES)


def _selects(policy: dict, labels: dict) -> bool:
    return policy["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()


def _ports(rule: dict, named: dict) -> set[int] | None:
    """The container ports a rule opens (None: all of them)."""
    if not rule.get("ports"):
        return None
    return {named.get(p["port"], p["port"]) for p in rule["ports"]}


def test_networkpolicies_guard_the_admin_port_and_redis():
    policies = [d for d in _docs(NETWORK_POLICY) if d["kind"] == "NetworkPolicy"]
    for path, labels, c, named, admin, listeners in _gateway_pods():
        mine = [p for p in policies if _selects(p, labels)]
        assert mine, f"{path.name}: no NetworkPolicy selects the gateway pods"
        rules = []
        for p in mine:
            assert "Ingress" in p["spec"]["policyTypes"], p["metadata"]["name"]
            rules += p["spec"].get("ingress", [])
        for rule in rules:
            opened = _ports(rule, named)
            assert opened is not None, f"{path.name}: an ingress rule opens every port"
            assert opened <= listeners | {admin}, f"{path.name}: a rule opens {opened - listeners - {admin}}"
            if admin in opened:
                peers = rule.get("from", [])
                assert peers, f"{path.name}: the admin port is open to all"
                for peer in peers:
                    ns = peer.get("namespaceSelector", {}).get("matchLabels", {})
                    pods = peer.get("podSelector", {}).get("matchLabels", {})
                    assert ns == {"kubernetes.io/metadata.name": "monitoring"}, f"{path.name}: admin port from {peer}"
                    assert pods.get("app.kubernetes.io/name") == "prometheus", f"{path.name}: admin port from {peer}"
                    assert "ipBlock" not in peer
        public = [r for r in rules if not r.get("from") and listeners <= (_ports(r, named) or set())]
        assert public, f"{path.name}: the public listener {listeners} is not open to all"

    # Redis (redis-replicas.yaml): only from the gateway pods of the same namespace, on its port.
    [redis] = [d for d in _docs(EXAMPLES[1]) if d["kind"] == "StatefulSet"]
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    redis_ports = {p["name"]: p["containerPort"] for p in redis["spec"]["template"]["spec"]["containers"][0]["ports"]}
    mine = [p for p in policies if _selects(p, redis_labels)]
    assert mine, "no NetworkPolicy selects the Redis pods"
    gateway_labels = [labels for path, labels, *_ in _gateway_pods() if path == EXAMPLES[1]]
    for p in mine:
        assert "Ingress" in p["spec"]["policyTypes"]
        for rule in p["spec"].get("ingress", []):
            assert _ports(rule, redis_ports) == {6379}, f"{p['metadata']['name']}: Redis rule ports {rule.get('ports')}"
            assert rule.get("from"), "Redis open to all"
            for peer in rule["from"]:
                assert set(peer) == {"podSelector"}, f"Redis reachable from {peer}"
                sel = peer["podSelector"]["matchLabels"]
                assert sel and all(sel.items() <= g.items() for g in gateway_labels), f"Redis reachable from pods {sel}"
                assert not sel.items() <= redis_labels.items()
