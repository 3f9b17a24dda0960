"""The rollout view (issue 19) in a real browser: admin `GET /stats` and `GET /` against a gateway under mixed traffic.

One gateway per module (a real `attest-gateway-dev issuer` for its key set, a recording upstream, SQLite state):

- route `shop`: App Check `fb`, mode enforce, limited_use (so replays happen)
- route `beta`: App Check `fb`, mode monitor (never rejects; the upstream gets the verdict)
- route `dark`: App Check `dead`, whose JWKS URL has nothing listening (every token: 503 jwks_unavailable)
- route `warm`: App Check `fb`, only for readiness polling (its counts are checked against /metrics, not exactly)
- route `open`: no verifiers (must not be listed)

Known traffic is sent to shop, beta and dark; then /stats must give exactly those numbers per category, equal the
deltas of `attest_gateway_verifications_total{route=…}` in /metrics, and the would-reject percentage. Headless
Debian chromium (driven by selenium through chromium-driver) then opens the admin page: every `data-stat` value equals
the JSON the page rendered and the /stats fetched right after; more traffic shows up without a reload within one
refresh; the page makes no request beyond the admin origin, logs no console error and trips no CSP rule.
Screenshots go to $ROLLOUT_VIEW_ARTIFACTS (default Tests/e2e/artifacts/rollout-view/, gitignored); the path is
printed (run with -s to see it).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service

import upstreams as U
from harness import HERE, app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts

H = "X-Firebase-AppCheck"
PLACEHOLDER = "eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ=="   # base64 of {"error":"UNKNOWN_ERROR"}: the Firebase SDK's
APP_A = "1:123456789012:ios:0123456789abcdef"          # the dev issuer's default app id
APP_B = "1:123456789012:android:fedcba9876543210"
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")
ARTIFACTS = Path(os.environ.get("ROLLOUT_VIEW_ARTIFACTS", str(HERE / "artifacts" / "rollout-view")))
REFRESH_S = 5.0

REPLAY_REASONS = {"token_replayed", "counter_not_increasing", "challenge_unknown"}
UNAVAILABLE_REASONS = {"jwks_unavailable", "state_unavailable", "device_check_unavailable",
                       "play_integrity_unavailable", "overloaded"}
CATEGORIES = ("verified", "missing", "client_attestation_failed", "replayed", "unavailable")
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# ----------------------------------------------------------------------------------------------------------------
# Helpers: admin requests, /metrics, the expected windows


def admin_get(port: int, path: str) -> tuple[int, dict, str]:
    """(status, headers with lower-case names, body text)."""
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode("utf-8", "replace")


def get_stats(port: int) -> tuple[dict, str]:
    status, headers, text = admin_get(port, "/stats")
    assert status == 200, f"GET /stats: {status} {text[:300]}"
    assert headers.get("content-type", "").lower().startswith("application/json"), headers
    return json.loads(text), text


def get_metrics(port: int) -> str:
    status, _, text = admin_get(port, "/metrics")
    assert status == 200, f"GET /metrics: {status}"
    return text


def samples(text: str, name: str) -> list[tuple[dict, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.append((labels, float(m.group(4))))
    return out


def empty_window() -> dict:
    return {"verified": 0, "missing": 0, "client_attestation_failed": 0, "invalid": {}, "replayed": 0,
            "unavailable": 0}


def add(w: dict, category: str, reason: str | None = None, n: int = 1) -> None:
    if category == "invalid":
        w["invalid"][reason] = w["invalid"].get(reason, 0) + n
    else:
        w[category] += n


def classify(result: str, reason: str | None) -> tuple[str, str | None]:
    """A verification outcome as the rollout view's category (PROTOCOL.md "Rollout view")."""
    if result == "verified":
        return "verified", None
    if result == "absent" or reason == "missing_token":
        return "missing", None
    if reason == "client_attestation_failed":
        return "client_attestation_failed", None
    if reason in REPLAY_REASONS:
        return "replayed", None
    if reason in UNAVAILABLE_REASONS:
        return "unavailable", None
    return "invalid", reason or "?"


def windows_from_metrics(text: str) -> dict[str, dict]:
    """route -> window from attest_gateway_verifications_total{verifier, result, reason, route}."""
    out: dict[str, dict] = {}
    for labels, value in samples(text, "attest_gateway_verifications_total"):
        route = labels.get("route")
        if route is None:
            continue
        cat, reason = classify(labels.get("result", ""), labels.get("reason"))
        add(out.setdefault(route, empty_window()), cat, reason, int(value))
    return out


def window_delta(after: dict, before: dict | None) -> dict:
    before = before or empty_window()
    w = {k: after[k] - before[k] for k in CATEGORIES}
    w["invalid"] = {r: n - before["invalid"].get(r, 0) for r, n in after["invalid"].items()
                    if n - before["invalid"].get(r, 0) != 0}
    return w


def rejected(w: dict) -> int:
    return w["missing"] + w["client_attestation_failed"] + sum(w["invalid"].values()) + w["replayed"] + w["unavailable"]


def judged(w: dict) -> int:
    return w["verified"] + rejected(w)


def percent(w: dict) -> float:
    j = judged(w)
    return 0.0 if j == 0 else round(rejected(w) * 100.0 / j + 1e-9, 1)


def norm_window(w: dict) -> dict:
    """A window as JSON gave it, with zero invalid entries dropped (absent and 0 mean the same)."""
    out = {k: w[k] for k in CATEGORIES}
    out["invalid"] = {r: n for r, n in w["invalid"].items() if n}
    return out


def route_of(stats: dict, name: str) -> dict:
    found = [r for r in stats["routes"] if r["name"] == name]
    assert len(found) == 1, f"route {name!r} listed {len(found)} times in /stats: {[r['name'] for r in stats['routes']]}"
    return found[0]


def unix(rfc3339: str) -> int:
    return int(datetime.strptime(rfc3339[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_window_shape(w: dict, where: str) -> None:
    assert isinstance(w, dict), where
    for k in CATEGORIES:
        assert is_int(w.get(k)) and w[k] >= 0, f"{where}.{k} = {w.get(k)!r}"
    assert isinstance(w.get("invalid"), dict), f"{where}.invalid = {w.get('invalid')!r}"
    for r, n in w["invalid"].items():
        assert re.fullmatch(r"[a-z_]+", r) and is_int(n) and n >= 0, f"{where}.invalid[{r!r}] = {n!r}"
        assert r not in REPLAY_REASONS | UNAVAILABLE_REASONS | {"missing_token", "client_attestation_failed"}, \
            f"{where}.invalid holds {r!r}, which has its own category"


def check_stats_shape(stats: dict) -> None:
    """Every field of the /stats contract, and the numbers' internal consistency."""
    assert RFC3339_UTC.match(stats.get("generated_at", "")), f"generated_at {stats.get('generated_at')!r}"
    gen = unix(stats["generated_at"])
    assert abs(gen - time.time()) < 30, f"generated_at {stats['generated_at']} is not now"
    names = [r["name"] for r in stats["routes"]]
    assert len(names) == len(set(names)), names
    for r in stats["routes"]:
        n = r["name"]
        assert r["mode"] in ("enforce", "monitor"), (n, r["mode"])
        assert isinstance(r["verifiers"], list) and r["verifiers"] and all(isinstance(v, str) for v in r["verifiers"]), r
        check_window_shape(r["last_hour"], f"{n}.last_hour")
        check_window_shape(r["last_day"], f"{n}.last_day")
        for k in CATEGORIES:   # the day holds the hour
            assert r["last_day"][k] >= r["last_hour"][k], (n, k, r["last_day"], r["last_hour"])
        p = r["would_reject_percent"]
        assert is_num(p) and 0 <= p <= 100 and round(p, 1) == p, f"{n}.would_reject_percent = {p!r}"
        hour = r["last_hour"]
        if judged(hour) == 0:
            assert p == 0, f"{n}: nothing judged, would_reject_percent {p}"
        else:
            exact = rejected(hour) * 100.0 / judged(hour)
            assert abs(p - exact) <= 0.05 + 1e-9, f"{n}: would_reject_percent {p}, rejected/judged ×100 = {exact:.3f}"
        mins = r["minutes"]
        assert isinstance(mins, list) and len(mins) == 60, f"{n}: {len(mins)} minutes"
        for i, m in enumerate(mins):
            assert is_int(m["t"]) and m["t"] % 60 == 0, (n, m)
            assert is_int(m["verified"]) and m["verified"] >= 0 and is_int(m["rejected"]) and m["rejected"] >= 0, (n, m)
            if i:
                assert m["t"] == mins[i - 1]["t"] + 60, f"{n}: minutes not consecutive, oldest first: {mins[i-1]} {m}"
        current = gen // 60 * 60
        assert mins[-1]["t"] == current or (gen % 60 == 0 and mins[-1]["t"] == current - 60), \
            f"{n}: last minute t={mins[-1]['t']}, generated_at {stats['generated_at']} is in minute {current}"
        assert sum(m["verified"] for m in mins) == hour["verified"], f"{n}: minutes' verified != last_hour.verified"
        assert sum(m["rejected"] for m in mins) == rejected(hour), f"{n}: minutes' rejected != last_hour rejected"
        for key, field in (("top_reasons", "reason"), ("top_app_ids", "app_id")):
            top = r[key]
            assert isinstance(top, list) and len(top) <= 10, (n, key, top)
            counts = [e["count"] for e in top]
            assert all(isinstance(e[field], str) and is_int(e["count"]) and e["count"] > 0 for e in top), (n, key, top)
            assert counts == sorted(counts, reverse=True), f"{n}.{key} not most first: {top}"
            assert len({e[field] for e in top}) == len(top), (n, key, top)
    for k in stats["key_sets"]:
        assert isinstance(k["verifier"], str), k
        assert k["age_seconds"] is None or (is_num(k["age_seconds"]) and k["age_seconds"] >= 0), k
        assert is_num(k["next_refresh_seconds"]) and k["next_refresh_seconds"] >= 0, k
        assert k["last_error"] is None or isinstance(k["last_error"], str), k
    st = stats["state"]
    assert st is None or (isinstance(st["backend"], str) and isinstance(st["ready"], bool)
                          and (st["last_error"] is None or isinstance(st["last_error"], str))), st
    cfg = stats["config"]
    assert isinstance(cfg["hash"], str) and cfg["hash"], cfg
    for rl in cfg["reloads"]:
        assert RFC3339_UTC.match(rl["at"]) and rl["result"] in ("success", "failure"), rl
        assert isinstance(rl["hash"], str) and (rl["error"] is None or isinstance(rl["error"], str)), rl


# ----------------------------------------------------------------------------------------------------------------
# The gateway and its traffic


class Traffic:
    """Sends requests and keeps what each route should count (and every token used, for the no-leak checks)."""

    def __init__(self, env):
        self.env = env
        self.expected = {name: empty_window() for name in ("shop", "beta", "dark")}
        self.reasons = {name: {} for name in self.expected}       # reason code -> count (rejected only)
        self.apps = {name: {} for name in self.expected}          # app id -> verified count
        self.requests_total = {}                                  # (route, status) -> count
        self.mismatches: list[str] = []                           # answers other than the expected (asserted by tests)
        self.n = 0

    def token(self, **kw) -> str:
        t = self.env.iss.token(**kw)
        self.env.tokens.append(t)
        return t

    def forged(self, **kw) -> str:
        """A genuine header and claims with another genuine token's signature (other claims: the same claims
        minted in the same second would sign to the same bytes): bad_signature."""
        a, b = self.token(app_id=APP_A, **kw), self.token(app_id=APP_B, **kw)
        h, p, _ = a.split(".")
        return f"{h}.{p}.{b.split('.')[2]}"

    def send(self, route: str, token: str | None, category: str, reason: str | None, app: str | None = None) -> None:
        """One request; an answer other than expected (enforce: status and reason; monitor: forwarded with the
        verdict) is kept in `mismatches`, and the request is counted as what it was meant to be."""
        self.n += 1
        path = f"/{route}/r{self.n}"
        headers = [(H, token)] if token is not None else []
        r = U.one_shot(self.env.gw.port, http_get(path, headers), timeout=10)
        if r is None:
            self.mismatches.append(f"{path}: connection closed without an answer")
            return
        status = r.status
        if route == "beta":   # monitor: always forwarded, the verdict in X-Attest-*
            q = self._forwarded(path) if r.status == 200 else None
            if q is None:
                self.mismatches.append(f"{path} (monitor, {category}/{reason}): {r.status} {r.body[:200]!r}")
            else:
                verdict = {"verified": "verified", "missing": "absent"}.get(category, "failed")
                got = (q.one("x-attest-verdict"), q.one("x-attest-reason"))
                want = (verdict, None if category == "verified" else (reason or "missing_token"))
                if got != want:
                    self.mismatches.append(f"{path}: upstream got verdict/reason {got}, expected {want}")
        elif category == "verified":
            if r.status != 200:
                self.mismatches.append(f"{path}: expected 200, got {r.status} {r.body[:200]!r}")
        else:
            try:
                doc = json.loads(r.body or b"{}")
            except ValueError:
                doc = {}
            want_status = 503 if category == "unavailable" else 401
            if (r.status, doc.get("reason")) != (want_status, reason or "missing_token"):
                self.mismatches.append(f"{path}: expected {want_status} {reason or 'missing_token'}, "
                                       f"got {r.status} {r.body[:200]!r}")
        add(self.expected[route], category, reason)
        if category == "verified":
            self.apps[route][app] = self.apps[route].get(app, 0) + 1
        else:
            code = reason or "missing_token"
            self.reasons[route][code] = self.reasons[route].get(code, 0) + 1
        self.requests_total[(route, str(status))] = self.requests_total.get((route, str(status)), 0) + 1

    def _forwarded(self, path: str, timeout: float = 5.0) -> U.Req | None:
        deadline = time.monotonic() + timeout
        while True:
            with self.env.up.lock:
                found = [q for q in self.env.up.requests if q.target == path]
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    # The named kinds of request.
    def valid(self, route: str, app: str = APP_A) -> None:
        kw = {"app_id": app}
        if route == "shop":
            kw["limited_use"] = True
        self.send(route, self.token(**kw), "verified", None, app)

    def replayed(self, token: str) -> None:
        self.send("shop", token, "replayed", "token_replayed")

    def missing(self, route: str) -> None:
        self.send(route, None, "missing", None)

    def placeholder(self, route: str) -> None:
        self.send(route, PLACEHOLDER, "client_attestation_failed", "client_attestation_failed")

    def expired(self, route: str) -> None:
        self.send(route, self.token(expired=True, limited_use=route == "shop"), "invalid", "expired")

    def bad_signature(self, route: str) -> None:
        self.send(route, self.forged(limited_use=route == "shop"), "invalid", "bad_signature")


def settle(env, routes=("shop", "beta", "dark"), timeout: float = 5.0) -> dict:
    """/stats once it counts everything sent (bounded: a lagging count then fails the exact comparison)."""
    deadline = time.monotonic() + timeout
    while True:
        stats, _ = get_stats(env.admin)
        names = {r["name"] for r in stats["routes"]}
        if all(n in names and judged(route_of(stats, n)["last_hour"]) >= judged(env.traffic.expected[n])
               for n in routes) or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


@pytest.fixture(scope="module")
def env(module_factory, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rollout")
    iss = module_factory.dev_issuer()
    up = module_factory.upstream("echo", name="rollout-up")
    port, admin = free_port(), free_port()
    dead_jwks = f"http://127.0.0.1:{free_port()}/jwks"   # nothing listens there
    routes = [
        {"name": "shop", "match": {"path_prefix": "/shop"}, "upstream": "api", "verify": ["fb"], "limited_use": True},
        {"name": "beta", "match": {"path_prefix": "/beta"}, "upstream": "api", "verify": ["fb"], "mode": "monitor"},
        {"name": "dark", "match": {"path_prefix": "/dark"}, "upstream": "api", "verify": ["dead"]},
        {"name": "warm", "match": {"path_prefix": "/warm"}, "upstream": "api", "verify": ["fb"]},
        {"name": "open", "match": {"path_prefix": "/open"}, "upstream": "api", "verify": []},
    ]
    cfg = gateway_config(port, {"api": up.url}, routes=routes,
                         state={"backend": "sqlite", "path": str(tmp / "state" / "state.db")},
                         verifiers={"fb": app_check_verifier(iss.jwks_url), "dead": app_check_verifier(dead_jwks)})
    cfg += f"admin:\n  address: 127.0.0.1:{admin}\n"
    gw = module_factory.gateway(cfg)
    e = SimpleNamespace(iss=iss, up=up, gw=gw, admin=admin, tokens=[], kid=iss.jwks()["keys"][0]["kid"])
    wait_gateway_accepts(port, "/warm/ready", H, iss.token())

    # A reload of the unchanged file: the reload history shows it; the counts start after it.
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reload: configuration applied" not in gw.stderr():
        assert time.monotonic() < deadline, f"SIGHUP reload not applied: {gw.stderr()[-1500:]}"
        time.sleep(0.05)
    wait_gateway_accepts(port, "/warm/ready", H, iss.token())

    e.stats_before, _ = get_stats(admin)
    e.metrics_before = get_metrics(admin)
    t = e.traffic = Traffic(e)
    # shop (enforce, limited use): 7 verified (5 app A, 2 app B), 3 replays of them, 4 missing, 2 placeholders,
    # 3 expired, 1 bad signature, 1 malformed, 1 without jti.
    shop_tokens = []
    for i in range(7):
        tok = t.token(limited_use=True, app_id=APP_A if i < 5 else APP_B)
        t.send("shop", tok, "verified", None, APP_A if i < 5 else APP_B)
        shop_tokens.append(tok)
    for tok in shop_tokens[:3]:
        t.replayed(tok)
    for _ in range(4):
        t.missing("shop")
    for _ in range(2):
        t.placeholder("shop")
    for _ in range(3):
        t.expired("shop")
    t.bad_signature("shop")
    t.send("shop", "not-a-token", "invalid", "malformed_token")
    t.send("shop", t.token(), "invalid", "missing_jti")
    # beta (monitor): 5 verified (3 app A, 2 app B), 2 missing, 1 placeholder, 1 expired, 2 bad signatures.
    for i in range(5):
        t.valid("beta", APP_A if i < 3 else APP_B)
    for _ in range(2):
        t.missing("beta")
    t.placeholder("beta")
    t.expired("beta")
    for _ in range(2):
        t.bad_signature("beta")
    # dark (key set never loaded): 2 tokens, 503 jwks_unavailable.
    for _ in range(2):
        t.send("dark", t.token(), "unavailable", "jwks_unavailable")

    e.stats = settle(e)
    e.stats_text = json.dumps(e.stats)
    e.metrics_after = get_metrics(admin)
    return e


# ----------------------------------------------------------------------------------------------------------------
# 1. /stats: exactly what was sent, equal to /metrics


@pytest.mark.timeout_s(60)
def test_stats_counts_equal_the_traffic_and_metrics(env):
    stats, t = env.stats, env.traffic
    assert not t.mismatches, "the gateway answered the traffic otherwise than expected:\n  " + "\n  ".join(t.mismatches)
    check_stats_shape(stats)
    check_stats_shape(env.stats_before)

    # The hand-computed expectations (also a check of the Traffic bookkeeping).
    assert t.expected["shop"] == {"verified": 7, "missing": 4, "client_attestation_failed": 2, "replayed": 3,
                                  "unavailable": 0, "invalid": {"expired": 3, "bad_signature": 1,
                                                                "malformed_token": 1, "missing_jti": 1}}
    assert t.expected["beta"] == {"verified": 5, "missing": 2, "client_attestation_failed": 1, "replayed": 0,
                                  "unavailable": 0, "invalid": {"expired": 1, "bad_signature": 2}}
    assert t.expected["dark"] == {**empty_window(), "unavailable": 2}
    want_percent = {"shop": 68.2, "beta": 54.5, "dark": 100.0}   # 15/22, 6/11, 2/2

    names = [r["name"] for r in stats["routes"]]
    assert "open" not in names, f"a route without verifiers is listed: {names}"
    assert set(names) == {"shop", "beta", "dark", "warm"}, names
    metric_windows = windows_from_metrics(env.metrics_after)
    metric_before = windows_from_metrics(env.metrics_before)
    for name in ("shop", "beta", "dark"):
        r = route_of(stats, name)
        want = t.expected[name]
        assert r["mode"] == ("monitor" if name == "beta" else "enforce"), (name, r["mode"])
        assert r["verifiers"] == (["dead"] if name == "dark" else ["fb"]), (name, r["verifiers"])
        # Nothing on these routes before the traffic (readiness used `warm`).
        assert norm_window(route_of(env.stats_before, name)["last_day"]) == empty_window(), \
            f"{name}: counts before any traffic: {route_of(env.stats_before, name)['last_day']}"
        assert norm_window(r["last_hour"]) == want, f"{name}.last_hour: /stats {r['last_hour']} != sent {want}"
        assert norm_window(r["last_day"]) == want, f"{name}.last_day: /stats {r['last_day']} != sent {want}"
        assert r["would_reject_percent"] == want_percent[name] == percent(want), \
            (name, r["would_reject_percent"], want_percent[name])
        m = window_delta(metric_windows.get(name, empty_window()), metric_before.get(name))
        assert m == want, f"{name}: /metrics verifications_total{{route={name}}} deltas {m} != sent {want}"
        # Top reasons and app ids of the hour.
        got_reasons = {e["reason"]: e["count"] for e in r["top_reasons"]}
        assert got_reasons == t.reasons[name], f"{name}.top_reasons {r['top_reasons']} != {t.reasons[name]}"
        assert r["top_app_ids"] == [{"app_id": a, "count": n} for a, n in
                                    sorted(t.apps[name].items(), key=lambda kv: (-kv[1], kv[0]))], \
            f"{name}.top_app_ids {r['top_app_ids']} != {t.apps[name]}"
        # The per-minute series carries the same requests.
        assert sum(x["verified"] for x in r["minutes"]) == want["verified"], (name, r["minutes"][-3:])
        assert sum(x["rejected"] for x in r["minutes"]) == rejected(want), (name, r["minutes"][-3:])
    # The warm-up route: /stats agrees with /metrics (its exact count depends on how fast the key set loaded).
    warm = route_of(stats, "warm")
    assert norm_window(warm["last_hour"]) == window_delta(metric_windows.get("warm", empty_window()), None), \
        (warm["last_hour"], metric_windows.get("warm"))
    assert warm["last_hour"]["verified"] >= 2
    # The requests per route and status moved the same way.
    for (route, status), n in env.traffic.requests_total.items():
        d = sum(v for l, v in samples(env.metrics_after, "attest_gateway_requests_total")
                if l.get("route") == route and l.get("status") == status) - \
            sum(v for l, v in samples(env.metrics_before, "attest_gateway_requests_total")
                if l.get("route") == route and l.get("status") == status)
        assert d == n, f"attest_gateway_requests_total{{route={route},status={status}}} moved {d}, sent {n}"

    # Key sets: fb loaded and healthy, dead never loaded and saying why.
    ks = {k["verifier"]: k for k in stats["key_sets"]}
    assert set(ks) == {"fb", "dead"}, stats["key_sets"]
    assert is_num(ks["fb"]["age_seconds"]) and ks["fb"]["age_seconds"] < 120 and ks["fb"]["last_error"] is None, ks["fb"]
    assert ks["fb"]["next_refresh_seconds"] > 0, ks["fb"]
    assert isinstance(ks["dead"]["last_error"], str) and ks["dead"]["last_error"], ks["dead"]
    # State store and configuration.
    assert stats["state"] == {**stats["state"], "backend": "sqlite", "ready": True, "last_error": None}, stats["state"]
    config_hash = re.search(r'attest_gateway_config_info\{hash="([0-9a-f]+)"\} 1', env.metrics_after)
    assert config_hash and stats["config"]["hash"] == config_hash.group(1), (stats["config"], config_hash)
    reloads = stats["config"]["reloads"]
    assert [(x["result"], x["hash"], x["error"]) for x in reloads] == [("success", config_hash.group(1), None)], reloads
    assert abs(unix(reloads[0]["at"]) - time.time()) < 120, reloads


# ----------------------------------------------------------------------------------------------------------------
# 2. The page in headless chromium


INIT_SCRIPT = """
window.__rv = {csp: [], errors: []};
document.addEventListener('securitypolicyviolation', e => {
  window.__rv.csp.push(e.violatedDirective + ' ' + e.blockedURI);
});
window.addEventListener('error', e => { window.__rv.errors.push(String(e.message)); });
window.addEventListener('unhandledrejection', e => { window.__rv.errors.push('unhandled rejection: ' + String(e.reason)); });
"""

SNAPSHOT_JS = """
const one = el => ({value: el.getAttribute('data-value'), text: el.innerText});
const stats = root => {
  const out = {};
  root.querySelectorAll('[data-stat]').forEach(el => { (out[el.getAttribute('data-stat')] ||= []).push(one(el)); });
  return out;
};
const g = document.querySelector('#generated-at');
const routes = {};
document.querySelectorAll('section.route').forEach(s => {
  const charts = [...s.querySelectorAll('svg.chart')].map(c => { const b = c.getBoundingClientRect(); return [b.width, b.height]; });
  (routes[s.getAttribute('data-route')] ||= []).push({stats: stats(s), charts: charts});
});
const keySets = {};
document.querySelectorAll('tr[data-key-set]').forEach(tr => { (keySets[tr.getAttribute('data-key-set')] ||= []).push(stats(tr)); });
const st = document.querySelector('#state');
const cfg = document.querySelector('#config');
return {
  generated_at: g ? g.getAttribute('data-value') : null,
  routes: routes, key_sets: keySets,
  state: st ? stats(st) : null,
  config: cfg ? stats(cfg) : null,
  marker: window.__rv_marker === undefined ? null : window.__rv_marker,
  navigations: performance.getEntriesByType('navigation').length,
  resources: performance.getEntriesByType('resource').map(e => e.name),
  rv: window.__rv || null,
  location: location.href,
};
"""


def _same_value(data_value, expected) -> bool:
    """data-value (a string) against a JSON value: numbers as JSON numbers, null as "null", booleans as
    "true"/"false", strings as themselves (or JSON-quoted)."""
    if data_value is None:
        return False
    if isinstance(expected, str):
        return data_value == expected or data_value == json.dumps(expected)
    try:
        got = json.loads(data_value)
    except ValueError:
        return False
    if expected is None or isinstance(expected, bool):
        return got is expected
    return is_num(got) and got == expected


def _count_text_ok(text: str, n) -> bool:
    return re.sub(r"[,\s\u00a0\u202f'’_]", "", text or "") == str(n)


def _percent_text_ok(text: str, p) -> bool:
    m = re.search(r"(\d+(?:[.,]\d+)?)\s*%", text or "")
    return bool(m) and abs(float(m.group(1).replace(",", ".")) - p) < 1e-9


def _route_paths(r: dict) -> dict:
    """data-stat path -> JSON value, per the DOM contract."""
    out = {"mode": r["mode"], "would_reject_percent": r["would_reject_percent"]}
    for win in ("last_hour", "last_day"):
        for k in CATEGORIES:
            out[f"{win}.{k}"] = r[win][k]
        for reason, n in r[win]["invalid"].items():
            out[f"{win}.invalid.{reason}"] = n
    return out


TIME_DEPENDENT = {"age_seconds", "next_refresh_seconds"}


def compare_page(snap: dict, stats: dict, exact: bool, slack: int = 0) -> list[str]:
    """Every data-stat on the page against a /stats document. exact=False: the time-dependent key-set fields may
    differ by `slack` seconds (a /stats fetched after the page's), everything else must be equal."""
    problems = []
    json_routes = {r["name"]: r for r in stats["routes"]}
    if set(snap["routes"]) != set(json_routes):
        problems.append(f"route sections {sorted(snap['routes'])} != /stats routes {sorted(json_routes)}")
    for name, r in json_routes.items():
        sections = snap["routes"].get(name)
        if not sections:
            continue
        if len(sections) != 1:
            problems.append(f"{name}: {len(sections)} sections")
        sec = sections[0]
        if not sec["charts"] or not all(w > 0 and h > 0 for w, h in sec["charts"]):
            problems.append(f"{name}: svg.chart missing or not rendered: {sec['charts']}")
        want = _route_paths(r)
        for path, value in want.items():
            els = sec["stats"].get(path)
            if not els:
                problems.append(f"{name}: no [data-stat={path!r}] (JSON {value!r})")
                continue
            for el in els:
                if not _same_value(el["value"], value):
                    problems.append(f"{name}.{path}: data-value {el['value']!r} != JSON {value!r}")
                if path == "would_reject_percent":
                    if not _percent_text_ok(el["text"], value):
                        problems.append(f"{name}.{path}: text {el['text']!r} does not show {value}%")
                elif path != "mode" and not _count_text_ok(el["text"], value):
                    problems.append(f"{name}.{path}: visible text {el['text']!r} != {value}")
        for path in sec["stats"]:
            if re.match(r"^last_(hour|day)\.invalid\.", path) and path not in want:
                problems.append(f"{name}: page shows {path} = {sec['stats'][path][0]['value']!r}, not in /stats")
    json_keys = {k["verifier"]: k for k in stats["key_sets"]}
    if set(snap["key_sets"]) != set(json_keys):
        problems.append(f"key set rows {sorted(snap['key_sets'])} != /stats key_sets {sorted(json_keys)}")
    for v, k in json_keys.items():
        rows = snap["key_sets"].get(v)
        if not rows:
            continue
        for field in ("age_seconds", "next_refresh_seconds", "last_error"):
            els = rows[0].get(field)
            if not els:
                problems.append(f"key set {v}: no [data-stat={field!r}]")
                continue
            dv, want = els[0]["value"], k[field]
            if _same_value(dv, want):
                continue
            if not exact and field in TIME_DEPENDENT and is_num(want):
                try:
                    got = json.loads(dv)
                except (TypeError, ValueError):
                    got = None
                if is_num(got) and abs(got - want) <= slack:
                    continue
            problems.append(f"key set {v}.{field}: data-value {dv!r} != JSON {want!r}")
    st = stats["state"]
    if st is not None:
        if snap["state"] is None:
            problems.append("no #state element")
        else:
            for field in ("backend", "ready", "last_error"):
                els = snap["state"].get(field)
                if not els or not _same_value(els[0]["value"], st[field]):
                    problems.append(f"#state {field}: {els and els[0]['value']!r} != JSON {st[field]!r}")
    els = (snap["config"] or {}).get("hash")
    if not els or not _same_value(els[0]["value"], stats["config"]["hash"]):
        problems.append(f"#config hash: {els and els[0]['value']!r} != JSON {stats['config']['hash']!r}")
    return problems


class Browser:
    """Headless Debian chromium through chromium-driver; keeps every performance-log entry it drains."""

    def __init__(self, workdir: Path):
        for path in (CHROMIUM, CHROMEDRIVER):
            if not os.access(path, os.X_OK):
                pytest.fail(f"{path} not found: scripts/install-deps.sh test installs chromium and chromium-driver",
                            pytrace=False)
        self.profile = tempfile.mkdtemp(prefix="rv-chromium-", dir=workdir)
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={self.profile}",
                  "--window-size=1280,1800", "--no-proxy-server", "--no-first-run", "--disable-extensions",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--disable-dev-shm-usage", "--lang=en-US"):
            opts.add_argument(a)
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        self.service = Service(CHROMEDRIVER, log_output=str(workdir / "chromedriver.log"))
        self.driver = webdriver.Chrome(service=self.service, options=opts)
        self.driver.set_page_load_timeout(20)
        self.driver.set_script_timeout(10)
        self.perf: list[dict] = []
        self.console: list[dict] = []

    def drain(self) -> None:
        for entry in self.driver.get_log("performance"):
            try:
                self.perf.append(json.loads(entry["message"])["message"])
            except (KeyError, ValueError):
                pass
        self.console += self.driver.get_log("browser")

    def snapshot(self) -> dict:
        """The page's rendered values, read in one script call. #generated-at's data-value is taken as the string
        itself or as its JSON text (a quoted string, as every other data-value is JSON)."""
        snap = self.driver.execute_script(SNAPSHOT_JS)
        raw = snap["generated_at_raw"] = snap["generated_at"]
        if raw and raw.startswith('"'):
            try:
                snap["generated_at"] = json.loads(raw)
            except ValueError:
                pass
        return snap

    def stats_bodies(self) -> dict[str, dict]:
        """generated_at -> the /stats documents the page received (from the DevTools protocol)."""
        self.drain()
        out = {}
        for m in self.perf:
            if m.get("method") != "Network.loadingFinished":
                continue
            rid = m["params"]["requestId"]
            url = next((x["params"]["response"]["url"] for x in self.perf
                        if x.get("method") == "Network.responseReceived" and x["params"]["requestId"] == rid), "")
            if not url.split("?")[0].endswith("/stats"):
                continue
            try:
                body = self.driver.execute_cdp_cmd("Network.getResponseBody", {"requestId": rid})
                doc = json.loads(body["body"])
                out[doc["generated_at"]] = doc
            except (WebDriverException, ValueError, KeyError):
                pass
        return out

    def requests(self, page_url: str) -> list[tuple[float, str]]:
        """(timestamp, url) of every request from the navigation to page_url on (the browser's own start page,
        left before it, may still log a few chrome:// loads ahead of it)."""
        self.drain()
        sent = [m for m in self.perf if m.get("method") == "Network.requestWillBeSent"]
        start = next((i for i, m in enumerate(sent) if m["params"]["request"]["url"] == page_url), 0)
        return [(m["params"].get("timestamp", 0.0), m["params"]["request"]["url"]) for m in sent[start:]]

    def screenshot(self, path: Path) -> None:
        try:   # the whole page, not only the window
            metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
            path.write_bytes(base64.b64decode(shot["data"]))
        except (WebDriverException, KeyError):
            self.driver.save_screenshot(str(path))
        assert path.stat().st_size > 1000, f"screenshot {path} is empty"

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


def wait_for(what: str, fn, timeout: float, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path)
    try:
        yield b
    finally:
        b.quit()


def _counts_only(stats: dict) -> dict:
    """The parts of /stats that do not move while no traffic arrives."""
    return {"routes": {r["name"]: {**{k: r[k] for k in ("mode", "verifiers", "last_hour", "last_day",
                                                        "would_reject_percent")},
                                   "top_reasons": {e["reason"]: e["count"] for e in r["top_reasons"]},
                                   "top_app_ids": {e["app_id"]: e["count"] for e in r["top_app_ids"]}}
                       for r in stats["routes"]},
            "state": stats["state"], "config": stats["config"]["hash"],
            "key_errors": {k["verifier"]: k["last_error"] is None for k in stats["key_sets"]}}


@pytest.mark.timeout_s(150)
def test_page_in_headless_chromium_matches_stats_and_updates(env, browser):
    origin = f"http://127.0.0.1:{env.admin}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    print(f"\nrollout view screenshots: {ARTIFACTS}")
    d = browser.driver
    d.get("about:blank")
    time.sleep(0.3)
    browser.drain()   # whatever the browser did before our page
    browser.perf.clear()
    browser.console.clear()
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": INIT_SCRIPT})

    d.get(origin + "/")
    wait_for("#generated-at[data-value] on the page", lambda: (browser.snapshot()["generated_at"] or None), 15)
    # Let the first render finish (the route sections appear with it), then read the page in one script call.
    snap = wait_for("route sections rendered",
                    lambda: (lambda s: s if s["routes"] and s["generated_at"] else None)(browser.snapshot()), 10)
    stats_after, stats_after_text = get_stats(env.admin)
    check_stats_shape(stats_after)
    (ARTIFACTS / "stats.json").write_text(json.dumps(stats_after, indent=2))
    browser.screenshot(ARTIFACTS / "01-loaded.png")
    (ARTIFACTS / "page-loaded.html").write_text(d.page_source)
    assert RFC3339_UTC.match(snap["generated_at"]), snap["generated_at"]

    # The page shows exactly the JSON it fetched, and what /stats says right after (traffic is quiet).
    rendered = browser.stats_bodies().get(snap["generated_at"])
    if rendered is not None:
        problems = compare_page(snap, rendered, exact=True)
        assert not problems, "page != the /stats it rendered:\n  " + "\n  ".join(problems)
        assert _counts_only(rendered) == _counts_only(stats_after), "the /stats counts moved with no traffic"
    slack = abs(unix(stats_after["generated_at"]) - unix(snap["generated_at"])) + 1
    problems = compare_page(snap, stats_after, exact=False, slack=slack)
    assert not problems, "page != /stats fetched right after:\n  " + "\n  ".join(problems)
    # And those are the numbers sent (test 1 checked /stats; here the page itself).
    for name in ("shop", "beta", "dark"):
        sec = snap["routes"][name][0]["stats"]
        assert json.loads(sec["last_hour.verified"][0]["value"]) == env.traffic.expected[name]["verified"], name

    # More traffic: the page follows within one refresh, without a reload.
    d.execute_script("window.__rv_marker = 'still-the-same-document';")
    before_gen = snap["generated_at"]
    t = env.traffic
    m0 = len(t.mismatches)
    for app in (APP_A, APP_B, APP_A, APP_A):
        t.valid("beta", app)
    t.missing("beta")
    t.valid("shop", APP_B)
    t.valid("shop", APP_B)
    t.placeholder("shop")
    sent_at = time.monotonic()
    assert not t.mismatches[m0:], "answers otherwise than expected:\n  " + "\n  ".join(t.mismatches[m0:])
    want_beta = t.expected["beta"]["verified"]
    want_shop = t.expected["shop"]["verified"]

    def updated():
        s = browser.snapshot()
        try:
            b = json.loads(s["routes"]["beta"][0]["stats"]["last_hour.verified"][0]["value"])
            sh = json.loads(s["routes"]["shop"][0]["stats"]["last_hour.verified"][0]["value"])
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        return s if s["generated_at"] != before_gen and b == want_beta and sh == want_shop else None

    snap2 = wait_for(f"the page to show beta verified={want_beta}, shop verified={want_shop}", updated,
                     REFRESH_S * 2 + 2)
    took = time.monotonic() - sent_at
    print(f"page updated {took:.1f}s after the traffic")
    stats2 = settle(env)
    browser.screenshot(ARTIFACTS / "02-updated.png")
    (ARTIFACTS / "page-updated.html").write_text(d.page_source)
    assert snap2["marker"] == "still-the-same-document" and snap2["navigations"] == 1, \
        f"the page reloaded instead of updating: marker {snap2['marker']!r}, {snap2['navigations']} navigations"
    assert unix(snap2["generated_at"]) > unix(before_gen), (before_gen, snap2["generated_at"])
    for name, path in (("beta", "last_hour.verified"), ("beta", "last_hour.missing"), ("shop", "last_hour.verified"),
                       ("shop", "last_hour.client_attestation_failed"), ("shop", "last_day.verified")):
        old = json.loads(snap["routes"][name][0]["stats"][path][0]["value"])
        new = json.loads(snap2["routes"][name][0]["stats"][path][0]["value"])
        assert new > old, f"{name}.{path} did not increase: {old} -> {new}"
    for name in ("shop", "beta"):
        assert norm_window(route_of(stats2, name)["last_hour"]) == t.expected[name], (name, route_of(stats2, name))
    rendered2 = browser.stats_bodies().get(snap2["generated_at"])
    if rendered2 is not None:
        problems = compare_page(snap2, rendered2, exact=True)
        assert not problems, "updated page != the /stats it rendered:\n  " + "\n  ".join(problems)
    slack = abs(unix(stats2["generated_at"]) - unix(snap2["generated_at"])) + 1
    problems = compare_page(snap2, stats2, exact=False, slack=slack)
    assert not problems, "updated page != /stats:\n  " + "\n  ".join(problems)
    assert rendered is not None or rendered2 is not None, \
        "could not read any /stats body the page received (DevTools Network.getResponseBody)"

    # No network beyond the admin origin: the DevTools log of every request, and the page's resource timing.
    reqs = browser.requests(origin + "/")
    foreign = [u for _, u in reqs if not (u == origin or u.startswith(origin + "/") or u.startswith(("data:", "blob:")))]
    assert not foreign, f"requests outside {origin}: {foreign}"
    assert any(u == origin + "/" for _, u in reqs), f"the page load itself was not seen: {reqs[:5]}"
    stats_times = [ts for ts, u in reqs if u.split("?")[0] == origin + "/stats"]
    assert len(stats_times) >= 2, f"/stats fetched {len(stats_times)} times (on load and every {REFRESH_S}s)"
    gaps = [b - a for a, b in zip(stats_times, stats_times[1:])]
    assert all(REFRESH_S - 1.0 <= g <= REFRESH_S + 2.0 for g in gaps), \
        f"/stats fetched at gaps {[round(g, 2) for g in gaps]} s, expected every {REFRESH_S} s"
    snap3 = browser.snapshot()
    bad_resources = [n for n in snap3["resources"] if not n.startswith(origin + "/")]
    assert not bad_resources, f"resource timing entries outside {origin}: {bad_resources}"
    assert snap3["location"] == origin + "/", snap3["location"]

    # No console error, no script error, no CSP violation.
    browser.drain()
    # Chromium asks every page's origin for /favicon.ico by itself and logs the 404 as an error: not the page's doing.
    favicon = [e for e in browser.console if e.get("source") == "network" and "/favicon.ico " in e.get("message", "")]
    if favicon:
        print(f"note: chromium's own /favicon.ico request failed: {favicon[0]['message']}")
    errors = [e for e in browser.console if e.get("level") == "SEVERE" and e not in favicon]
    csp_msgs = [e for e in browser.console if "Content Security Policy" in e.get("message", "")]
    assert not errors, f"console errors: {errors}"
    assert not csp_msgs, f"CSP messages: {csp_msgs}"
    assert snap3["rv"] is not None, "the init script did not run (cannot watch for CSP violations)"
    assert snap3["rv"]["csp"] == [], f"CSP violations: {snap3['rv']['csp']}"
    assert snap3["rv"]["errors"] == [], f"script errors: {snap3['rv']['errors']}"

    # Nothing secret on the rendered page.
    page = d.page_source
    leaks = _leaks(env, page)
    assert not leaks, f"token contents or key id on the rendered page: {leaks[:5]}"
    print(f"rollout view: screenshots {ARTIFACTS / '01-loaded.png'} and {ARTIFACTS / '02-updated.png'}")


# ----------------------------------------------------------------------------------------------------------------
# 3. The page itself: headers, self-contained, admin listener only, nothing secret


def _leaks(env, text: str) -> list[str]:
    found = []
    needles = [env.kid]
    for tok in set(env.tokens):
        parts = tok.split(".")
        needles += [p for p in parts[1:] if len(p) >= 16]
    for s in needles:
        if s and s in text:
            found.append(s[:24] + "…")
    return found


def _csp(value: str) -> dict[str, list[str]]:
    out = {}
    for part in value.split(";"):
        words = part.split()
        if words:
            out[words[0].lower()] = words[1:]
    return out


@pytest.mark.timeout_s(60)
def test_page_headers_self_contained_admin_only_and_no_secrets(env):
    status, headers, html = admin_get(env.admin, "/")
    assert status == 200, (status, html[:300])
    assert headers.get("content-type", "").lower().replace(" ", "") == "text/html;charset=utf-8", headers
    csp = headers.get("content-security-policy")
    assert csp, f"no Content-Security-Policy on the page: {headers}"
    directives = _csp(csp)
    assert directives.get("connect-src") == ["'self'"], f"connect-src in {csp!r}"
    assert "default-src" in directives and set(directives["default-src"]) <= {"'self'", "'none'"}, \
        f"default-src must keep every other fetch to this origin (or none): {csp!r}"
    for name, sources in directives.items():
        if name.endswith("-src") or name in ("base-uri", "form-action", "frame-ancestors"):
            # Keywords ('self', 'none', 'unsafe-inline', nonces, hashes) and data:/blob: name no other origin; a host,
            # a scheme (https:, ws:) or * does.
            other = [s for s in sources if not (s.startswith("'") or s.lower() in ("data:", "blob:"))]
            assert not other, f"CSP {name} allows other origins: {other} in {csp!r}"
    # Self-contained: no external script, style sheet, image or frame.
    lowered = html.lower()
    assert "<script" in lowered and "<style" in lowered, f"no inline script or style: {html[:300]!r}"
    for pattern in (r"<script[^>]*\ssrc\s*=", r"<link[^>]*rel\s*=\s*[\"']?(stylesheet|preload|prefetch|modulepreload)",
                    r"<(img|iframe|object|embed|audio|video|source)\b[^>]*\ssrc\s*=\s*[\"']?(?!data:)"):
        m = re.search(pattern, lowered)
        assert not m, f"page refers to an outside resource: {html[max(0, m.start() - 40):m.end() + 80]!r}"
    css = " ".join(re.findall(r"<style[^>]*>(.*?)</style>", lowered, re.S) + re.findall(r"\sstyle\s*=\s*\"([^\"]*)\"", lowered))
    for pattern in (r"@import", r"url\(\s*[\"']?(?!data:|#)[^)\s]"):
        m = re.search(pattern, css)
        assert not m, f"the page's CSS refers to an outside resource: {css[max(0, m.start() - 40):m.end() + 80]!r}"

    # The public listener does not serve the page, nor /stats: no route matches them there (404 JSON).
    for path in ("/", "/stats"):
        r = U.one_shot(env.gw.port, http_get(path), timeout=10)
        assert r is not None and r.status == 404, (path, r and r.status, r and r.body[:200])
        assert (r.one("content-type") or "").startswith("application/json"), (path, r.headers)
        assert b"<html" not in (r.body or b"").lower() and b"generated_at" not in (r.body or b""), r.body[:200]
    # …while a real route there is proxied as usual.
    r = U.one_shot(env.gw.port, http_get("/open/page-check"), timeout=10)
    assert r is not None and r.status == 200, r and (r.status, r.body[:200])
    with env.up.lock:
        assert [q.target for q in env.up.requests if q.target in ("/", "/stats")] == [], \
            "the page or /stats path reached the upstream"

    # No token, signature, claim segment or key id in the page, /stats or /metrics.
    stats, stats_text = get_stats(env.admin)
    for what, text in (("GET /", html), ("GET /stats", stats_text), ("GET /stats (fixture)", env.stats_text),
                       ("/metrics", get_metrics(env.admin))):
        leaks = _leaks(env, text)
        assert not leaks, f"{what} shows token contents or the key id: {leaks[:5]}"
    assert len(env.tokens) >= 20 and len(env.kid) >= 8
