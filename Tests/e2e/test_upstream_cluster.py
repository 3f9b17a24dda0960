"""Upstream clusters (CONFIG.md Additions `endpoints`, `balance`, `outlier`, `health_check`, `dns_refresh`): two
endpoints share the load; one killed is ejected and traffic continues on the other without a failed request (a
refused connect goes to the next endpoint: nothing was sent); brought back it is used again after the ejection;
an endpoint whose health check fails takes no requests; a hostname whose /etc/hosts entry changes is followed.

Real parts: the gateway binary, Python upstreams on 127.0.0.x, /etc/hosts (the tests run as root; the entry they
add is removed again)."""

from __future__ import annotations

import collections
import json
import os
import time
import urllib.request

import pytest

import upstreams as U
from harness import free_port, gateway_config

pytestmark = pytest.mark.timeout_s(90)


def served_by(port: int, n: int, path: str = "/x") -> collections.Counter:
    """Who answered each of `n` requests (all must be 200)."""
    c = collections.Counter()
    for _ in range(n):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            assert r.status == 200
            c[json.loads(r.read())["upstream"]] += 1
    return c


def metrics(admin: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
        return r.read().decode()


def start(factory, upstream: dict, admin: int | None = None) -> int:
    port = free_port()
    text = gateway_config(port, {"api": upstream})
    if admin:
        text = text.replace("listeners:", f"admin:\n  address: 127.0.0.1:{admin}\nlisteners:", 1)
    factory.gateway(text)
    return port


def test_two_endpoints_share_the_load_and_a_dead_one_is_ejected_then_used_again(factory):
    a, b = factory.upstream(name="a"), factory.upstream(name="b")
    admin = free_port()
    port = start(factory, {"endpoints": [a.url, b.url], "outlier": {"consecutive_failures": 2, "ejection": "2s"}}, admin)
    shares = served_by(port, 20)
    assert shares["a"] >= 5 and shares["b"] >= 5, shares

    b_port = b.port
    b.close()
    shares = served_by(port, 20)   # every request still answered: refused connects go to a
    assert shares == {"a": 20}, shares
    m = metrics(admin)
    assert f'attest_gateway_upstream_endpoint_healthy{{upstream="api",endpoint="127.0.0.1:{b_port}"}} 0' in m, m
    assert f'attest_gateway_upstream_endpoint_ejections_total{{upstream="api",endpoint="127.0.0.1:{b_port}"}} 1' in m

    back = U.Upstream(name="b", port=b_port)
    factory.items.append(back)
    time.sleep(2.3)   # the ejection ends
    shares = served_by(port, 20)
    assert shares["b"] >= 5, f"the endpoint that came back is not used again: {shares}"
    assert f'attest_gateway_upstream_endpoint_healthy{{upstream="api",endpoint="127.0.0.1:{b_port}"}} 1' in metrics(admin)


def test_least_request_prefers_the_idle_endpoint(factory):
    slow, quick = factory.upstream(("slow", 1.5), name="slow"), factory.upstream(name="quick")
    port = start(factory, {"endpoints": [slow.url, quick.url], "balance": "least_request"})
    import threading
    hold = threading.Thread(target=lambda: served_by(port, 1))
    hold.start()
    time.sleep(0.3)   # a tie goes to the first endpoint: one request is outstanding on the slow one
    assert len(slow.requests) == 1
    shares = served_by(port, 5)
    hold.join()
    assert shares == {"quick": 5}, f"least_request sent requests to the busy endpoint: {shares}"


def _health_aware(state: dict):
    def handler(req, ctx):
        if req.target.startswith("/healthz"):
            code = state["code"]
            ctx.send(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % code)
            return
        U.b_echo(req, ctx)
    return handler


def test_an_endpoint_failing_its_health_check_takes_no_requests(factory):
    sick_state = {"code": 200}
    well = factory.upstream(name="well")
    sick = factory.upstream(_health_aware(sick_state), name="sick")
    port = start(factory, {"endpoints": [well.url, sick.url],
                           "health_check": {"path": "/healthz", "interval": "200ms", "timeout": "500ms",
                                            "unhealthy_threshold": 2, "healthy_threshold": 1}})
    assert served_by(port, 10)["sick"] >= 3
    sick_state["code"] = 503
    time.sleep(1.5)
    assert served_by(port, 10) == {"well": 10}
    sick_state["code"] = 200
    time.sleep(1.0)
    assert served_by(port, 10)["sick"] >= 3


HOSTS = "/etc/hosts"
NAME = "attest-cluster-test.internal"


@pytest.fixture
def hosts_entry():
    if os.geteuid() != 0 or not os.access(HOSTS, os.W_OK):
        pytest.skip("needs to write /etc/hosts (the CI runs as root)")
    original = open(HOSTS).read()

    def point_to(address: str):
        lines = [l for l in original.splitlines() if NAME not in l]
        with open(HOSTS, "w") as f:
            f.write("\n".join(lines) + f"\n{address} {NAME}\n")

    yield point_to
    with open(HOSTS, "w") as f:
        f.write(original)


def test_a_hostname_endpoint_follows_its_address(factory, hosts_entry):
    p = free_port()
    first = factory.upstream(name="first", host="127.0.0.2", port=p)
    second = factory.upstream(name="second", host="127.0.0.3", port=p)
    hosts_entry("127.0.0.2")
    port = start(factory, {"url": f"http://{NAME}:{p}", "dns_refresh": "300ms"})
    assert served_by(port, 5) == {"first": 5}
    hosts_entry("127.0.0.3")
    first.close()   # connections pooled to the old address must not keep it alive
    deadline = time.monotonic() + 5
    while True:
        try:
            if served_by(port, 3) == {"second": 3}:
                break
        except Exception:
            pass
        assert time.monotonic() < deadline, "the new address was not followed"
        time.sleep(0.3)
    assert served_by(port, 5) == {"second": 5}
