#!/usr/bin/env bash
# Installs the Debian packages attest-gateway needs that are missing. Usage: scripts/install-deps.sh [build|test|bench]...
# Runs apt-get only when something is missing (so repeated `make` calls cost nothing).
set -euo pipefail

build_pkgs=(pkg-config libssl-dev libcbor-dev libnghttp2-dev libyaml-dev libhiredis-dev libsqlite3-dev libcurl4-openssl-dev)
test_pkgs=(curl python3 python3-pytest)
bench_pkgs=(nginx-light wrk procps)

wanted=()
for group in "${@:-build}"; do
  case "$group" in
    build) wanted+=("${build_pkgs[@]}") ;;
    test) wanted+=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    bench) wanted+=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
    *) echo "install-deps: unknown group $group" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# A system python3 may be absent while another python3 (pyenv) with pytest is on PATH: that is enough.
if command -v python3 >/dev/null && python3 -c 'import pytest' 2>/dev/null; then
  keep=()
  for p in "${missing[@]}"; do [[ "$p" == python3 || "$p" == python3-pytest ]] || keep+=("$p"); done
  missing=("${keep[@]+"${keep[@]}"}")
fi
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
