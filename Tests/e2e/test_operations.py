"""Operating the gateway: /metrics moving with accepted, rejected and replayed requests; /readyz following Redis;
SIGHUP reloads (a valid change under load without a failed request; an invalid file changes nothing and is
counted); X-Request-Id; --log-level; no token or query string in any log."""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config, http_get, wait_gateway_accepts

H = "X-Firebase-AppCheck"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def admin_get(port: int, path: str) -> tuple[int, str]:
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, **labels) -> float:
    """The value of the sample `name{labels}` (labels must match exactly the given subset), 0 when absent."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"^([a-z_]+)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


def config(port: int, aport: int, up_url: str, jwks_url: str, state: dict | None = None, extra_routes=(),
           extra_upstreams: dict | None = None) -> str:
    routes = [*extra_routes,
              {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "api", "verify": ["fb"], "limited_use": True},
              {"name": "api", "match": {"path_prefix": "/"}, "upstream": "api", "verify": ["fb"]}]
    return gateway_config(port, {"api": up_url, **(extra_upstreams or {})}, routes=routes, state=state,
                          verifiers={"fb": app_check_verifier(jwks_url)}) + f"admin:\n  address: 127.0.0.1:{aport}\n"


@pytest.fixture
def env(factory, start_dev_issuer):
    iss = start_dev_issuer()
    up = factory.upstream(name="ops-up")
    return SimpleNamespace(iss=iss, up=up, factory=factory)


def start(env, state=None, extra_routes=(), extra_args=()):
    port, aport = free_port(), free_port()
    gw = env.factory.gateway(config(port, aport, env.up.url, env.iss.jwks_url, state, extra_routes),
                             extra_args=tuple(extra_args))
    gw.admin_port = aport
    wait_gateway_accepts(port, "/", H, env.iss.token())
    return gw, aport


def send(port: int, path: str, token: str | None = None, extra: list | None = None) -> U.Resp:
    headers = ([(H, token)] if token else []) + (extra or [])
    r = U.one_shot(port, http_get(path, headers))
    assert r is not None
    return r


def test_metrics_move_with_accepted_rejected_and_replayed_requests(env):
    gw, aport = start(env)
    _, before = admin_get(aport, "/metrics")
    ok = env.iss.token()
    once = env.iss.token(limited_use=True)
    assert send(gw.port, "/a", ok).status == 200
    assert send(gw.port, "/a", ok).status == 200
    assert send(gw.port, "/a").status == 401                          # missing_token
    assert send(gw.port, "/a", env.iss.token(expired=True)).status == 401
    assert send(gw.port, "/lu/x", once).status == 200
    assert send(gw.port, "/lu/x", once).status == 401                 # token_replayed
    time.sleep(0.2)
    status, after = admin_get(aport, "/metrics")
    assert status == 200

    def delta(name, **labels):
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("attest_gateway_requests_total", route="api", status="200") == 2
    assert delta("attest_gateway_requests_total", route="api", status="401") == 2
    assert delta("attest_gateway_requests_total", route="lu", status="200") == 1
    assert delta("attest_gateway_requests_total", route="lu", status="401") == 1
    assert delta("attest_gateway_verifications_total", verifier="fb", result="verified") == 3
    assert delta("attest_gateway_verifications_total", verifier="fb", result="failed", reason="expired") == 1
    assert delta("attest_gateway_verifications_total", verifier="fb", result="failed", reason="token_replayed") == 1
    assert delta("attest_gateway_verifications_total", verifier="-", result="absent", reason="missing_token") == 1
    assert delta("attest_gateway_replays_rejected_total", verifier="fb") == 1
    assert delta("attest_gateway_upstream_response_seconds_count", upstream="api") == 3
    assert metric(after, "attest_gateway_jwks_refreshes_total", verifier="fb", result="ok") >= 1
    assert metric(after, "attest_gateway_jwks_keys", verifier="fb") == 1
    assert metric(after, "attest_gateway_state_operation_seconds_count") >= 2
    assert metric(after, "attest_gateway_active_connections") >= 0
    assert re.search(r'attest_gateway_config_info\{hash="[0-9a-f]{16}"\} 1', after)
    # Labels are configuration names and reason codes: no token, no path.
    assert ok not in after and once not in after and "/lu/x" not in after


def test_readyz_follows_the_redis_state_store(env, factory):
    redis = factory.redis()
    gw, aport = start(env, state={"backend": "redis", "url": redis.url, "timeout": "200ms"})
    assert admin_get(aport, "/readyz")[0] == 200
    redis.stop()
    deadline = time.monotonic() + 10
    while admin_get(aport, "/readyz")[0] != 503:
        assert time.monotonic() < deadline, "readyz stayed ready with Redis down"
        time.sleep(0.1)
    assert '"state"' in admin_get(aport, "/readyz")[1]
    redis.start()
    deadline = time.monotonic() + 15
    while admin_get(aport, "/readyz")[0] != 200:
        assert time.monotonic() < deadline, "readyz did not recover when Redis came back"
        time.sleep(0.2)


def test_sighup_applies_a_valid_change_under_load_without_a_failed_request(env, factory):
    other = factory.upstream(name="other-up")
    gw, aport = start(env)
    token = env.iss.token()
    results: list = []
    stop = threading.Event()

    def load() -> None:
        with U.Conn(gw.port) as c:   # keep-alive: requests in flight across the swap
            n = 0
            while not stop.is_set() and n < 5000:
                r = c.request(http_get("/new/x", [(H, token)]))
                results.append(r.status if r else None)
                n += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    # The new file: /new goes to another upstream.
    new_route = {"name": "new", "match": {"path_prefix": "/new"}, "upstream": "other", "verify": ["fb"]}
    gw.config_path.write_text(config(gw.port, aport, env.up.url, env.iss.jwks_url, extra_routes=[new_route],
                                     extra_upstreams={"other": other.url}))
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while not other.requests:
        assert time.monotonic() < deadline, "the reloaded route never reached the new upstream"
        time.sleep(0.05)
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(30)
    assert results and all(s == 200 for s in results), {s: results.count(s) for s in set(results)}
    _, m = admin_get(aport, "/metrics")
    assert metric(m, "attest_gateway_config_reloads_total", result="success") == 1
    assert "reload: configuration applied" in gw.stderr()


def test_sighup_with_an_invalid_file_changes_nothing_and_is_counted(env):
    gw, aport = start(env)
    _, m0 = admin_get(aport, "/metrics")
    hash0 = re.search(r'attest_gateway_config_info\{hash="([0-9a-f]*)"\}', m0).group(1)
    good = gw.config_path.read_text()
    gw.config_path.write_text(good.replace("upstream: api", "upstream: apii", 1))
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reload: invalid configuration" not in gw.stderr():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert 'unknown upstream \\"apii\\"' in gw.stderr()
    assert send(gw.port, "/a", env.iss.token()).status == 200
    # A change that needs a restart is refused the same way.
    gw.config_path.write_text(good.replace(f"127.0.0.1:{gw.port}", f"127.0.0.1:{free_port()}", 1))
    gw.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "changing listeners needs a restart" not in gw.stderr():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert send(gw.port, "/a", env.iss.token()).status == 200
    _, m1 = admin_get(aport, "/metrics")
    assert metric(m1, "attest_gateway_config_reloads_total", result="failure") == 2
    assert metric(m1, "attest_gateway_config_reloads_total", result="success") == 0
    assert re.search(r'attest_gateway_config_info\{hash="([0-9a-f]*)"\}', m1).group(1) == hash0


def test_request_ids_are_kept_or_generated_forwarded_and_logged(env):
    gw, _ = start(env)
    token = env.iss.token()
    send(gw.port, "/rid/kept", token, [("X-Request-Id", "abc-123")])
    send(gw.port, "/rid/generated", token)
    send(gw.port, "/rid/bad", token, [("X-Request-Id", 'has"quote')])
    time.sleep(0.3)
    seen = {q.target: q.one("x-request-id") for q in env.up.requests if q.target.startswith("/rid/")}
    assert seen["/rid/kept"] == "abc-123"
    uuid = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    assert uuid.match(seen["/rid/generated"]) and uuid.match(seen["/rid/bad"])
    logged = {l["path"]: l.get("request_id") for l in gw.log_lines() if l.get("path", "").startswith("/rid/")}
    assert logged == seen


def test_log_level_and_no_secrets_in_logs(env):
    gw, _ = start(env, extra_args=("--log-level", "warn"))
    token = env.iss.token()
    send(gw.port, "/secret/path?api_key=hunter2&q=1", token)
    send(gw.port, "/secret/path", env.iss.token(expired=True))
    time.sleep(0.3)
    err, out = gw.stderr(), gw.stdout()
    assert '"level":"info"' not in err          # --log-level warn drops the info lines ("listening", "jwks loaded")
    for text in (err, out):
        assert token not in text and token.split(".")[2] not in text
        assert "hunter2" not in text and "api_key" not in text
    assert any(l.get("path") == "/secret/path" for l in gw.log_lines())
