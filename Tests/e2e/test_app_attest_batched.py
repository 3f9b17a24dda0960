"""App Attest counters under load, where the gateway batches them: the compare-and-sets of one state drain go to the
store together (`advanceCounters(batch:)`: one SQLite transaction, one Redis script). Several devices at once, each
assertion accepted once and its replay refused; and a SIGKILL mid-batch, after which every assertion that reached
the upstream is `counter_not_increasing` on a restarted gateway over the same store."""

from __future__ import annotations

import threading
import time

import pytest

import upstreams as U
from harness import free_port
from test_app_attest import Device, aa_config, ca_dir, outcome, register
from test_limited_use import state_for
from test_operations import admin_get, metric


def keepalive_post(target: str, headers: dict, body: bytes = b"") -> bytes:
    lines = [f"POST {target} HTTP/1.1", "Host: gw.test", f"Content-Length: {len(body)}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def registered(dev_bin, ca, tmp, port: int, n: int, count: int, prefix: str) -> list[list[dict]]:
    """`n` devices registered on the gateway at `port`, each with `count` assertions (counters 1…count) over
    POST <prefix>/<device>."""
    out = []
    for d in range(n):
        device = Device(dev_bin, ca, tmp / f"dev{d}")
        register(port, device)
        out.append(device.assertions("POST", f"{prefix}/{d}", b"", count=count))
    return out


def start(client, n: int) -> list[threading.Thread]:
    threads = [threading.Thread(target=client, args=(d,), daemon=True) for d in range(n)]
    for t in threads:
        t.start()
    return threads


def join(threads: list[threading.Thread], timeout: float) -> None:
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a client thread hung"


@pytest.fixture(scope="module")
def redis(module_factory):
    return module_factory.redis()


@pytest.mark.timeout_s(120)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_devices_at_once_each_assertion_passes_once_and_the_counters_are_batched(factory, dev_bin, tmp_path, redis,
                                                                               backend):
    up = factory.upstream(name="aa-batch")
    ca, root = ca_dir(dev_bin, tmp_path)
    aport = free_port()
    gw = factory.gateway(aa_config(free_port(), up.url, root, state_for(backend, tmp_path, redis, prefix="aab:"))
                         + f"admin:\n  address: 127.0.0.1:{aport}\n")
    n, count = 6, 25
    devs = registered(dev_bin, ca, tmp_path, gw.port, n, count, "/api/b")
    results: dict = {}
    go = threading.Barrier(n, timeout=15)

    def client(d: int) -> None:
        conn = U.Conn(gw.port, timeout=10)
        out = []
        go.wait()
        try:
            for h in devs[d]:
                for _ in range(2):   # the assertion, then its replay
                    r = conn.request(keepalive_post(f"/api/b/{d}", h))
                    out.append(outcome(r) if r is not None else "closed")
        finally:
            conn.sock.close()
            results[d] = out

    join(start(client, n), 60)
    expected = [(200, None), (401, "counter_not_increasing")] * count
    for d in range(n):
        assert results.get(d) == expected, (d, results.get(d))
    _, m = admin_get(aport, "/metrics")
    batches = metric(m, "attest_gateway_state_operation_seconds_count", operation="counter_batch")
    # Every compare-and-set went through the batch (none through the one-at-a-time store call); how many per batch
    # depends on timing, so only the bounds are certain.
    assert 1 <= batches <= 2 * n * count, m
    assert metric(m, "attest_gateway_state_operation_seconds_count", operation="appattest_counter") == 0


@pytest.mark.timeout_s(120)
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_sigkill_mid_batch_every_forwarded_assertion_stays_spent(factory, dev_bin, tmp_path, redis, backend):
    """6 keep-alive devices send their assertions as fast as they can; the gateway is SIGKILLed after 100 answers,
    while compare-and-sets are in flight. Each assertion the upstream received was forwarded after its counter was
    committed: on a restarted gateway over the same store, every one is counter_not_increasing."""
    up = factory.upstream(name="aa-kill")
    ca, root = ca_dir(dev_bin, tmp_path)
    state = state_for(backend, tmp_path, redis, prefix="aak:")
    port = free_port()
    cfg = aa_config(port, up.url, root, state)
    gw = factory.gateway(cfg)
    n, count = 6, 60
    devs = registered(dev_bin, ca, tmp_path, gw.port, n, count, "/api/k")
    oks: list = []
    broken: list = []
    lock = threading.Lock()
    go = threading.Barrier(n + 1, timeout=15)

    def client(d: int) -> None:
        conn = U.Conn(gw.port, timeout=10)
        go.wait()
        try:
            for i, h in enumerate(devs[d]):
                r = conn.request(keepalive_post(f"/api/k/{d}", {**h, "X-Seq": f"{d}.{i}"}))
                if r is None:
                    raise ConnectionError("closed")
                assert r.status == 200, (r.status, r.body[:200])
                with lock:
                    oks.append((d, i))
        except (OSError, ConnectionError) as e:
            with lock:
                broken.append(f"device {d}: {type(e).__name__}")
        finally:
            conn.sock.close()

    threads = start(client, n)
    go.wait()
    deadline = time.monotonic() + 30
    while len(oks) < 100 and time.monotonic() < deadline:
        time.sleep(0.002)
    gw.kill()
    join(threads, 20)
    assert len(oks) >= 100 and len(broken) == n, \
        f"the kill did not land under load: {len(oks)} answered, {len(broken)} of {n} devices cut off"
    with up.lock:
        seqs = [q.one("x-seq") for q in up.requests if q.target.startswith("/api/k/")]
    forwarded = {(int(s.split(".")[0]), int(s.split(".")[1])) for s in seqs}
    assert set(oks) <= forwarded, "a device got a 200 the upstream never saw"
    gw2 = factory.gateway(cfg)
    again = {}
    for d, i in sorted(forwarded):
        r = U.one_shot(gw2.port, keepalive_post(f"/api/k/{d}", {**devs[d][i], "Connection": "close"}), timeout=20)
        again[(d, i)] = outcome(r)
    accepted = [k for k, res in again.items() if res != (401, "counter_not_increasing")]
    assert not accepted, f"{backend}: {len(accepted)} of {len(forwarded)} forwarded assertions not refused after the " \
                         f"SIGKILL: {[(k, again[k]) for k in accepted[:5]]}"
