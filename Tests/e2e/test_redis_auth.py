"""Redis ACL users, passwords kept out of gateway.yml, and saying what went wrong: a real `redis-server` with an ACL
user; the password from `state.password_file` or from the environment (`${NAME}` in `state.url`); a wrong password
logged once with its cause, named by `/readyz` and counted by kind in `/metrics` — not a silent 503."""

from __future__ import annotations

import json
import re
import secrets
import time
from types import SimpleNamespace

import pytest

import upstreams as U
from harness import (app_check_verifier, free_port, gateway_config, http_get, log_records, run_cli,
                     wait_gateway_accepts)

H = "X-Firebase-AppCheck"
USER, RIGHT = "gw-test", "right-pass-" + secrets.token_hex(4)


@pytest.fixture(scope="module")
def env(module_factory, redis_server):
    reply = redis_server.command("ACL", "SETUSER", USER, "on", ">" + RIGHT, "~*", "+@all")
    assert reply == "OK", reply
    return SimpleNamespace(iss=module_factory.dev_issuer(), redis=redis_server)


def start(start_gateway, start_upstream, env, tmp_path, state: dict, wait: bool = True):
    up = start_upstream()
    port, admin = free_port(), free_port()
    routes = [{"name": "ready", "match": {"path_prefix": "/ready"}, "upstream": "up", "verify": ["fb"]},
              {"name": "lu", "match": {"path_prefix": "/lu"}, "upstream": "up", "verify": ["fb"], "limited_use": True}]
    cfg = gateway_config(port, {"up": up.url}, routes=routes, state={"key_prefix": f"t{secrets.token_hex(4)}:",
                                                                     "timeout": "250ms", **state},
                         verifiers={"fb": app_check_verifier(env.iss.jwks_url)})
    gw = start_gateway(cfg + f"admin:\n  address: 127.0.0.1:{admin}\n")
    gw.admin = admin
    if wait:
        wait_gateway_accepts(gw.port, "/ready", H, env.iss.token())
    return gw


def status(gw, path: str, token: str | None) -> tuple:
    r = U.one_shot(gw.port, http_get(path, [(H, token)] if token else []), timeout=10)
    assert r is not None
    return (r.status, None if r.status == 200 else json.loads(r.body).get("reason"))


def admin_get(gw, path: str) -> tuple[int, bytes]:
    r = U.one_shot(gw.admin, http_get(path, [], host="127.0.0.1"), timeout=10)
    assert r is not None
    return r.status, r.body


def log_lines(gw, message: str) -> list[dict]:
    return log_records(gw.stderr_path, message)


def test_a_wrong_password_is_logged_once_with_its_cause_and_named_by_readyz(env, start_gateway, start_upstream, tmp_path):
    pw = tmp_path / "redis-password"
    pw.write_text("wrong-password\n")
    gw = start(start_gateway, start_upstream, env, tmp_path, {"backend": "redis", "url": env.redis.url, "username": USER,
                                                              "password_file": str(pw)})
    for _ in range(5):
        assert status(gw, "/lu/x", env.iss.token(limited_use=True)) == (503, "state_unavailable")
        time.sleep(0.25)                                    # past the reconnect backoff: each try fails again
    lines = log_lines(gw, "state store unavailable")
    assert len(lines) == 1, gw.stderr_path.read_text()[-3000:]       # once per change of state, not per request
    assert lines[0]["cause"] == "wrongpass" and "WRONGPASS" in lines[0]["error"], lines[0]
    code, body = admin_get(gw, "/readyz")
    doc = json.loads(body)
    assert code == 503 and doc["waiting_for"] == ["state"] and doc["state_error"]["cause"] == "wrongpass", doc
    _, metrics = admin_get(gw, "/metrics")
    assert re.search(rb'attest_gateway_state_errors_total\{operation="[a-z_]+",kind="wrongpass"\} [1-9]', metrics), metrics
    text = gw.stderr_path.read_text() + body.decode() + metrics.decode()
    assert "wrong-password" not in text                              # the password is never printed


def test_the_password_from_a_file_with_an_acl_user(env, start_gateway, start_upstream, tmp_path):
    pw = tmp_path / "redis-password"
    pw.write_text(RIGHT + "\n")                                      # one trailing newline stripped
    gw = start(start_gateway, start_upstream, env, tmp_path, {"backend": "redis", "url": env.redis.url, "username": USER,
                                                              "password_file": str(pw)})
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/a", t) == (200, None)
    assert status(gw, "/lu/a", t) == (401, "token_replayed")
    assert admin_get(gw, "/readyz")[0] == 200
    assert log_lines(gw, "state store unavailable") == []
    assert RIGHT not in gw.stderr_path.read_text()


def test_the_password_from_the_environment(env, start_gateway, start_upstream, tmp_path, monkeypatch):
    monkeypatch.setenv("GW_TEST_REDIS_PASSWORD", RIGHT)
    url = f"redis://{USER}:${{GW_TEST_REDIS_PASSWORD}}@127.0.0.1:{env.redis.port}/0"
    gw = start(start_gateway, start_upstream, env, tmp_path, {"backend": "redis", "url": url})
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/b", t) == (200, None)
    assert status(gw, "/lu/b", t) == (401, "token_replayed")
    assert RIGHT not in gw.stderr_path.read_text()


def test_recovery_is_logged_when_the_password_is_fixed(env, start_gateway, start_upstream, tmp_path):
    """The ACL user's password changes under a running gateway (rotation done in the wrong order): failures with
    cause wrongpass, then, once Redis takes the gateway's password again, one 'connected' line and 200s."""
    user, old = "gw-rotate", "old-" + secrets.token_hex(4)
    assert env.redis.command("ACL", "SETUSER", user, "on", ">" + old, "~*", "+@all") == "OK"
    pw = tmp_path / "pw"
    pw.write_text(old)
    gw = start(start_gateway, start_upstream, env, tmp_path, {"backend": "redis", "url": env.redis.url, "username": user,
                                                              "password_file": str(pw)})
    assert status(gw, "/lu/c", env.iss.token(limited_use=True)) == (200, None)
    assert env.redis.command("ACL", "SETUSER", user, "resetpass", ">new-pass") == "OK"
    assert env.redis.command("CLIENT", "KILL", "USER", user) >= 1            # its connection must authenticate again
    # The killed connection is lost first; reconnecting then fails on the password: two changes, two lines.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [l["cause"] for l in log_lines(gw, "state store unavailable")] != ["connection_lost", "wrongpass"]:
        assert status(gw, "/lu/d", env.iss.token(limited_use=True)) == (503, "state_unavailable")
        time.sleep(0.15)
    assert [l["cause"] for l in log_lines(gw, "state store unavailable")] == ["connection_lost", "wrongpass"]
    assert env.redis.command("ACL", "SETUSER", user, ">" + old) == "OK"       # the old one accepted again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and status(gw, "/lu/e", t := env.iss.token(limited_use=True)) != (200, None):
        time.sleep(0.2)
    assert status(gw, "/lu/e", t) == (401, "token_replayed")
    assert len(log_lines(gw, "state store connected")) == 1


def test_check_config_reads_the_password_file(gateway_bin, tmp_path):
    for name, content, ok in (("missing", None, False), ("empty", "\n", False), ("good", "pw\n", True)):
        pw = tmp_path / f"{name}.pw"
        if content is not None:
            pw.write_text(content)
        cfg = tmp_path / f"{name}.yml"
        cfg.write_text(gateway_config(18097, {"up": "http://127.0.0.1:9"}, state={
            "backend": "redis", "url": "redis://127.0.0.1:6399/0", "password_file": str(pw)}))
        p = run_cli(gateway_bin, "check-config", "--config", str(cfg))
        if ok:
            assert (p.returncode, p.stdout.decode().strip()) == (0, "ok"), p.stderr
        else:
            assert p.returncode == 1 and "state.password_file" in p.stderr.decode(), (name, p.stderr)
    # A password in url and password_file: one of them would be ignored, so the file is refused.
    cfg = tmp_path / "both.yml"
    cfg.write_text(gateway_config(18097, {"up": "http://127.0.0.1:9"}, state={
        "backend": "redis", "url": "redis://:secret@127.0.0.1:6399/0", "password_file": str(tmp_path / "good.pw")}))
    p = run_cli(gateway_bin, "check-config", "--config", str(cfg))
    assert p.returncode == 1 and "state.password_file" in p.stderr.decode() and "secret" not in p.stderr.decode()
