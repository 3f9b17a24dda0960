#!/usr/bin/env bash
# Installs the Debian packages attest-gateway needs that are missing. Usage: scripts/install-deps.sh [build|test|bench|soak]...
# Runs apt-get only when something is missing (so repeated `make` calls cost nothing).
set -euo pipefail

build_pkgs=(pkg-config libssl-dev libcbor-dev libnghttp2-dev libyaml-dev libhiredis-dev libsqlite3-dev libcurl4-openssl-dev)
test_pkgs=(curl python3 redis-server nginx e2fsprogs openssl nghttp2-client chromium chromium-driver prometheus)
bench_pkgs=(nginx-light wrk procps haproxy python3 redis-server nghttp2-client nghttp2-server openssl)
soak_pkgs=(python3 redis-server)

wanted=()
for group in "${@:-build}"; do
  case "$group" in
    build) wanted+=("${build_pkgs[@]}") ;;
    test) wanted+=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    bench) wanted+=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
    soak) wanted+=("${build_pkgs[@]}" "${soak_pkgs[@]}") ;;
    *) echo "install-deps: unknown group $group" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Any python3 on PATH will do (a pyenv one included): don't install Debian's beside it.
if command -v python3 >/dev/null; then
  keep=()
  for p in "${missing[@]+"${missing[@]}"}"; do [[ "$p" == python3 ]] || keep+=("$p"); done
  missing=("${keep[@]+"${keep[@]}"}")
fi

# Python modules for the python3 the tests run with: pip if that python has it, else Debian's package.
# Usage: ensure_python_module MODULE PIP_NAME DEBIAN_PACKAGE ("-": none in Debian; pip after python3-pip is installed)
pip_only=()
ensure_python_module() {
  python3 -c "import $1" 2>/dev/null && return 0
  echo "install-deps: installing $2"
  python3 -m pip install --quiet "$2" 2>/dev/null && return 0
  if [ "$3" = "-" ]; then
    pip_only+=("$2")
    python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
  else
    missing+=("$3")
  fi
}
# Debian's own python3 refuses plain `pip install` (PEP 668): a pip-only module goes to the user's site-packages.
install_pip_only() {
  for m in "${pip_only[@]+"${pip_only[@]}"}"; do
    python3 -m pip install --quiet --user --break-system-packages "$m" 2>/dev/null || python3 -m pip install --quiet --user "$m"
  done
}
for group in "${@:-build}"; do
  if [ "$group" = test ]; then
    ensure_python_module pytest pytest python3-pytest
    ensure_python_module yaml pyyaml python3-yaml   # Tests/e2e/test_deploy.py reads deploy/
    ensure_python_module h2 h2 python3-h2           # Tests/e2e/test_http2.py: frame-level HTTP/2 client
    ensure_python_module websockets websockets python3-websockets   # Tests/e2e/test_websocket.py: RFC 6455 client/server
    ensure_python_module grpc grpcio python3-grpcio   # Tests/e2e/test_grpc.py: gRPC client and server
    ensure_python_module cryptography cryptography python3-cryptography   # Tests/e2e/test_verdict_token.py: ES256 check
    # Tests/e2e/test_monitoring_deploy.py: Kubernetes schemas (no Debian package; pip). promtool comes from prometheus.
    ensure_python_module kubernetes_validate kubernetes-validate -
    ensure_python_module selenium selenium python3-selenium   # Tests/e2e/test_rollout_view.py: drives headless chromium
  fi
  if [ "$group" = bench ]; then
    ensure_python_module cryptography cryptography python3-cryptography   # scripts/bench/mint_tokens.py
    ensure_python_module websockets websockets python3-websockets   # scripts/bench/ws_echo.py: the WebSocket rows
  fi
  if [ "$group" = soak ]; then
    ensure_python_module h2 h2 python3-h2           # scripts/soak/soak.py: its h2c client connections
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then install_pip_only; exit 0; fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_pip_only
