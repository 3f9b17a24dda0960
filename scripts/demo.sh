#!/usr/bin/env bash
# `make demo`: the whole story in one minute, on loopback ports 18080 (gateway) and 13000 (dev echo upstream).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${GATEWAY_BIN:-.build/release/attest-gateway}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

cat > "$tmp/gateway.yml" <<YAML
version: 1
listeners: [{name: public, address: 127.0.0.1:18080}]
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:13000"}
verifiers:
  firebase: {type: app_check, project_number: "123456789012", jwks_file: jwks.json}
routes:
  - {name: payments, match: {path_prefix: /api/payments, methods: [POST]}, upstream: api, verify: [firebase]}
  - {name: public, match: {path_prefix: /}, upstream: api, verify: []}
YAML

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; echo; }

step "1. validate the configuration (errors would name file:line:col and the YAML path)"
show "$BIN" check-config --config "$tmp/gateway.yml"
printf 'routes:\n  - {match: {path: /x}, upstream: apii}\nversion: 1\nlistenerz: []\n' > "$tmp/bad.yml"
echo "\$ $BIN check-config --config bad.yml"
"$BIN" check-config --config "$tmp/bad.yml" 2>&1 | sed "s|$tmp/||" || true

step "2. start the dev echo upstream and the gateway"
"$BIN" dev echo --listen 127.0.0.1:13000 2>/dev/null & pids+=($!)
"$BIN" serve --config "$tmp/gateway.yml" --workers 2 > "$tmp/access.log" 2> "$tmp/gateway.err" & gw=$!; pids+=($gw)
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:18080/ && break; sleep 0.1; done
cat "$tmp/gateway.err"

step "3. a request is forwarded; the upstream sees X-Forwarded-*, never a client's forged X-Attest-*"
show curl -s http://127.0.0.1:18080/hello?user=42 -H 'X-Attest-Verdict: verified'

step "4. bodies stream through unchanged (chunked upload, SHA-256 compared at the upstream)"
head -c 1000000 /dev/urandom > "$tmp/body"
echo "local sha256: $(sha256sum "$tmp/body" | cut -d' ' -f1)"
curl -s -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/body" http://127.0.0.1:18080/upload | grep -o '"body_bytes":[0-9]*,"body_sha256":"[0-9a-f]*"'

step "5. a request-smuggling attempt (Content-Length + Transfer-Encoding) is refused before the upstream"
printf 'POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' > "$tmp/smuggle"
python3 - "$tmp/smuggle" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", 18080), timeout=5)
s.sendall(open(sys.argv[1], "rb").read())
print(s.recv(4096).decode())
PY

step "6. a route that requires App Check refuses until verification lands (never forwards unverified)"
show curl -s -i -X POST http://127.0.0.1:18080/api/payments -d '{}'

step "7. the access log: one JSON line per request, no query strings, no tokens"
sleep 0.2
cat "$tmp/access.log"

step "8. SIGTERM drains and exits 0"
kill -TERM "$gw"; wait "$gw"; echo "gateway exit code: $?"
tail -2 "$tmp/gateway.err"
