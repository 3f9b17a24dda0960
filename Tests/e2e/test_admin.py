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
    assert any(k.startswith('attest_gateway_verifications_total{verifier="fb",result="verified"}') for k in values), text


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
