"""CLI: version, help, check-config, unknown commands; the development tools stay out of the production binary."""

import json
import re
import shutil
import subprocess
from pathlib import Path

from harness import gateway_config, run_cli


def out(p) -> str:
    return (p.stdout + p.stderr).decode("utf-8", "replace")


def test_version(gateway_bin):
    p = run_cli(gateway_bin, "version")
    assert p.returncode == 0, out(p)
    lines = p.stdout.decode().strip().splitlines()
    assert len(lines) >= 1 and re.search(r"\d+\.\d+", lines[0]), f"no version line in {p.stdout!r}"


def test_help(gateway_bin):
    p = run_cli(gateway_bin, "--help")
    assert p.returncode == 0, out(p)
    assert "usage" in out(p).lower(), out(p)
    assert "serve" in out(p), "top-level usage does not mention the serve command"


def test_serve_help(gateway_bin):
    p = run_cli(gateway_bin, "serve", "--help")
    assert p.returncode == 0, out(p)
    assert "usage" in out(p).lower(), out(p)
    assert "--config" in out(p), out(p)


def test_unknown_command_exits_2(gateway_bin):
    p = run_cli(gateway_bin, "frobnicate")
    assert p.returncode == 2, f"exit {p.returncode}: {out(p)}"


def test_dev_commands_are_a_usage_error_naming_attest_gateway_dev(gateway_bin):
    for args in (("dev",), ("dev", "echo", "--listen", "127.0.0.1:0"), ("dev", "appattest", "ca", "--dir", "x")):
        p = run_cli(gateway_bin, *args)
        assert p.returncode == 2, f"{args}: exit {p.returncode}: {out(p)}"
        assert "attest-gateway-dev" in p.stderr.decode(), f"{args}: {out(p)}"
        assert p.stdout == b"", f"{args}: {out(p)}"


# A linked Swift module leaves its name in the binary: in every symbol of the module (mangled as <length><name>, what
# `nm` lists) and, kept by `strip`, as its module descriptor's NUL-terminated name (and its #file paths).
TEST_SUPPORT = b"GatewayTestSupport"


def test_production_binary_does_not_link_gateway_test_support(gateway_bin):
    """The simulated App Attest CA and device (GatewayTestSupport) and the dev tools live in attest-gateway-dev
    only: whoever holds a simulated CA can attest any key, so the production binary must not contain them."""
    data = Path(gateway_bin).read_bytes()
    assert b"\0GatewayProxy\0" in data, "no module descriptor of GatewayProxy found: is GATEWAY_BIN a Swift binary?"
    if shutil.which("nm"):
        symbols = subprocess.run(["nm", gateway_bin], capture_output=True, timeout=60).stdout.splitlines()
        linked = [s.decode("utf-8", "replace") for s in symbols if b"18" + TEST_SUPPORT in s]
        assert not linked, f"{len(linked)} GatewayTestSupport symbols in {gateway_bin}, e.g. {linked[:5]}"
    assert TEST_SUPPORT not in data, f"{gateway_bin} contains GatewayTestSupport (its module name)"
    for dev_type in (b"9DevIssuer", b"11EchoHandler", b"19DevAppAttestCommand"):
        assert dev_type not in data, f"{gateway_bin} contains the dev tool type {dev_type.decode()}"


def test_dev_binary_has_the_dev_tools(dev_bin):
    p = run_cli(dev_bin, "--help")
    assert p.returncode == 0, out(p)
    for command in ("echo", "issuer", "token", "appattest"):
        assert f"attest-gateway-dev {command}" in out(p), out(p)
    p = run_cli(dev_bin)
    assert p.returncode == 2, out(p)
    p = run_cli(dev_bin, "frobnicate")
    assert p.returncode == 2, out(p)


def test_check_config_ok(gateway_bin, tmp_path):
    f = tmp_path / "gateway.yml"
    f.write_text(gateway_config(18080, {"api": "http://127.0.0.1:3000"}))
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 0, out(p)
    assert p.stdout.decode().strip() == "ok", out(p)


def test_check_config_spec_minimal_example(gateway_bin, tmp_path):
    """The minimal config exactly as the spec shows it (flow mappings, every limit set)."""
    f = tmp_path / "gateway.yml"
    f.write_text(MINIMAL)
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 0, out(p)
    assert p.stdout.decode().strip() == "ok", out(p)


MINIMAL = """version: 1
listeners:
  - address: 127.0.0.1:18081
limits:
  max_header_bytes: 32KiB
  max_headers: 100
  max_body_bytes: 10MiB
  header_timeout: 10s
  idle_timeout: 60s
  max_connections: 10000
  drain_timeout: 30s
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:3000", connect_timeout: 2s, response_timeout: 30s}
routes:
  - name: api
    match: {path_prefix: /}
    upstream: api
    verify: []
"""

BAD_UPSTREAM = """version: 1
listeners:
  - address: 127.0.0.1:18082
state: {backend: memory}
upstreams:
  api:
    url: "http://127.0.0.1:3000"
routes:
  - name: api
    match:
      path_prefix: /
    upstream: apii
    verify: []
"""


def _problem_lines(p, path):
    text = p.stdout.decode("utf-8", "replace") + p.stderr.decode("utf-8", "replace")
    return [l for l in text.splitlines() if l.startswith(str(path) + ":")], text


def test_check_config_unknown_upstream(gateway_bin, tmp_path):
    f = tmp_path / "gateway.yml"
    f.write_text(BAD_UPSTREAM)
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 1, out(p)
    lines, text = _problem_lines(p, f)
    hits = [l for l in lines if 'routes[0].upstream: unknown upstream "apii"' in l]
    assert len(hits) == 1, f"expected one F:line:col: routes[0].upstream line, got:\n{text}"
    m = re.match(re.escape(str(f)) + r":(\d+):(\d+): ", hits[0])
    assert m, hits[0]
    expected_line = BAD_UPSTREAM.splitlines().index("    upstream: apii") + 1
    assert int(m.group(1)) == expected_line, f"line {m.group(1)} != {expected_line}: {hits[0]}"
    assert int(m.group(2)) in (5, 15), f"column {m.group(2)} is neither the key (5) nor the value (15)"
    assert len(lines) == 1, f"one problem, one line expected:\n{text}"


UNKNOWN_KEY = """version: 1
listeners:
  - address: 127.0.0.1:18083
limits:
  max_header_bytez: 1KiB
state: {backend: memory}
upstreams:
  api:
    url: "http://127.0.0.1:3000"
routes:
  - match:
      path_prefix: /
    upstream: api
    verify: []
"""


def test_check_config_unknown_key(gateway_bin, tmp_path):
    f = tmp_path / "gateway.yml"
    f.write_text(UNKNOWN_KEY)
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 1, out(p)
    lines, text = _problem_lines(p, f)
    hits = [l for l in lines if "unknown key" in l]
    assert len(hits) == 1, f"expected one 'unknown key' line:\n{text}"
    m = re.match(re.escape(str(f)) + r":(\d+):(\d+): (\S+): ", hits[0])
    assert m, f"not F:line:col: yaml.path: message -> {hits[0]}"
    assert int(m.group(1)) == 5, hits[0]
    assert "max_header_bytez" in hits[0], hits[0]


def test_check_config_reports_every_problem(gateway_bin, tmp_path):
    f = tmp_path / "gateway.yml"
    f.write_text(BAD_UPSTREAM.replace("state: {backend: memory}", "state: {backend: memory}\nbogus_top: 1"))
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 1, out(p)
    lines, text = _problem_lines(p, f)
    assert any('unknown upstream "apii"' in l for l in lines), text
    assert any("unknown key" in l and "bogus_top" in l for l in lines), text
    assert len(lines) == 2, f"two problems, two lines expected:\n{text}"


def test_check_config_yaml_syntax_error(gateway_bin, tmp_path):
    f = tmp_path / "gateway.yml"
    f.write_text("version: 1\nlisteners:\n  - address: [127.0.0.1:1\nroutes: {\n")
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    assert p.returncode == 1, out(p)
    lines, text = _problem_lines(p, f)
    assert lines and re.match(re.escape(str(f)) + r":\d+:\d+: ", lines[0]), text


# --- check-config: silent holes (shadowed routes, prefix warnings) and the files the configuration names --------

HOLES_HEAD = """version: 1
listeners:
  - address: 127.0.0.1:18084
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:3000"}
routes:
"""


def _check(gateway_bin, tmp_path, text, name="gateway.yml"):
    f = tmp_path / name
    f.write_text(text)
    p = run_cli(gateway_bin, "check-config", "--config", str(f))
    lines, all_text = _problem_lines(p, f)
    return p, f, lines, all_text


def _line_of(text, needle, nth=0):
    return [i + 1 for i, l in enumerate(text.splitlines()) if needle in l][nth]


def test_check_config_shadowed_route_names_both_routes_and_lines(gateway_bin, tmp_path):
    text = HOLES_HEAD + """  - name: api
    match: {path_prefix: /api/}
    upstream: api
  - name: health
    match: {path: /health}
    upstream: api
  - name: payments
    match: {path_prefix: /api/payments/, methods: [POST]}
    upstream: api
"""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, text)
    assert p.returncode == 1, all_text
    api, payments = _line_of(text, "- name: api"), _line_of(text, "- name: payments")
    assert lines == [
        f'{f}:{payments}:5: routes[2]: route "payments" can never match: route "api" (line {api}) catches every '
        f"request it would (order routes from specific to general)"
    ], all_text
    assert p.stdout.decode().strip() != "ok"


def test_check_config_host_and_method_variants_are_not_shadowing(gateway_bin, tmp_path):
    """What only looks like shadowing loads: the earlier route leaves requests the later one can still get."""
    text = HOLES_HEAD + """  - {name: other-host, match: {path_prefix: /, host: admin.example.com}, upstream: api}
  - {name: port-bound, match: {path_prefix: /, host: "api.example.com:8443"}, upstream: api}
  - {name: gets, match: {path_prefix: /api/, methods: [GET]}, upstream: api}
  - {name: posts, match: {path_prefix: /api/, methods: [GET, POST]}, upstream: api}
  - {name: exact, match: {path: /api/}, upstream: api}
  - {name: any-port, match: {path_prefix: /, host: api.example.com}, upstream: api}
  - {name: public, match: {path_prefix: /}, upstream: api}
"""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, text)
    assert p.returncode == 0 and p.stdout.decode().strip() == "ok", all_text
    assert lines == [], all_text


def test_check_config_same_host_spelled_differently_is_shadowed(gateway_bin, tmp_path):
    """Case and a trailing dot do not hide a shadowed route; an any-port host covers a port-bound one."""
    text = HOLES_HEAD + """  - {name: a, match: {path_prefix: /, host: api.example.com}, upstream: api}
  - {name: b, match: {path_prefix: /x/, host: API.Example.com.}, upstream: api}
  - {name: c, match: {path_prefix: /y/, host: "api.example.com:8443"}, upstream: api}
"""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, text)
    assert p.returncode == 1, all_text
    assert [l.split(": ", 2)[1] for l in lines] == ["routes[1]", "routes[2]"], all_text
    assert all('can never match: route "a" (line 8)' in l for l in lines), all_text


def test_check_config_prefix_warning_keeps_exit_0(gateway_bin, tmp_path):
    text = HOLES_HEAD + """  - name: payments
    match:
      path_prefix: /api/payments
    upstream: api
  - name: public
    match: {path_prefix: /}
    upstream: api
"""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, text)
    assert p.returncode == 0, all_text
    assert p.stdout.decode().strip() == "ok", all_text
    line = _line_of(text, "path_prefix: /api/payments")
    assert len(lines) == 1, all_text
    assert lines[0].startswith(f"{f}:{line}:20: routes[0].match.path_prefix: warning: "), all_text
    assert '"/api/paymentsX"' in lines[0] and '"/api/payments/"' in lines[0], all_text


def test_check_config_prints_warnings_with_errors_in_file_order(gateway_bin, tmp_path):
    text = HOLES_HEAD + """  - {name: a, match: {path_prefix: /api}, upstream: api}
  - {name: b, match: {path: /x/./y}, upstream: api}
"""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, text)
    assert p.returncode == 1, all_text
    assert len(lines) == 2, all_text
    assert ": warning: " in lines[0] and "routes[0].match.path_prefix" in lines[0], all_text
    assert 'routes[1].match.path: path "/x/./y" is not canonical; requests are routed on the canonical path "/x/y"' in lines[1], all_text


FILES = """version: 1
listeners:
  - address: 127.0.0.1:18085
state: {backend: sqlite, path: never-created/state.db}
upstreams:
  api: {url: "http://127.0.0.1:3000"}
verifiers:
  web: {type: app_check, project_number: "1", jwks_url: "https://keys.invalid/jwks"}
  ios:
    type: app_attest
    team_id: ABCDE12345
    bundle_ids: [com.example.app]
    root_ca: certs/missing-root.pem
  dc:
    type: device_check
    team_id: ABCDE12345
    key_id: ABC123DEFG
    private_key: secrets/AuthKey_missing.p8
routes:
  - {name: api, match: {path_prefix: /api/}, upstream: api, verify: [ios, dc]}
"""


def test_check_config_reads_the_files_the_configuration_names(gateway_bin, tmp_path):
    """A missing root CA or .p8 used to pass check-config and then stop serve; now each is reported at its key.
    The jwks_url is not fetched (keys.invalid would fail) and the SQLite store is not created."""
    p, f, lines, all_text = _check(gateway_bin, tmp_path, FILES)
    assert p.returncode == 1, all_text
    root, key = _line_of(FILES, "root_ca:"), _line_of(FILES, "private_key:")
    assert lines == [
        f"{f}:{root}:14: verifiers.ios.root_ca: cannot read a PEM certificate from {tmp_path}/certs/missing-root.pem",
        f"{f}:{key}:18: verifiers.dc.private_key: cannot read an EC private key (.p8) from {tmp_path}/secrets/AuthKey_missing.p8: "
        f"cannot open {tmp_path}/secrets/AuthKey_missing.p8: No such file or directory",
    ], all_text
    assert not (tmp_path / "never-created").exists()


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def test_check_config_accepts_good_files_and_reports_tls_files_at_their_keys(gateway_bin, tmp_path):
    certs = tmp_path / "certs"
    secrets = tmp_path / "secrets"
    certs.mkdir()
    secrets.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"]
    _openssl("req", "-x509", *ec, "-keyout", str(certs / "server.key"), "-out", str(certs / "server.pem"), "-subj", "/CN=localhost")
    _openssl("req", "-x509", *ec, "-keyout", str(certs / "root.key"), "-out", str(certs / "root.pem"), "-subj", "/CN=root")
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(secrets / "AuthKey.p8"))
    tls = FILES.replace("certs/missing-root.pem", "certs/root.pem").replace("AuthKey_missing.p8", "AuthKey.p8").replace(
        "  - address: 127.0.0.1:18085\n",
        "  - address: 127.0.0.1:18085\n    tls:\n      certificate: certs/server.pem\n      private_key: certs/server.key\n")
    p, f, lines, all_text = _check(gateway_bin, tmp_path, tls)
    assert p.returncode == 0 and p.stdout.decode().strip() == "ok", all_text

    broken = tls.replace("certs/server.key", "certs/nope.key")
    p, f, lines, all_text = _check(gateway_bin, tmp_path, broken, "broken.yml")
    assert p.returncode == 1, all_text
    line = _line_of(broken, "private_key: certs/nope.key")
    assert len(lines) == 1 and lines[0].startswith(
        f"{f}:{line}:20: listeners[0].tls.private_key: cannot read the private key {tmp_path}/certs/nope.key"), all_text

    missing_cert = tls.replace("certs/server.pem", "certs/nope.pem")
    p, f, lines, all_text = _check(gateway_bin, tmp_path, missing_cert, "nocert.yml")
    assert p.returncode == 1, all_text
    line = _line_of(missing_cert, "certificate: certs/nope.pem")
    assert len(lines) == 1 and lines[0].startswith(
        f"{f}:{line}:20: listeners[0].tls.certificate: cannot read the certificate chain {tmp_path}/certs/nope.pem"), all_text


def test_serve_logs_configuration_warnings_once_at_start(start_gateway, free_port):
    port = free_port()
    text = gateway_config(port, {"api": "http://127.0.0.1:9"},
                          routes=[{"name": "p", "match": {"path_prefix": "/api"}, "upstream": "api", "verify": []}])
    gw = start_gateway(text, workers=2)
    warns = []
    for line in gw.stderr().splitlines():
        if '"configuration warning"' in line:
            warns.append(json.loads(line))
    assert len(warns) == 1, gw.stderr()
    assert warns[0]["level"] == "warn"
    assert re.match(r".*gateway\.yml:\d+:\d+: routes\[0\]\.match\.path_prefix: warning: path_prefix \"/api\" also matches",
                    warns[0]["warning"]), warns[0]


def test_an_unresolvable_upstream_is_reported_without_a_bogus_errno(gateway_bin, tmp_path):
    """A resolver failure is not an errno: the message says what the resolver said, not '…: Success'."""
    cfg = tmp_path / "gateway.yml"
    cfg.write_text('version: 1\nlisteners: [{address: "127.0.0.1:18556"}]\n'
                   'upstreams: {api: {url: "http://no-such-host.invalid:80"}}\n'
                   'routes:\n  - {match: {path_prefix: /}, upstream: api}\n')
    p = run_cli(gateway_bin, "serve", "--config", str(cfg), timeout=20)
    err = p.stderr.decode()
    assert p.returncode == 1 and "upstreams.api.url" in err and "no-such-host.invalid" in err, err
    assert "Success" not in err, err
