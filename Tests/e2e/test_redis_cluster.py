"""Redis Cluster (`state.cluster`): three real masters (`redis-server --cluster-enabled yes`, joined by
`redis-cli --cluster create`) on 127.0.0.1, two gateways seeded with one node each. One limited-use token sent 50
ways at once across both gateways is accepted exactly once; App Attest counters advance exactly once per assertion;
keys land on every master (the gateway routes by slot); a slot migrated under a consumed token is followed through
ASK (the key moved, the slot still migrating) and MOVED (the slot handed over), and a resharding under load loses no
token and accepts none twice. Keys of the other layout are refused, not misread."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest

import upstreams as U
from harness import RedisServer, b64url_decode, free_port, http_get, log_records
from redis_gateway import check_state, H, readyz, start_state_gateway, status, wait_failure

PROJECT = "123456789012"       # the dev issuer's project number: the jti keys' namespace
REDIS_CLI = "/usr/bin/redis-cli"


def cli(*args: str, check: bool = True) -> str:
    p = subprocess.run([REDIS_CLI, *args], capture_output=True, timeout=60)
    out = (p.stdout + p.stderr).decode()
    assert not check or p.returncode == 0, out
    return out


class Cluster:
    """`masters` cluster-enabled servers (each with its own bus port), created with `replicas` replicas each
    (`self.nodes` lists every server; which are masters is the cluster's to say)."""

    def __init__(self, workdir: Path, masters: int = 3, replicas: int = 0):
        self.nodes = []
        for i in range(masters * (1 + replicas)):
            self.nodes.append(RedisServer(workdir / f"node{i}", extra_args=(
                "--cluster-enabled", "yes", "--cluster-port", str(free_port()), "--cluster-node-timeout", "2000")))
        cli("--cluster", "create", *[f"127.0.0.1:{n.port}" for n in self.nodes], "--cluster-replicas", str(replicas),
            "--cluster-yes")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all("cluster_state:ok" in n.command("CLUSTER", "INFO") for n in self.nodes):
                return
            time.sleep(0.05)
        raise RuntimeError("the cluster did not reach cluster_state:ok")

    def c(self, *args: str) -> str:
        """redis-cli -c (follows redirects) against the first node."""
        return cli("-c", "-p", str(self.nodes[0].port), *args).strip()

    def slot(self, key: str) -> int:
        return int(self.nodes[0].command("CLUSTER", "KEYSLOT", key))

    def owner(self, slot: int):
        """The node that serves `slot` (by its own CLUSTER NODES line)."""
        for n in self.nodes:
            if self._serves(n, slot):
                return n
        raise AssertionError(f"no node serves slot {slot}")

    def _serves(self, node, slot: int) -> bool:
        myid = node.command("CLUSTER", "MYID")
        for line in node.command("CLUSTER", "NODES").splitlines():
            fields = line.split()
            if fields[0] != myid:
                continue
            for part in fields[8:]:
                if part.startswith("["):
                    continue
                lo, _, hi = part.partition("-")
                if int(lo) <= slot <= int(hi or lo):
                    return True
        return False

    def close(self):
        for n in self.nodes:
            n.stop()


@pytest.fixture
def cluster(factory, tmp_path):
    c = Cluster(tmp_path / "cluster")
    factory.items.append(c)
    return c


def start(start_gateway, start_upstream, iss, cluster: Cluster, seed: int, prefix: str = "cl:", wait: bool = True, **state):
    return start_state_gateway(start_gateway, start_upstream, iss, {
        "backend": "redis", "key_prefix": prefix, "timeout": "1s",
        "cluster": {"nodes": [f"127.0.0.1:{cluster.nodes[seed].port}"]}, **state}, wait=wait)


def jti_key(token: str, prefix: str = "cl:") -> str:
    claims = json.loads(b64url_decode(token.split(".")[1]))
    return f"{prefix}jti:{{{PROJECT}:{claims['jti']}}}"


def fire(requests: list[tuple[int, str, str]]) -> list:
    """All at once (one connection each, a barrier): (status, reason) per (port, path, token)."""
    barrier = threading.Barrier(len(requests), timeout=20)
    results: list = [None] * len(requests)

    def worker(i: int) -> None:
        port, path, token = requests[i]
        try:
            conn = U.Conn(port, timeout=20)
            barrier.wait()
            r = conn.request(http_get(path, [(H, token)]))
            results[i] = (r.status, None if r.status == 200 else json.loads(r.body).get("reason"))
        except Exception as e:  # noqa: BLE001
            results[i] = f"error: {type(e).__name__}: {e}"

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    return results


@pytest.mark.timeout_s(90)
def test_one_token_fifty_ways_across_two_gateways_is_accepted_once(factory, cluster, start_gateway, start_upstream):
    iss = factory.dev_issuer()
    g1 = start(start_gateway, start_upstream, iss, cluster, seed=0)
    g2 = start(start_gateway, start_upstream, iss, cluster, seed=2)
    for round_ in range(4):
        token = iss.token(limited_use=True)
        results = fire([((g1, g2)[i % 2].port, f"/lu/r{round_}/{i}", token) for i in range(50)])
        assert results.count((200, None)) == 1 and results.count((401, "token_replayed")) == 49, (round_, results)
        # The consumed jti is on the master that owns its slot, under layout 2's name.
        key = jti_key(token)
        assert cluster.owner(cluster.slot(key)).command("EXISTS", key) == 1, key
    # Distinct tokens spread over every master: the gateway routes by slot (no single-node shortcut).
    for i in range(40):
        assert status((g1, g2)[i % 2], f"/lu/d{i}", iss.token(limited_use=True)) == (200, None)
    sizes = [n.command("DBSIZE") for n in cluster.nodes]
    assert all(s > 0 for s in sizes), sizes
    assert cluster.c("GET", "cl:layout") == "2"
    lines = log_records(g1.stderr_path, "state store cluster slots")
    assert lines and lines[0]["masters"].count("slots") == 3, lines


@pytest.mark.timeout_s(120)
def test_app_attest_counters_advance_once_per_assertion(factory, cluster, dev_bin, tmp_path):
    from test_app_attest import Device, aa_config, ca_dir, post_together, register
    ca, root = ca_dir(dev_bin, tmp_path)
    up = factory.upstream(name="cluster-aa")
    state = {"backend": "redis", "key_prefix": "aa:", "timeout": "1s",
             "cluster": {"nodes": [f"127.0.0.1:{cluster.nodes[1].port}"]}}
    ports = [free_port(), free_port()]
    for p in ports:
        factory.gateway(aa_config(p, up.url, root, state))
    d = Device(dev_bin, ca, tmp_path / "dev")
    register(ports[0], d)
    key = f"aa:key:{{{d.key_id}}}"
    assert cluster.c("HGET", key, "counter") == "0"
    for k in range(1, 6):
        results = post_together(ports, "/api/r", b"x", d.assertions("POST", "/api/r", b"x")[0])
        assert results.count((200, None)) == 1 and results.count((401, "counter_not_increasing")) == 7, (k, results)
        assert cluster.c("HGET", key, "counter") == str(k)
    # The app's key list (another slot) names the key once.
    assert cluster.c("LRANGE", f"aa:app:{{TEAMID1234.com.example.app}}", "0", "-1") == d.key_id


@pytest.mark.timeout_s(90)
def test_a_migrating_slot_is_followed_through_ask_and_moved(factory, cluster, start_gateway, start_upstream):
    iss = factory.dev_issuer()
    gw = start(start_gateway, start_upstream, iss, cluster, seed=0)
    token = iss.token(limited_use=True)
    assert status(gw, "/lu/a", token) == (200, None)
    key = jti_key(token)
    slot = cluster.slot(key)
    source = cluster.owner(slot)
    target = next(n for n in cluster.nodes if n is not source)
    source_id, target_id = source.command("CLUSTER", "MYID"), target.command("CLUSTER", "MYID")
    assert target.command("CLUSTER", "SETSLOT", str(slot), "IMPORTING", source_id) == "OK"
    assert source.command("CLUSTER", "SETSLOT", str(slot), "MIGRATING", target_id) == "OK"
    # The key moves; the slot is still the source's: the source answers ASK, the gateway asks the target.
    assert source.command("MIGRATE", "127.0.0.1", str(target.port), "", "0", "5000", "KEYS", key) == "OK"
    assert source.command("CLUSTER", "COUNTKEYSINSLOT", str(slot)) == 0
    assert target.command("CLUSTER", "COUNTKEYSINSLOT", str(slot)) == 1
    assert status(gw, "/lu/a", token) == (401, "token_replayed")
    # A new token whose key is not in the slot still works (no redirect for other slots).
    assert status(gw, "/lu/b", iss.token(limited_use=True)) == (200, None)
    # The slot is handed over: the source answers MOVED, the gateway updates its map.
    for n in cluster.nodes:
        assert n.command("CLUSTER", "SETSLOT", str(slot), "NODE", target_id) == "OK"
    assert status(gw, "/lu/a", token) == (401, "token_replayed")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(log_records(gw.stderr_path, "state store cluster slots")) < 2:
        assert status(gw, "/lu/c", iss.token(limited_use=True)) == (200, None)
        time.sleep(0.1)
    maps = log_records(gw.stderr_path, "state store cluster slots")
    assert len(maps) >= 2 and maps[-1]["masters"] != maps[0]["masters"], maps
    assert not log_records(gw.stderr_path, "state store unavailable"), gw.stderr_path.read_text()[-2000:]


@pytest.mark.timeout_s(150)
def test_a_resharding_under_load_loses_no_token_and_accepts_none_twice(factory, cluster, start_gateway, start_upstream):
    iss = factory.dev_issuer()
    g1 = start(start_gateway, start_upstream, iss, cluster, seed=0)
    g2 = start(start_gateway, start_upstream, iss, cluster, seed=1)
    tokens = [iss.token(limited_use=True) for _ in range(300)]
    for t in tokens[:100]:          # keys in many slots before the move, so the resharding migrates some
        assert status(g1, "/lu/pre", t) == (200, None)
    results: list = []
    stop = threading.Event()

    def load() -> None:
        for i, t in enumerate(tokens[100:]):
            if stop.is_set():
                break
            results.append((status(g1, f"/lu/n{i}", t), status(g2, f"/lu/n{i}", t), status(g1, "/lu/old", tokens[i % 100])))

    worker = threading.Thread(target=load)
    worker.start()
    src, dst = cluster.nodes[0].command("CLUSTER", "MYID"), cluster.nodes[1].command("CLUSTER", "MYID")
    out = cli("--cluster", "reshard", f"127.0.0.1:{cluster.nodes[0].port}", "--cluster-from", src, "--cluster-to", dst,
              "--cluster-slots", "1500", "--cluster-yes", "--cluster-pipeline", "10")
    worker.join(90)
    stop.set()
    assert "Moving slot" in out, out[-500:]
    wrong = [r for r in results if r != ((200, None), (401, "token_replayed"), (401, "token_replayed"))]
    assert len(results) >= 50 and not wrong, (len(results), wrong[:5])
    maps = log_records(g1.stderr_path, "state store cluster slots") + log_records(g2.stderr_path, "state store cluster slots")
    assert len(maps) >= 3, maps      # each gateway's first map, and at least one after the move


@pytest.mark.timeout_s(120)
def test_a_killed_master_is_replaced_by_its_replica_and_followed(factory, start_gateway, start_upstream, tmp_path):
    """Three masters with a replica each: the master of a consumed token's slot is SIGKILLed; the cluster promotes
    its replica (cluster-node-timeout 2 s) and the gateway reads the new map by itself — that slot answers 503 until
    then, never 200 twice — and the token (replicated before the kill) is still refused on the promoted replica."""
    c = Cluster(tmp_path / "ha", masters=3, replicas=1)
    factory.items.append(c)
    iss = factory.dev_issuer()
    gw = start(start_gateway, start_upstream, iss, c, seed=0)
    token = iss.token(limited_use=True)
    assert status(gw, "/lu/a", token) == (200, None)
    key = jti_key(token)
    victim = c.owner(c.slot(key))
    slot = c.slot(key)
    replica = next(n for n in c.nodes if f"master_port:{victim.port}" in n.command("INFO", "replication"))
    deadline = time.monotonic() + 20                         # the replica has the consumed jti
    while time.monotonic() < deadline and replica.command("CLUSTER", "COUNTKEYSINSLOT", str(slot)) < 1:
        time.sleep(0.1)
    assert replica.command("CLUSTER", "COUNTKEYSINSLOT", str(slot)) >= 1
    victim.stop()                                            # SIGKILL
    seen, deadline = [], time.monotonic() + 30
    while time.monotonic() < deadline:
        seen.append(status(gw, "/lu/a", token))
        if seen[-1] == (401, "token_replayed"):
            break
        time.sleep(0.1)
    assert seen[-1] == (401, "token_replayed"), seen[-5:]
    assert set(seen) <= {(503, "state_unavailable"), (401, "token_replayed")}, set(seen)
    fresh = iss.token(limited_use=True)
    assert status(gw, "/lu/b", fresh) == (200, None) and status(gw, "/lu/b", fresh) == (401, "token_replayed")
    maps = log_records(gw.stderr_path, "state store cluster slots")
    assert len(maps) >= 2 and f"127.0.0.1:{victim.port} " not in maps[-1]["masters"], maps


@pytest.mark.parametrize("on_unavailable", ["reject", "allow"])
def test_keys_of_layout_one_are_refused_and_readyz_says_why(factory, cluster, start_gateway, start_upstream, on_unavailable):
    """Refused, not misread — also with on_unavailable: allow, which lets requests through only while the store is
    unreachable, never while it holds keys the gateway would misread (503, the upstream never reached)."""
    iss = factory.dev_issuer()
    cluster.c("SET", "old:jti:123456789012:abc", "2000000000")      # as a single Redis's gateway wrote it
    gw = start(start_gateway, start_upstream, iss, cluster, seed=0, prefix="old:", wait=False, on_unavailable=on_unavailable)
    assert wait_failure(gw, iss)["cause"] == "layout"
    code, doc = readyz(gw)
    assert code == 503 and doc["waiting_for"] == ["state"] and doc["state_error"]["cause"] == "layout", doc
    # Nothing was written under the prefix: the old key is as it was, no marker.
    assert cluster.c("GET", "old:jti:123456789012:abc") == "2000000000" and cluster.c("EXISTS", "old:layout") == "0"


def test_a_single_server_named_as_a_cluster_is_said_so(factory, start_gateway, start_upstream, tmp_path):
    iss = factory.dev_issuer()
    single = RedisServer(tmp_path / "single")
    factory.items.append(single)
    gw = start_state_gateway(start_gateway, start_upstream, iss, {
        "backend": "redis", "cluster": {"nodes": [f"127.0.0.1:{single.port}"]}}, wait=False)
    assert wait_failure(gw, iss)["cause"] == "not_cluster"


def test_check_config_on_cluster_settings(gateway_bin, tmp_path):
    def check(state: dict) -> tuple[int, str]:
        return check_state(gateway_bin, tmp_path, state)

    good = {"cluster": {"nodes": ["127.0.0.1:7000", "[::1]:7001"]}}
    assert check(good) == (0, "ok\n")
    assert check({**good, "tls": True, "ca_file": str(tmp_path / "missing.pem")})[0] != 0   # the file is read
    code, out = check({**good, "url": "redis://127.0.0.1:6379/0"})
    assert code != 0 and "url and cluster name the servers twice" in out, out
    code, out = check({**good, "sentinel": {"master": "m", "nodes": ["127.0.0.1:26379"]}})
    assert code != 0 and "sentinel and cluster" in out, out
    code, out = check({**good, "database": 1})
    assert code != 0 and "one database" in out and "applies with sentinel" not in out, out
    code, out = check({**good, "key_prefix": ""})
    assert code != 0 and "may not be empty" in out, out
    code, out = check({**good, "key_prefix": "{ag}:"})
    assert code != 0 and "state.key_prefix" in out and "{ or }" in out, out
    code, out = check({**good, "tls_server_name": "redis.internal"})
    assert code != 0 and "with cluster: tls: true" in out, out
    code, out = check({"cluster": {"nodes": ["127.0.0.1:7000", "127.0.0.1:7000"]}})
    assert code != 0 and "listed twice" in out, out
    code, out = check({"cluster": {"nodes": ["127.0.0.1"]}})
    assert code != 0 and "state.cluster.nodes[0]" in out and "host:port" in out, out
    code, out = check({"cluster": {"seeds": ["127.0.0.1:7000"]}})
    assert code != 0 and "seeds" in out, out
