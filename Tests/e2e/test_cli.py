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


# --- --help is the truth: every command and every option each really accepts ------------------------------------
#
# The help lists each command as a block (GatewayCLI/CommandHelp.swift):
#   "  attest-gateway serve [--config FILE] …"   the command and its synopsis (continued on lines of 10+ spaces)
#   "      Serves …"                             one line saying what it does
#   "      --config FILE    the configuration…"  one line per option: flag, value placeholder (none: no value), text
# The test reads those blocks from `--help`, then asks the binary itself: a listed option must be accepted (with a
# value exactly when the help shows one), and every "--flag" literal in the command-line sources that a command
# accepts must be listed in that command's block. Probes end in --help, which every command honours only after its
# options parsed, so nothing is started, read or written.

SOURCES = Path(__file__).resolve().parents[2] / "Sources"
HEADER = re.compile(r"^  (attest-gateway(?:-dev)?)((?: [a-z][a-z0-9-]*)*)(?: (.*))?$")
OPTION = re.compile(r"^ {6}(--[a-z0-9-]+)(?: (\S+))?  +\S")
FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")
PROBE_VALUE = "probe-value"


def help_blocks(text: str) -> dict:
    """{(binary, word, …): {"options": {flag: takes_value}, "synopsis": {flags}, "summary": str}} from a help text."""
    blocks, current = {}, None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            path = (m.group(1), *m.group(2).split())
            assert path not in blocks, f"{' '.join(path)} listed twice:\n{text}"
            current = blocks[path] = {"options": {}, "synopsis": set(FLAG.findall(m.group(3) or "")), "summary": ""}
            continue
        if current is None or not line.startswith("      "):
            current = None                       # a blank or unindented line ends the block
            continue
        if line.startswith(" " * 10):
            current["synopsis"] |= set(FLAG.findall(line))
        elif (o := OPTION.match(line)):
            assert o.group(1) not in current["options"], f"{o.group(1)} listed twice: {line}"
            current["options"][o.group(1)] = o.group(2) is not None
        else:
            assert line.strip() and not line.strip().startswith("-"), f"not an option line (flag, value, two spaces, text): {line!r}"
            current["summary"] = line.strip()
    return blocks


def source_flags(folder: str) -> set:
    """Every "--flag" string literal in the command-line sources (including the parsers' own sets)."""
    found = set()
    for f in sorted((SOURCES / folder).glob("*.swift")):
        found |= set(re.findall(r'"(--[a-z0-9][a-z0-9-]*)"', f.read_text()))
    return found - {"--help", "--version"}


def source_commands(folder: str) -> set:
    """The words the command switches dispatch on (`switch command {` / `switch args.first {` up to `default:`)."""
    words = set()
    for f in sorted((SOURCES / folder).glob("*.swift")):
        text = f.read_text()
        for m in re.finditer(r"switch (?:command|args\.first) \{(.*?)default:", text, re.S):
            for label in re.findall(r"case ((?:\"[^\"]+\"(?:, )?)+):", m.group(1)):
                words |= {w for w in re.findall(r'"([^"]+)"', label) if not w.startswith("-")}
    return words


def _accepts(binary, path, flag):
    """How the command takes `flag`: "valued", "boolean" or None (unknown option), from one side-effect-free run."""
    p = run_cli(binary, *path[1:], flag, PROBE_VALUE, "--help")
    if p.returncode == 0:
        return "valued"
    if f'unknown option "{PROBE_VALUE}"'.encode() in p.stderr:
        return "boolean"
    return None


BINARIES = {"attest-gateway": "AttestGateway", "attest-gateway-dev": "AttestGatewayDev"}


def _check_help_is_complete(binary: str, name: str):
    top = run_cli(binary, "--help")
    assert top.returncode == 0, out(top)
    blocks = help_blocks(top.stdout.decode())
    assert len(blocks) >= 3, f"no command blocks found in {name} --help:\n{out(top)}"
    problems = []

    # Every word a command switch dispatches on is a listed command (`attest-gateway dev` only redirects).
    listed = {w for path in blocks for w in path[1:]}
    missing = source_commands(BINARIES[name]) - listed - ({"dev"} if name == "attest-gateway" else set())
    if missing:
        problems.append(f"commands dispatched but not in --help: {sorted(missing)}")

    for path, block in blocks.items():
        command = " ".join(path)
        if path[0] != name:
            problems.append(f"{command}: listed in {name} --help")
            continue
        if not block["summary"]:
            problems.append(f"{command}: no one-line description")
        options = block["options"]
        if block["synopsis"] != set(options):
            problems.append(f"{command}: synopsis {sorted(block['synopsis'])} != options {sorted(options)}")

        # The command's own help lists the same options.
        own = run_cli(binary, *path[1:], "--help")
        own_block = help_blocks(own.stdout.decode()).get(path)
        if own.returncode != 0 or own_block is None or own_block["options"] != options:
            problems.append(f"{command} --help (exit {own.returncode}) does not list what {name} --help does: {own_block}")

        # Listed → accepted, with a value exactly when the help shows one.
        for flag, takes_value in options.items():
            how = _accepts(binary, path, flag)
            if how != ("valued" if takes_value else "boolean"):
                problems.append(f"{command} {flag}: the help says {'valued' if takes_value else 'no value'}, "
                                f"the binary takes it as {how or 'an unknown option'}")
            if takes_value:
                p = run_cli(binary, *path[1:], flag)
                if p.returncode != 2 or f"{flag} needs a value".encode() not in p.stderr:
                    problems.append(f"{command} {flag} without a value: exit {p.returncode}, {p.stderr[:200]!r}")

        # Accepted → listed: every --flag of the sources this command takes is in its block.
        for flag in sorted(source_flags(BINARIES[name]) - set(options)):
            how = _accepts(binary, path, flag)
            if how is not None:
                problems.append(f"{command} accepts {flag} ({how}) but its help does not list it")
    assert not problems, "\n".join(problems)


def test_gateway_help_lists_every_command_and_option_it_accepts(gateway_bin):
    _check_help_is_complete(gateway_bin, "attest-gateway")


def test_dev_help_lists_every_command_and_option_it_accepts(dev_bin):
    _check_help_is_complete(dev_bin, "attest-gateway-dev")


def test_help_parser_sees_a_missing_option():
    """The checks above can fail: a block whose synopsis names an option it does not list is seen."""
    blocks = help_blocks("Usage:\n  attest-gateway serve [--config FILE] [--workers N]\n      Serves.\n"
                         "      --config FILE  the file\n\nnotes\n")
    assert blocks == {("attest-gateway", "serve"): {"options": {"--config": True}, "synopsis": {"--config", "--workers"},
                                                    "summary": "Serves."}}


def test_help_command_and_version_take_no_stray_arguments(gateway_bin):
    p = run_cli(gateway_bin, "help", "check-config")
    assert p.returncode == 0 and "attest-gateway check-config [--config FILE]" in out(p), out(p)
    for args in (("version", "--bogus"), ("help", "frobnicate")):
        p = run_cli(gateway_bin, *args)
        assert p.returncode == 2 and p.stdout == b"", f"{args}: exit {p.returncode}: {out(p)}"


def test_bad_option_values_are_usage_errors_naming_the_option(gateway_bin, tmp_path):
    missing = str(tmp_path / "missing.yml")
    for args, flag in ((("serve", "--config", missing, "--workers", "0"), "--workers"),
                       (("serve", "--config", missing, "--log-level", "loud"), "--log-level"),
                       (("playintegrity", "verify", "--token", "-", "--package", "com.example.app",
                         "--service-account", missing, "--timeout", "forever"), "--timeout"),
                       (("appattest", "verify-assertion", "--team-id", "T", "--bundle-id", "B", "--previous-counter", "-1"),
                        "--previous-counter")):
        p = run_cli(gateway_bin, *args)
        assert p.returncode == 2 and flag in p.stderr.decode().split("\n")[0], f"{args}: exit {p.returncode}: {out(p)}"
