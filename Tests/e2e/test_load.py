"""Acceptance: 10,000 requests over 64 keep-alive connections (gateway --workers 2, dev echo upstream), none lost."""

import json
import signal
import threading
import time

import pytest

import upstreams as U
from harness import free_port, gateway_config

TOTAL = 10_000
CONNECTIONS = 64


@pytest.mark.timeout_s(180)
def test_10k_requests_64_keepalive_connections(start_gateway, start_dev_echo):
    echo = start_dev_echo()
    gw = start_gateway(gateway_config(free_port(), {"echo": {"url": echo.url, "max_idle_connections": 64}}), workers=2)
    per = [TOTAL // CONNECTIONS + (1 if i < TOTAL % CONNECTIONS else 0) for i in range(CONNECTIONS)]
    assert sum(per) == TOTAL and max(per) == 157
    ok = [0] * CONNECTIONS
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 150

    def worker(idx: int) -> None:
        try:
            with U.Conn(gw.port, timeout=20) as c:
                for i in range(per[idx]):
                    if time.monotonic() > deadline:
                        raise TimeoutError("load deadline passed")
                    target = f"/load/{idx}/{i}?q={i}"
                    if i % 10 == 9:
                        body = b"%d-%d" % (idx, i)
                        c.send(f"POST {target} HTTP/1.1\r\nHost: load\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                        r = c.response("POST")
                    else:
                        c.send(f"GET {target} HTTP/1.1\r\nHost: load\r\n\r\n".encode())
                        r = c.response("GET")
                    if r is None:
                        raise EOFError(f"connection closed before response {i}")
                    if r.status != 200:
                        raise AssertionError(f"status {r.status} for {target}: {r.body[:200]!r}")
                    doc = json.loads(r.body)
                    if doc["target"] != target:
                        raise AssertionError(f"response for {doc['target']} to request {target}")
                    ok[idx] += 1
        except Exception as e:  # recorded, asserted below
            with lock:
                errors.append(f"conn {idx} after {ok[idx]} ok: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(CONNECTIONS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.monotonic() + 5))
    elapsed = time.monotonic() - t0
    assert not any(t.is_alive() for t in threads), "load threads still running"
    assert not errors, f"{len(errors)} connections failed (first: {errors[:3]})"
    assert sum(ok) == TOTAL, f"{sum(ok)} of {TOTAL} answered"
    print(f"10k requests in {elapsed:.1f}s ({TOTAL / elapsed:.0f} req/s)")
    # graceful stop with two workers
    assert gw.stop(signal.SIGTERM, timeout=15) == 0
