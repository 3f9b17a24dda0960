"""`${NAME}` / `${NAME:-default}` in gateway.yml values, end to end: `serve` takes its listener port, upstream and a
route setting from the environment; `check-config` names an unset variable at its line; a value that came from the
environment is never printed, even when it is the invalid one."""

from __future__ import annotations

import os
import signal
import subprocess

import upstreams as U
from harness import free_port, http_get, run_cli, wait_listening

CONFIG = """version: 1
listeners:
  - address: "127.0.0.1:${GW_TEST_PORT}"
upstreams:
  api: {url: "http://127.0.0.1:${GW_TEST_UP_PORT}${GW_TEST_BASE:-/from-default}"}
routes:
  - match: {path_prefix: /}
    upstream: api
    max_body_bytes: ${GW_TEST_MAX_BODY}
"""


def env(**extra) -> dict:
    e = {k: v for k, v in os.environ.items() if not k.startswith("GW_TEST_")}
    e.update(extra)
    return e


def check_config(gateway_bin, path, environment) -> subprocess.CompletedProcess:
    return subprocess.run([gateway_bin, "check-config", "--config", str(path)], capture_output=True, timeout=20,
                          stdin=subprocess.DEVNULL, env=environment)


def test_serve_reads_the_port_the_upstream_and_a_limit_from_the_environment(gateway_bin, start_upstream, tmp_path):
    up = start_upstream()
    port = free_port()
    cfg = tmp_path / "gateway.yml"
    cfg.write_text(CONFIG)
    e = env(GW_TEST_PORT=str(port), GW_TEST_UP_PORT=str(up.port), GW_TEST_MAX_BODY="16")
    proc = subprocess.Popen([gateway_bin, "serve", "--config", str(cfg), "--workers", "1"], env=e, cwd=str(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "err.log", "wb"), stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_listening(port, proc, 10.0, "attest-gateway serve")
        r = U.one_shot(port, http_get("/x", []), timeout=10)
        assert r is not None and r.status == 200
        with up.lock:
            assert up.requests[-1].target == "/from-default/x"       # the ${GW_TEST_BASE:-…} default
        big = b"POST /y HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 17\r\nConnection: close\r\n\r\n" + b"x" * 17
        r = U.one_shot(port, big, timeout=10)
        assert r is not None and r.status == 413                       # max_body_bytes: ${GW_TEST_MAX_BODY} = 16
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def test_check_config_names_an_unset_variable_at_its_line(gateway_bin, tmp_path):
    cfg = tmp_path / "gateway.yml"
    cfg.write_text(CONFIG)
    p = check_config(gateway_bin, cfg, env(GW_TEST_PORT="8080", GW_TEST_MAX_BODY="1MiB"))
    assert p.returncode == 1
    assert p.stderr.decode().strip() == (f"{cfg}:5:14: upstreams.api.url: environment variable GW_TEST_UP_PORT is not set "
                                         "(use ${GW_TEST_UP_PORT:-default} for a default)")
    p = check_config(gateway_bin, cfg, env(GW_TEST_PORT="8080", GW_TEST_UP_PORT="3000", GW_TEST_MAX_BODY="1MiB"))
    assert (p.returncode, p.stdout.decode().strip()) == (0, "ok"), p.stderr


def test_an_expanded_value_is_never_printed(gateway_bin, tmp_path):
    cfg = tmp_path / "gateway.yml"
    cfg.write_text(CONFIG)
    secret = "hunter2-very-secret"
    e = env(GW_TEST_PORT="8080", GW_TEST_UP_PORT="3000", GW_TEST_MAX_BODY=secret)
    p = check_config(gateway_bin, cfg, e)
    err = p.stderr.decode()
    assert p.returncode == 1 and "routes[0].max_body_bytes" in err and "${GW_TEST_MAX_BODY}" in err, err
    assert secret not in err and secret not in p.stdout.decode()
    # serve refuses to start with the same file, without printing it either.
    p = subprocess.run([gateway_bin, "serve", "--config", str(cfg)], capture_output=True, timeout=20, env=e,
                       stdin=subprocess.DEVNULL)
    assert p.returncode != 0 and secret not in p.stderr.decode() + p.stdout.decode()
