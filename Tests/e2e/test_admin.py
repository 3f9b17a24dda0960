"""The admin listener: /healthz always, /readyz only once every App Check key set has loaded, /metrics."""

import json
import time
import urllib.request

import harness as H
import upstreams as U
from harness import free_port, gateway_config

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(port: int, path: str) -> tuple[int, dict]:
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _config_with_admin(gport: int, aport: int, upstream_url: str, jwks_url: str) -> str:
    cfg = gateway_config(gport, {"api": upstream_url}, verifiers={"fb": H.app_check_verifier(jwks_url)},
                         routes=[{"name": "api", "match": {"path_prefix": "/"}, "upstream": "api", "verify": ["fb"]}])
    return cfg + f"admin:\n  address: 127.0.0.1:{aport}\n"


def test_readyz_waits_for_the_key_set(start_gateway, start_upstream):
    up = start_upstream("echo")
    issuer_port = free_port()   # nothing listens here yet: the key set cannot load
    aport = free_port()
    start_gateway(_config_with_admin(free_port(), aport, up.url, f"http://127.0.0.1:{issuer_port}/jwks"))
    deadline = time.monotonic() + 10
    while True:
        try:
            status, body = _get(aport, "/healthz")
            break
        except OSError:
            assert time.monotonic() < deadline, "admin listener never answered"
            time.sleep(0.1)
    assert status == 200 and body == {"status": "ok"}
    status, body = _get(aport, "/readyz")
    assert status == 503 and body == {"ready": False, "waiting_for": ["jwks:fb"]}
    with _NO_PROXY.open(f"http://127.0.0.1:{aport}/metrics", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert "# TYPE attest_gateway_requests_total counter" in r.read().decode()


def test_readyz_is_ready_once_keys_loaded(start_gateway, start_upstream, start_dev_issuer):
    up = start_upstream("echo")
    issuer = start_dev_issuer()
    aport = free_port()
    start_gateway(_config_with_admin(free_port(), aport, up.url, issuer.jwks_url))
    deadline = time.monotonic() + 10
    last = None
    while time.monotonic() < deadline:
        try:
            last = _get(aport, "/readyz")
            if last[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    assert last == (200, {"ready": True})


def test_metrics_carry_build_info_process_families_and_no_empty_reason(start_gateway, start_upstream, start_dev_issuer):
    up, iss = start_upstream(), start_dev_issuer()
    gport, aport = free_port(), free_port()
    gw = start_gateway(_config_with_admin(gport, aport, up.url, iss.jwks_url))
    H.wait_gateway_accepts(gw.port, "/x", "X-Firebase-AppCheck", iss.token())
    with _NO_PROXY.open(f"http://127.0.0.1:{aport}/metrics", timeout=5) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    build = [v for k, v in values.items() if k.startswith('attest_gateway_build_info{version="')]
    assert build == [1], text
    assert values["process_resident_memory_bytes"] > 1 << 20
    assert 3 <= values["process_open_fds"] < values["process_max_fds"]
    assert values["process_cpu_seconds_total"] > 0
    assert abs(values["process_start_time_seconds"] - time.time()) < 120
    # The key set's schedule: just fetched, expiring in the future (the dev issuer's Cache-Control), no failure.
    assert 0 <= values['attest_gateway_jwks_age_seconds{verifier="fb"}'] < 60
    assert values['attest_gateway_jwks_expiry_seconds{verifier="fb"}'] > 0
    assert values['attest_gateway_jwks_consecutive_failures{verifier="fb"}'] == 0
    # The end-to-end duration per route: the requests the gateway answered on route "api" (wait_gateway_accepts
    # polled until one passed), each taking some time.
    assert values['attest_gateway_request_duration_seconds_count{route="api"}'] >= 1
    assert values['attest_gateway_request_duration_seconds_sum{route="api"}'] > 0
    assert values['attest_gateway_request_duration_seconds_bucket{route="api",le="+Inf"}'] == \
        values['attest_gateway_request_duration_seconds_count{route="api"}']
    # A verified result has no reason, and no empty reason label stands in for it.
    assert 'reason=""' not in text
    # ... and the route it happened on is the last label (the rollout view's per-route numbers come from it).
    assert values.get('attest_gateway_verifications_total{verifier="fb",result="verified",route="api"}', 0) >= 1, text


def test_registration_and_unmatched_forward_auth_calls_have_their_own_route_label(start_gateway, start_upstream, tmp_path):
    up = start_upstream()
    gport, aport = free_port(), free_port()
    cfg = gateway_config(gport, {"api": up.url}, state={"backend": "memory"},
                         verifiers={"ios": {"type": "app_attest", "team_id": "ABCDE12345", "bundle_ids": ["com.example.app"],
                                            "registration_path": "/.attest/ios"}},
                         routes=[{"name": "api", "match": {"path_prefix": "/api/"}, "upstream": "api", "verify": []}])
    gw = start_gateway(cfg + f"forward_auth:\n  path: /.attest/verify\n  source: nginx\nadmin:\n  address: 127.0.0.1:{aport}\n")
    challenge = b"POST /.attest/ios/challenge HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    assert U.one_shot(gw.port, challenge, timeout=10).status == 200
    check = (b"GET /.attest/verify HTTP/1.1\r\nHost: gw.test\r\nX-Original-URI: /nowhere\r\nX-Original-Method: GET\r\n"
             b"X-Original-Host: gw.test\r\nConnection: close\r\n\r\n")
    assert U.one_shot(gw.port, check, timeout=10).status == 404
    assert U.one_shot(gw.port, b"GET /nothing HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n", timeout=10).status == 404
    with _NO_PROXY.open(f"http://127.0.0.1:{aport}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'attest_gateway_requests_total{route="registration",status="200"} 1' in text, text
    assert 'attest_gateway_requests_total{route="forward_auth",status="404"} 1' in text, text
    assert 'attest_gateway_requests_total{route="-",status="404"} 1' in text, text


def test_stats_counts_each_route_in_the_rollout_categories(start_gateway, start_upstream, start_dev_issuer):
    """GET /stats (PROTOCOL.md Additions "Rollout view"): per route, Firebase's categories over the last hour and
    day; the Firebase SDK placeholder counted apart from invalid tokens; GET / is the page that reads it."""
    up, iss = start_upstream(), start_dev_issuer()
    gport, aport = free_port(), free_port()
    cfg = gateway_config(gport, {"api": up.url}, verifiers={"fb": H.app_check_verifier(iss.jwks_url)},
                         routes=[{"name": "api", "match": {"path_prefix": "/api"}, "upstream": "api", "verify": ["fb"]},
                                 {"name": "watch", "match": {"path_prefix": "/watch"}, "upstream": "api", "verify": ["fb"],
                                  "mode": "monitor"},
                                 {"name": "open", "match": {"path_prefix": "/"}, "upstream": "api"}])
    gw = start_gateway(cfg + f"admin:\n  address: 127.0.0.1:{aport}\n")
    H.wait_gateway_accepts(gw.port, "/api/warm", "X-Firebase-AppCheck", iss.token())
    placeholder = "eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ=="

    def send(path, token=None):
        headers = [("X-Firebase-AppCheck", token)] if token else []
        r = U.one_shot(gw.port, H.http_get(path, headers))
        return r.status

    assert [send("/api/a", iss.token()) for _ in range(2)] == [200, 200]
    assert send("/api/b") == 401
    assert send("/api/c", placeholder) == 401
    assert send("/api/d", iss.token(expired=True)) == 401
    assert [send("/watch/x"), send("/watch/y", iss.token()), send("/watch/z", placeholder)] == [200, 200, 200]
    assert send("/other") == 200

    status, doc = _get(aport, "/stats")
    assert status == 200
    routes = {r["name"]: r for r in doc["routes"]}
    assert set(routes) == {"api", "watch"}, "a route without verifiers has nothing to show"
    api, watch = routes["api"], routes["watch"]
    assert (api["mode"], watch["mode"], api["verifiers"]) == ("enforce", "monitor", ["fb"])
    expected_api = {"verified": 3, "missing": 0 + 1, "client_attestation_failed": 1, "invalid": {"expired": 1},
                    "replayed": 0, "unavailable": 0}
    # wait_gateway_accepts polled until one passed: its earlier tries (before the key set loaded) may be refusals.
    got = dict(api["last_hour"])
    assert got["verified"] >= 3 and got["missing"] >= 1
    assert {k: got[k] for k in ("client_attestation_failed", "invalid", "replayed")} == \
        {k: expected_api[k] for k in ("client_attestation_failed", "invalid", "replayed")}, got
    assert api["last_day"] == api["last_hour"]
    assert watch["last_hour"] == {"verified": 1, "missing": 1, "client_attestation_failed": 1, "invalid": {},
                                  "replayed": 0, "unavailable": 0}
    assert watch["would_reject_percent"] == 66.7
    assert sum(m["verified"] for m in watch["minutes"]) == 1 and sum(m["rejected"] for m in watch["minutes"]) == 2
    assert len(watch["minutes"]) == 60
    assert {r["reason"]: r["count"] for r in watch["top_reasons"]} == {"missing_token": 1, "client_attestation_failed": 1}
    assert [a["count"] for a in watch["top_app_ids"]] == [1]
    assert [k["verifier"] for k in doc["key_sets"]] == ["fb"] and doc["key_sets"][0]["last_error"] is None
    assert doc["config"]["hash"] and doc["config"]["reloads"] == []
    assert placeholder not in json.dumps(doc)

    with _NO_PROXY.open(f"http://127.0.0.1:{aport}/", timeout=5) as r:
        page = r.read().decode()
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        csp = r.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "unsafe-inline" not in csp
    assert "fetch(\"/stats\"" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_rollout_view_answers_only_local_host_names(start_gateway, start_upstream, start_dev_issuer):
    """DNS rebinding: a page on another site that resolves its own name to the admin listener (a port-forward on
    the operator's machine) gets 421, not the numbers; addresses and localhost are served; /metrics is unaffected."""
    up, iss = start_upstream(), start_dev_issuer()
    gport, aport = free_port(), free_port()
    start_gateway(_config_with_admin(gport, aport, up.url, iss.jwks_url))
    deadline = time.monotonic() + 10
    while True:
        try:
            _get(aport, "/healthz")
            break
        except OSError:
            assert time.monotonic() < deadline, "admin listener never answered"
            time.sleep(0.1)

    def status(path, host):
        raw = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
        r = U.one_shot(aport, raw)
        return r.status, r

    for path in ("/", "/stats"):
        assert status(path, "evil.example")[0] == 421
        assert status(path, f"evil.example:{aport}")[0] == 421
        assert status(path, f"127.0.0.1:{aport}")[0] == 200
        assert status(path, f"localhost:{aport}")[0] == 200
    assert status("/metrics", "evil.example")[0] == 200
    code, headers = status("/stats", "127.0.0.1")
    assert code == 200 and headers.one("x-content-type-options") == "nosniff", headers.headers
    raw = f"POST /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
    r = U.one_shot(aport, raw)
    assert r.status == 405 and r.one("allow") == "GET, HEAD", r.headers
