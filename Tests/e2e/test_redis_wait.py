"""`state.wait_replicas`: a Redis master and a replica (`redis-server --replicaof`) on 127.0.0.1; with wait_replicas
every write (a consumed token here) waits for the replica's acknowledgement within `state.timeout`, and a write
the replica did not acknowledge answers 503 state_unavailable (cause wait_replicas) instead of a pass a failover
could forget."""

from __future__ import annotations

import json
import secrets
import time

import pytest

import upstreams as U
from harness import (RedisServer, app_check_verifier, free_port, gateway_config, http_get, log_records,
                     wait_gateway_accepts)

H = "X-Firebase-AppCheck"


@pytest.fixture(scope="module")
def pair(module_factory):
    master = RedisServer(module_factory.tmp / "master")
    replica = RedisServer(module_factory.tmp / "replica", extra_args=("--replicaof", "127.0.0.1", str(master.port)))
    module_factory.items += [replica, master]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "master_link_status:up" not in replica.command("INFO", "replication"):
        time.sleep(0.1)
    assert "master_link_status:up" in replica.command("INFO", "replication")
    return master, replica, module_factory.dev_issuer()


def start(start_gateway, start_upstream, master, iss, wait: int):
    up = start_upstream()
    port = free_port()
    routes = [{"name": "ready", "match": {"path_prefix": "/ready"}, "upstream": "up", "verify": ["fb"]},
              {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "up", "verify": ["fb"], "limited_use": True}]
    state = {"backend": "redis", "url": master.url, "key_prefix": f"w{secrets.token_hex(4)}:", "timeout": "400ms",
             "wait_replicas": wait}
    gw = start_gateway(gateway_config(port, {"up": up.url}, routes=routes, state=state,
                                      verifiers={"fb": app_check_verifier(iss.jwks_url)}))
    wait_gateway_accepts(gw.port, "/ready", H, iss.token())
    return gw


def send(gw, path: str, token: str) -> tuple:
    r = U.one_shot(gw.port, http_get(path, [(H, token)]), timeout=10)
    assert r is not None
    return (r.status, None if r.status == 200 else json.loads(r.body).get("reason"))


def causes(gw) -> list[str]:
    return [r.get("cause") for r in log_records(gw.stderr_path, "state store unavailable")]


def test_a_write_the_replica_acknowledged_passes_and_one_it_did_not_fails_closed(pair, start_gateway, start_upstream):
    master, replica, iss = pair
    gw = start(start_gateway, start_upstream, master, iss, wait=1)
    t = iss.token(limited_use=True)
    assert send(gw, "/lu/a", t) == (200, None)
    assert send(gw, "/lu/a", t) == (401, "token_replayed")
    replica.stop()
    try:
        t2 = iss.token(limited_use=True)
        assert send(gw, "/lu/b", t2) == (503, "state_unavailable")     # consumed on the master, not replicated
        assert "wait_replicas" in causes(gw), gw.stderr_path.read_text()[-2000:]
    finally:
        replica.start()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "master_link_status:up" not in replica.command("INFO", "replication"):
        time.sleep(0.1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and send(gw, "/lu/c", t3 := iss.token(limited_use=True)) != (200, None):
        time.sleep(0.3)
    assert send(gw, "/lu/c", t3) == (401, "token_replayed")


def test_more_replicas_than_there_are_is_always_refused(pair, start_gateway, start_upstream):
    master, _, iss = pair
    gw = start(start_gateway, start_upstream, master, iss, wait=2)
    assert send(gw, "/lu/d", iss.token(limited_use=True)) == (503, "state_unavailable")
    assert causes(gw)[:1] == ["wait_replicas"]


def test_without_wait_replicas_a_missing_replica_changes_nothing(pair, start_gateway, start_upstream):
    master, _, iss = pair
    gw = start(start_gateway, start_upstream, master, iss, wait=0)
    assert send(gw, "/lu/e", iss.token(limited_use=True)) == (200, None)
