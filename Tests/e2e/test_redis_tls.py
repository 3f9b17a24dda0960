"""Redis over TLS (`rediss://`): Debian's redis-server with `--tls-port` and a test CA made at test time. The gateway
carries hiredis's bytes over its own OpenSSL sessions: limited use works exactly once over TLS with an ACL user; a
server certificate from another CA, or for another name, is refused and logged with its cause, and `/readyz` says
why; a server that asks for a client certificate gets the configured one; `tls_verify: false` is an opt-out that is
logged; a plain URL to the TLS port, or rediss:// to a plain port, fails with a cause, never silently."""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from apple_fakes import make_tls
from harness import RedisServer, free_port, gateway_config, log_records, run_cli
from redis_gateway import failures, readyz, start_state_gateway, status
from redis_gateway import wait_failure as wait_logged_failure
USER, PASSWORD = "gw-tls", "tls-pass-" + secrets.token_hex(4)


def client_certificate(pki: Path, name: str = "client") -> tuple[Path, Path]:
    """A client certificate (clientAuth) signed by `pki`'s test CA."""
    key, csr, cert, ext = (pki / f"{name}{s}" for s in (".key", ".csr", ".pem", ".ext"))
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
                    "-out", str(csr), "-subj", "/CN=attest-gateway"], check=True, capture_output=True)
    ext.write_text("extendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.pem"), "-CAkey", str(pki / "ca.key"),
                    "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext)], check=True, capture_output=True)
    return cert, key


def tls_redis(module_factory, tmp: Path, pki, auth_clients: str) -> RedisServer:
    """redis-server with a plain port (the test's own commands) and a TLS port (`.tls_port`, the gateway's)."""
    tls_port = free_port()
    r = RedisServer(tmp / f"redis-{auth_clients}", extra_args=(
        "--tls-port", str(tls_port), "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.key),
        "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", auth_clients))
    module_factory.items.append(r)
    r.tls_port = tls_port
    assert r.command("ACL", "SETUSER", USER, "on", ">" + PASSWORD, "~*", "+@all") == "OK"
    return r


@pytest.fixture(scope="module")
def env(module_factory, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("redis-tls")
    pki, other = make_tls(tmp / "pki"), make_tls(tmp / "other")
    password_file = tmp / "redis-password"
    password_file.write_text(PASSWORD + "\n")
    return SimpleNamespace(iss=module_factory.dev_issuer(), pki=pki, other=other, password_file=password_file,
                           client=client_certificate(tmp / "pki"), redis=tls_redis(module_factory, tmp, pki, "no"),
                           mtls=tls_redis(module_factory, tmp, pki, "yes"))


def start(start_gateway, start_upstream, env, state: dict, wait: bool = True):
    # timeout 2s: a handshake on a busy machine (a debug build, the system store read) must not time out instead.
    return start_state_gateway(start_gateway, start_upstream, env.iss, {
        "backend": "redis", "key_prefix": f"t{secrets.token_hex(4)}:", "timeout": "2s", "username": USER,
        "password_file": str(env.password_file), **state}, wait=wait)


def wait_failure(gw, env, once: bool = True) -> dict:
    return wait_logged_failure(gw, env.iss, once=once)


def test_limited_use_over_tls_with_an_acl_user_is_exactly_once(env, start_gateway, start_upstream):
    url = f"rediss://127.0.0.1:{env.redis.tls_port}/0"
    gw = start(start_gateway, start_upstream, env, {"url": url, "ca_file": str(env.pki.ca)})
    for i in range(5):
        t = env.iss.token(limited_use=True)
        assert status(gw, f"/lu/{i}", t) == (200, None)
        assert status(gw, f"/lu/{i}", t) == (401, "token_replayed")
    assert readyz(gw)[0] == 200 and failures(gw) == []
    # The consumed tokens are in this Redis: the gateway spoke TLS to the TLS port (plain bytes there are dropped).
    assert len(env.redis.command("KEYS", "t*jti:*")) >= 5
    assert PASSWORD not in gw.stderr_path.read_text()


def test_the_host_name_is_checked_against_the_certificate(env, start_gateway, start_upstream):
    """`localhost` is in the certificate's names: TLS works by name too; a `tls_server_name` it does not carry is
    refused."""
    ok = start(start_gateway, start_upstream, env, {"url": f"rediss://localhost:{env.redis.tls_port}/0", "ca_file": str(env.pki.ca)})
    t = env.iss.token(limited_use=True)
    assert status(ok, "/lu/n", t) == (200, None) and status(ok, "/lu/n", t) == (401, "token_replayed")
    bad = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.tls_port}/0",
                                                     "ca_file": str(env.pki.ca), "tls_server_name": "redis.elsewhere"},
                wait=False)
    line = wait_failure(bad, env)
    assert line["cause"] == "certificate" and "hostname mismatch" in line["error"], line


def test_an_address_is_checked_against_the_certificates_ip_addresses(env, start_gateway, start_upstream):
    """The certificate carries IP 127.0.0.1 only: 127.0.0.2 (also this machine) is refused — an address literal is
    checked as an address, not skipped for want of a DNS name."""
    gw = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.tls_port}/0",
                                                    "ca_file": str(env.pki.ca), "tls_server_name": "127.0.0.2"}, wait=False)
    line = wait_failure(gw, env)
    assert line["cause"] == "certificate" and "IP address mismatch" in line["error"], line


def test_a_certificate_from_another_ca_is_refused_logged_and_named_by_readyz(env, start_gateway, start_upstream):
    gw = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.tls_port}/0",
                                                    "ca_file": str(env.other.ca)}, wait=False)
    line = wait_failure(gw, env)
    assert line["cause"] == "certificate" and "server certificate refused" in line["error"], line
    code, doc = readyz(gw)
    assert code == 503 and doc["waiting_for"] == ["state"] and doc["state_error"]["cause"] == "certificate", doc


def test_the_system_store_does_not_trust_a_test_ca(env, start_gateway, start_upstream):
    gw = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.tls_port}/0"}, wait=False)
    assert wait_failure(gw, env)["cause"] == "certificate"


def test_tls_verify_false_is_an_opt_out_that_is_logged(env, start_gateway, start_upstream):
    """Also: a failure that is not the certificate's is not reported as one (OpenSSL keeps a verify result even when
    nothing is checked)."""
    without = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.mtls.tls_port}/0",
                                                         "tls_verify": False}, wait=False)
    assert wait_failure(without, env)["cause"] == "tls"
    gw = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.tls_port}/0",
                                                    "ca_file": str(env.other.ca), "tls_verify": False})
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/v", t) == (200, None) and status(gw, "/lu/v", t) == (401, "token_replayed")
    warnings = log_records(gw.stderr_path, "state store TLS certificate checks are off (state.tls_verify: false): "
                                           "anyone on the path can pose as Redis")
    assert len(warnings) == 1 and warnings[0]["level"] == "warn", gw.stderr_path.read_text()[-2000:]


def test_a_server_that_asks_for_a_client_certificate_gets_the_configured_one(env, start_gateway, start_upstream):
    url = f"rediss://127.0.0.1:{env.mtls.tls_port}/0"
    without = start(start_gateway, start_upstream, env, {"url": url, "ca_file": str(env.pki.ca)}, wait=False)
    # TLS 1.3: the server refuses the missing certificate after the handshake, with an alert — or, when the gateway's
    # AUTH is already on its way, a reset that loses the alert. Both are told as tls, so one steady cause, logged once.
    line = wait_failure(without, env)
    assert line["cause"] == "tls" and ("certificate required" in line["error"] or "client certificate" in line["error"]), line
    cert, key = env.client
    gw = start(start_gateway, start_upstream, env, {"url": url, "ca_file": str(env.pki.ca), "client_certificate": str(cert),
                                                    "client_key": str(key)})
    t = env.iss.token(limited_use=True)
    assert status(gw, "/lu/m", t) == (200, None) and status(gw, "/lu/m", t) == (401, "token_replayed")


def test_a_scheme_that_does_not_match_the_port_fails_with_a_cause(env, start_gateway, start_upstream):
    tls_to_plain = start(start_gateway, start_upstream, env, {"url": f"rediss://127.0.0.1:{env.redis.port}/0",
                                                              "ca_file": str(env.pki.ca), "timeout": "300ms"}, wait=False)
    # Redis reads the ClientHello as the start of an inline command and waits for its end: the handshake times out.
    line = wait_failure(tls_to_plain, env)
    assert line["cause"] == "timeout" and "TLS handshake" in line["error"], line
    plain_to_tls = start(start_gateway, start_upstream, env, {"url": f"redis://127.0.0.1:{env.redis.tls_port}/0",
                                                              "timeout": "300ms"}, wait=False)
    # The TLS port takes the plain AUTH for a bad ClientHello and drops the connection.
    assert wait_failure(plain_to_tls, env)["cause"] == "connection_lost"


def test_check_config_reads_the_tls_files_and_refuses_tls_keys_on_a_plain_url(env, gateway_bin, tmp_path):
    cert, key = env.client

    def check(state: dict) -> tuple[int, str]:
        cfg = tmp_path / f"c{secrets.token_hex(3)}.yml"
        cfg.write_text(gateway_config(18097, {"up": "http://127.0.0.1:9"}, state={"backend": "redis", **state}))
        p = run_cli(gateway_bin, "check-config", "--config", str(cfg))
        return p.returncode, (p.stdout + p.stderr).decode()

    base = {"url": "rediss://127.0.0.1:6399/0"}
    assert check({**base, "ca_file": str(env.pki.ca), "client_certificate": str(cert), "client_key": str(key)})[0] == 0
    code, out = check({**base, "ca_file": str(tmp_path / "missing.pem")})
    assert code != 0 and "state.ca_file" in out, out
    code, out = check({**base, "client_certificate": str(cert), "client_key": str(env.pki.key)})
    assert code != 0 and "state.client_key" in out and "match" in out, out     # OpenSSL: "key values mismatch"
    code, out = check({**base, "client_certificate": str(cert)})
    assert code != 0 and "client_certificate and client_key go together" in out, out
    code, out = check({**base, "tls_verify": False})
    assert code == 0 and "state.tls_verify: warning: certificate checks are off" in out, out
    code, out = check({"url": "redis://127.0.0.1:6399/0", "ca_file": str(env.pki.ca)})
    assert code != 0 and "ca_file applies to TLS: use a rediss:// url" in out and ".yml:" in out, out
