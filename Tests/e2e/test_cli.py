"""CLI: version, help, check-config, unknown commands."""

import re

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
