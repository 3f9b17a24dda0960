#!/usr/bin/env bash
# Benchmarks attest-gateway against nginx proxy_pass and HAProxy 2.6 on loopback: what `make bench` runs. The work is
# in scripts/bench/bench.py, whose docstring lists the rows and the environment variables (BENCH_SECONDS, …).
set -euo pipefail
command -v python3 >/dev/null || { echo "bench: ERROR: python3 not found (run: scripts/install-deps.sh bench)" >&2; exit 1; }
exec python3 "$(dirname "${BASH_SOURCE[0]}")/bench/bench.py" "$@"
