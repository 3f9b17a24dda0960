"""A gateway on a Redis state store, as the Redis tests start it (test_redis_tls.py, test_redis_sentinel.py): a
route that needs no state (`/ready`, what start-up waits on) and a limited-use route (`/lu`), both App Check; the
admin listener on its own port (`gw.admin`)."""

from __future__ import annotations

import json
import time

import upstreams as U
from harness import app_check_verifier, free_port, gateway_config, http_get, log_records, run_cli, wait_gateway_accepts

H = "X-Firebase-AppCheck"


def start_state_gateway(start_gateway, start_upstream, iss, state: dict, wait: bool = True):
    """`state`: the whole `state:` section. `wait`: until /ready answers 200 (the key set loaded)."""
    up = start_upstream()
    port, admin = free_port(), free_port()
    routes = [{"name": "ready", "match": {"path_prefix": "/ready"}, "upstream": "up", "verify": ["fb"]},
              {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "up", "verify": ["fb"], "limited_use": True}]
    cfg = gateway_config(port, {"up": up.url}, routes=routes, state=state, verifiers={"fb": app_check_verifier(iss.jwks_url)})
    gw = start_gateway(cfg + f"admin:\n  address: 127.0.0.1:{admin}\n")
    gw.admin = admin
    if wait:
        wait_gateway_accepts(gw.port, "/ready", H, iss.token())
    return gw


def status(gw, path: str, token: str) -> tuple:
    """(status, reason) of one App Check request; reason None for a 200."""
    r = U.one_shot(gw.port, http_get(path, [(H, token)]), timeout=10)
    assert r is not None
    return (r.status, None if r.status == 200 else json.loads(r.body).get("reason"))


def readyz(gw) -> tuple[int, dict]:
    r = U.one_shot(gw.admin, http_get("/readyz", [], host="127.0.0.1"), timeout=10)
    assert r is not None
    return r.status, json.loads(r.body)


def failures(gw) -> list[dict]:
    return log_records(gw.stderr_path, "state store unavailable")


def wait_failure(gw, iss, once: bool = True) -> dict:
    """Limited-use requests answer 503 state_unavailable until the store's failure is logged, and a few more after;
    returns the first logged failure (`once`: and asserts it is the only one — the same failure is not logged
    again)."""
    # The gateway was started without waiting for readiness: its App Check keys first (a slow build — a sanitizer's —
    # answers jwks_unavailable until they are loaded, which is not what these tests look at).
    loaded = time.monotonic() + 10
    while time.monotonic() < loaded and not log_records(gw.stderr_path, "jwks loaded"):
        time.sleep(0.05)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not failures(gw):
        assert status(gw, "/lu/x", iss.token(limited_use=True)) == (503, "state_unavailable")
        time.sleep(0.1)
    for _ in range(3):
        assert status(gw, "/lu/y", iss.token(limited_use=True)) == (503, "state_unavailable")
        time.sleep(0.15)
    lines = failures(gw)
    assert len(lines) == 1 or (lines and not once), gw.stderr_path.read_text()[-3000:]
    return lines[0]


def check_state(gateway_bin, tmp_path, state: dict) -> tuple[int, str]:
    """`check-config` on a gateway.yml whose `state:` is `{backend: redis, **state}`: (exit code, its output)."""
    cfg = tmp_path / f"c{time.time_ns()}.yml"
    cfg.write_text(gateway_config(18097, {"up": "http://127.0.0.1:9"}, state={"backend": "redis", **state}))
    p = run_cli(gateway_bin, "check-config", "--config", str(cfg))
    return p.returncode, (p.stdout + p.stderr).decode()
