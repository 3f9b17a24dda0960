"""Fixtures for the attest-gateway end-to-end suite.

The binary comes from $GATEWAY_BIN (default: <repo>/.build/release/attest-gateway), the development tools (dev echo,
dev issuer, simulated App Attest device) from $GATEWAY_DEV_BIN (default: attest-gateway-dev beside GATEWAY_BIN). Every
gateway and dev-echo process is started in its own process group and killed (by that group id) in teardown, even when
a test fails.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import upstreams as U
from harness import GATEWAY_BIN, GATEWAY_DEV_BIN, REDIS_SERVER_BIN, DevEcho, DevIssuer, Gateway, RedisServer, free_port

DEFAULT_TEST_TIMEOUT = 120


# ----------------------------------------------------------------------------------------------------------------
# Per-test watchdog (pytest-timeout is not available): SIGALRM raises in the main thread.


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout_s(seconds): per-test watchdog (default 120 s)")


class WatchdogTimeout(Exception):
    pass


@pytest.fixture(autouse=True)
def _watchdog(request):
    marker = request.node.get_closest_marker("timeout_s")
    seconds = int(marker.args[0]) if marker else DEFAULT_TEST_TIMEOUT

    def fire(signum, frame):
        raise WatchdogTimeout(f"test exceeded its {seconds}s watchdog")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ----------------------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def gateway_bin() -> str:
    if not (os.path.isfile(GATEWAY_BIN) and os.access(GATEWAY_BIN, os.X_OK)):
        pytest.fail(f"gateway binary not found at {GATEWAY_BIN} (set GATEWAY_BIN)", pytrace=False)
    return GATEWAY_BIN


def _dev_bin() -> str:
    if not (os.path.isfile(GATEWAY_DEV_BIN) and os.access(GATEWAY_DEV_BIN, os.X_OK)):
        pytest.fail(f"development tools binary not found at {GATEWAY_DEV_BIN} (set GATEWAY_DEV_BIN)", pytrace=False)
    return GATEWAY_DEV_BIN


@pytest.fixture(scope="session")
def dev_bin() -> str:
    """The development tools' executable (attest-gateway-dev), never the production binary."""
    return _dev_bin()


@pytest.fixture(name="free_port")
def free_port_fixture():
    return free_port


class _Factory:
    """Starts gateways / upstreams / dev echo servers and tears all of them down."""

    def __init__(self, binary: str, tmp: Path):
        self.binary = binary
        self.tmp = tmp
        self.items = []
        self.n = 0

    def gateway(self, config_text: str, workers: int | None = None, extra_args: tuple = ()) -> Gateway:
        self.n += 1
        g = Gateway(self.binary, config_text, self.tmp / f"gw{self.n}", workers, extra_args)
        self.items.append(g)
        return g

    def upstream(self, behaviour="echo", name: str = "up", port: int = 0, host: str = "127.0.0.1") -> U.Upstream:
        u = U.Upstream(behaviour, name, port, host)
        self.items.append(u)
        return u

    def dev_echo(self) -> DevEcho:
        self.n += 1
        d = DevEcho(_dev_bin(), self.tmp / f"echo{self.n}")
        self.items.append(d)
        return d

    def dev_issuer(self, **kw) -> DevIssuer:
        self.n += 1
        d = DevIssuer(_dev_bin(), self.tmp / f"issuer{self.n}", **kw)
        self.items.append(d)
        return d

    def redis(self, port: int | None = None, persistent: bool = False) -> RedisServer:
        if not REDIS_SERVER_BIN:
            pytest.fail("redis-server not found on PATH (CI installs it; or set REDIS_SERVER)", pytrace=False)
        self.n += 1
        r = RedisServer(self.tmp / f"redis{self.n}", port, persistent=persistent)
        self.items.append(r)
        return r

    def teardown(self) -> None:
        for item in self.items:
            if isinstance(item, U.Upstream) and item.errors:
                print(f"upstream {item.name} saw problems: {item.errors[:5]}")
        for item in reversed(self.items):
            try:
                item.kill() if hasattr(item, "kill") else item.close()
            except Exception:
                pass


@pytest.fixture
def factory(gateway_bin, tmp_path):
    f = _Factory(gateway_bin, tmp_path)
    yield f
    f.teardown()


@pytest.fixture(scope="module")
def module_factory(gateway_bin, tmp_path_factory):
    f = _Factory(gateway_bin, tmp_path_factory.mktemp("module"))
    yield f
    f.teardown()


@pytest.fixture
def start_gateway(factory):
    """start_gateway(config_text, workers=None) -> Gateway(port, proc, stdout_path, log_lines(), stop(sig))."""
    return factory.gateway


@pytest.fixture
def start_upstream(factory):
    """start_upstream(behaviour="echo", name="up", port=0) -> upstreams.Upstream."""
    return factory.upstream


@pytest.fixture
def start_dev_echo(factory):
    return factory.dev_echo


@pytest.fixture
def start_dev_issuer(factory):
    """start_dev_issuer(project_number=None, project_id=None, app_id=None) -> harness.DevIssuer."""
    return factory.dev_issuer




@pytest.fixture
def start_redis(factory):
    """start_redis(port=None, persistent=False) -> harness.RedisServer (fails the test when redis-server is not
    installed); persistent: an append-only file fsynced on every write, kept across stop() / start()."""
    return factory.redis


@pytest.fixture(scope="module")
def redis_server(module_factory) -> RedisServer:
    """One redis-server per test module (killed in the module's teardown)."""
    return module_factory.redis()
