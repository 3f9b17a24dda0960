#!/usr/bin/env bash
# `make demo`: the whole story in a minute, on loopback ports 18080 (gateway), 13000 (dev echo upstream) and
# 13100 (dev App Check issuer); App Attest with a simulated device (`attest-gateway-dev appattest`) against a test CA
# made here; Play Integrity classic tokens made with test keys (`attest-gateway-dev playintegrity`). The dev tools are their own executable (DEV_BIN), never part of the gateway's.
# Everything it starts stops when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${GATEWAY_BIN:-.build/release/attest-gateway}
DEV_BIN=${GATEWAY_DEV_BIN:-$(dirname "$BIN")/attest-gateway-dev}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# A test CA for App Attest (in production `root_ca: builtin` is Apple's App Attestation Root CA).
root_ca=$("$DEV_BIN" appattest ca --dir "$tmp/appattest-ca")
# Play Integrity test keys in Play Console's format (in production: the developer-managed keys Play Console gives).
"$DEV_BIN" playintegrity keys --out "$tmp/play" > /dev/null
play_cert=$(python3 -c 'import base64,hashlib; print(base64.urlsafe_b64encode(hashlib.sha256(b"attest-gateway test certificate").digest()).rstrip(b"=").decode())')

cat > "$tmp/gateway.yml" <<YAML
version: 1
listeners: [{name: public, address: 127.0.0.1:18080, http2: true}]   # http2: h2c prior knowledge too
admin: {address: 127.0.0.1:18081}   # /healthz /readyz /metrics and the rollout view (/ and /stats)
state: {backend: sqlite, path: state/state.db}   # replay protection for limited_use routes (created here)
upstreams:
  api: {url: "http://127.0.0.1:13000"}
verifiers:
  firebase:
    type: app_check
    project_number: "123456789012"
    project_id: demo-project
    jwks_url: http://127.0.0.1:13100/jwks     # the dev issuer; in production leave jwks_url out (Google's)
  ios:
    type: app_attest
    team_id: DEMOTEAM01
    bundle_ids: [com.example.app]
    root_ca: $root_ca                         # the demo's test CA; in production leave it out (Apple's root)
    registration_path: /.attest/ios           # POST /.attest/ios/challenge, POST /.attest/ios/attest
  android:
    type: play_integrity
    package_name: com.example.app
    certificate_sha256: ["$play_cert"]        # the app's signing certificate (Play Console shows it)
    decryption_key_file: $tmp/play/decryption.key      # classic tokens, decoded here
    verification_key_file: $tmp/play/verification.key
routes:
  - {name: transfers, match: {path_prefix: /api/transfers/}, upstream: api, verify: [ios]}
  - {name: android, match: {path_prefix: /api/android/}, upstream: api, verify: [android], limited_use: true}
  - {name: orders, match: {path_prefix: /api/orders/}, upstream: api, verify: [firebase], limited_use: true}
  - {name: payments, match: {path_prefix: /api/payments/}, upstream: api, verify: [firebase]}
  - {name: catalog, match: {path_prefix: /api/catalog/}, upstream: api, verify: [firebase], mode: monitor}
  - {name: public, match: {path_prefix: /}, upstream: api, verify: []}
YAML

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# Prints the status line, the reason (for rejections) and which X-Attest-* headers the upstream received.
call() {
  local out
  out=$(curl -s -w '\n%{http_code}' "$@")
  local code=${out##*$'\n'} body=${out%$'\n'*}
  if [[ "$body" == *'"headers"'* ]]; then
    echo "  -> $code, forwarded; the upstream saw:"
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); [print("       %s: %s" % (k, v if len(v) < 60 else v[:40] + "…")) for k, v in d["headers"] if k.lower().startswith(("x-attest", "x-firebase", "x-forwarded-for"))]' "$body"
  else
    echo "  -> $code $body"
  fi
}

step "1. validate the configuration (errors name file:line:col and the YAML path)"
"$BIN" check-config --config "$tmp/gateway.yml"
printf 'version: 1\nlisteners: [{address: 127.0.0.1:1}]\nupstreams: {api: {url: "http://127.0.0.1:2"}}\nroutes:\n  - {match: {path: /x}, upstream: apii, verify: [firebas]}\n' > "$tmp/bad.yml"
echo "\$ attest-gateway check-config --config bad.yml"
"$BIN" check-config --config "$tmp/bad.yml" 2>&1 | sed "s|$tmp/||" || true

step "2. start the dev echo upstream, the dev App Check issuer and the gateway"
"$DEV_BIN" echo --listen 127.0.0.1:13000 2>/dev/null & pids+=($!)
"$DEV_BIN" issuer --listen 127.0.0.1:13100 2>/dev/null & pids+=($!)
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:13100/jwks && break; sleep 0.1; done
"$BIN" serve --config "$tmp/gateway.yml" --workers 2 > "$tmp/access.log" 2> "$tmp/gateway.err" & gw=$!; pids+=($gw)
for _ in $(seq 50); do grep -q "jwks loaded" "$tmp/gateway.err" 2>/dev/null && break; sleep 0.1; done
cat "$tmp/gateway.err"

token=$("$DEV_BIN" token --issuer http://127.0.0.1:13100)
expired=$("$DEV_BIN" token --issuer http://127.0.0.1:13100 --expired)
# A forgery: the real header and claims with another app id, keeping the real signature.
forged=$(python3 - "$token" <<'PY'
import base64, json, sys
h, p, s = sys.argv[1].split(".")
claims = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
claims["sub"] = "1:123456789012:ios:attacker"
p2 = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
print(h + "." + p2 + "." + s)
PY
)

step "3. a valid App Check token: forwarded without the token, with the verdict headers"
call -X POST http://127.0.0.1:18080/api/payments/charge -H "X-Firebase-AppCheck: $token" -d '{"amount":42}'

step "4. no token: 401 missing_token, the upstream never sees the request"
call -X POST http://127.0.0.1:18080/api/payments/charge -d '{"amount":42}'

step "4b. the same two over HTTP/2 (h2c prior knowledge here; over TLS, ALPN h2): the same answers"
curl -s --http2-prior-knowledge -o /dev/null -w '  -> HTTP/%{http_version} %{http_code} with the token\n' \
  -X POST http://127.0.0.1:18080/api/payments/charge -H "X-Firebase-AppCheck: $token" -d '{"amount":42}'
curl -s --http2-prior-knowledge -w '  (HTTP/%{http_version} %{http_code} without it)\n' \
  -X POST http://127.0.0.1:18080/api/payments/charge -d '{"amount":42}' | sed 's/^/  -> /'

step "5. an expired token: 401 expired"
call -X POST http://127.0.0.1:18080/api/payments/charge -H "X-Firebase-AppCheck: $expired" -d '{}'

step "6. a forged token (claims changed, signature kept): 401 bad_signature"
call -X POST http://127.0.0.1:18080/api/payments/charge -H "X-Firebase-AppCheck: $forged" -d '{}'

step "6b. limited use (route 'orders'): a limited-use token is accepted once, then token_replayed"
once=$("$DEV_BIN" token --issuer http://127.0.0.1:13100 --limited-use)
call -X POST http://127.0.0.1:18080/api/orders/new -H "X-Firebase-AppCheck: $once" -d '{}'
call -X POST http://127.0.0.1:18080/api/orders/new -H "X-Firebase-AppCheck: $once" -d '{}'
call -X POST http://127.0.0.1:18080/api/orders/new -H "X-Firebase-AppCheck: $token" -d '{}'

step "6c. App Attest: a (simulated) device registers its key — challenge, then attestation (verified to the root)"
challenge=$(curl -s -X POST http://127.0.0.1:18080/.attest/ios/challenge)
echo "  POST /.attest/ios/challenge -> $challenge"
challenge=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["challenge"])' "$challenge")
"$DEV_BIN" appattest attest --dir "$tmp/device" --ca "$tmp/appattest-ca" --team-id DEMOTEAM01 \
  --bundle-id com.example.app --challenge "$challenge" > "$tmp/attest.json"
echo "  POST /.attest/ios/attest (keyId, challenge, token) ->"
curl -s -w '  (%{http_code})\n' -X POST http://127.0.0.1:18080/.attest/ios/attest --data-binary @"$tmp/attest.json"
echo "  the same challenge again ->"
curl -s -w '  (%{http_code})\n' -X POST http://127.0.0.1:18080/.attest/ios/attest --data-binary @"$tmp/attest.json"

step "6d. App Attest: each request signed by the device key over method, path, timestamp and body hash"
printf '{"to":"alice","amount":10}' > "$tmp/body.json"
aa_headers() {  # curl -H arguments from one `attest-gateway-dev appattest assert` JSON line
  python3 -c 'import json,sys; [print("-H\n%s: %s" % kv) for kv in json.loads(sys.argv[1]).items()]' "$1"
}
line=$("$DEV_BIN" appattest assert --dir "$tmp/device" --method POST --target /api/transfers/send --body-file "$tmp/body.json")
mapfile -t h < <(aa_headers "$line")
call -X POST http://127.0.0.1:18080/api/transfers/send "${h[@]}" --data-binary @"$tmp/body.json"
echo "  the same assertion replayed (counter not increasing):"
call -X POST http://127.0.0.1:18080/api/transfers/send "${h[@]}" --data-binary @"$tmp/body.json"
echo "  a fresh assertion, but the body changed on the way (amount 10 -> 1000):"
line=$("$DEV_BIN" appattest assert --dir "$tmp/device" --method POST --target /api/transfers/send --body-file "$tmp/body.json")
mapfile -t h < <(aa_headers "$line")
call -X POST http://127.0.0.1:18080/api/transfers/send "${h[@]}" -d '{"to":"alice","amount":1000}'

step "6e. Google Play Integrity (Android): a classic token, decrypted and verified here, bound to the request"
ts=$(date +%s)
request_hash() {  # base64url(SHA-256(METHOD \n target \n timestamp \n hex SHA-256(body))), what the app puts in the nonce
  python3 -c 'import base64,hashlib,sys; b=open(sys.argv[4],"rb").read(); d="\n".join(sys.argv[1:4]+[hashlib.sha256(b).hexdigest()]); print(base64.urlsafe_b64encode(hashlib.sha256(d.encode()).digest()).rstrip(b"=").decode())' "$@"
}
nonce=$(request_hash POST /api/android/orders "$ts" "$tmp/body.json")
ptoken=$("$DEV_BIN" playintegrity token --keys "$tmp/play" --package com.example.app --nonce "$nonce")
call -X POST http://127.0.0.1:18080/api/android/orders -H "X-Play-Integrity: $ptoken" -H "X-Play-Integrity-Timestamp: $ts" \
  --data-binary @"$tmp/body.json"
echo "  the same token again (limited use: each token once):"
call -X POST http://127.0.0.1:18080/api/android/orders -H "X-Play-Integrity: $ptoken" -H "X-Play-Integrity-Timestamp: $ts" \
  --data-binary @"$tmp/body.json"
echo "  a fresh token, but the body changed on the way:"
ptoken=$("$DEV_BIN" playintegrity token --keys "$tmp/play" --package com.example.app --nonce "$nonce")
call -X POST http://127.0.0.1:18080/api/android/orders -H "X-Play-Integrity: $ptoken" -H "X-Play-Integrity-Timestamp: $ts" \
  -d '{"to":"alice","amount":1000}'
echo "  a device that only meets basic integrity (the verifier asks for MEETS_DEVICE_INTEGRITY):"
ptoken=$("$DEV_BIN" playintegrity token --keys "$tmp/play" --package com.example.app --nonce "$nonce" --device MEETS_BASIC_INTEGRITY)
call -X POST http://127.0.0.1:18080/api/android/orders -H "X-Play-Integrity: $ptoken" -H "X-Play-Integrity-Timestamp: $ts" \
  --data-binary @"$tmp/body.json"

step "7. monitor mode (route 'catalog'): never rejects, tells the upstream the verdict"
call http://127.0.0.1:18080/api/catalog/items -H "X-Firebase-AppCheck: $expired"
echo "  the placeholder a Firebase SDK sends when the device could not attest (counted apart: not a forgery):"
call http://127.0.0.1:18080/api/catalog/items -H "X-Firebase-AppCheck: eyJlcnJvciI6IlVOS05PV05fRVJST1IifQ=="

step "8. a client claiming 'X-Attest-Verdict: verified' without a token: the upstream sees the truth"
call http://127.0.0.1:18080/api/catalog/items -H "X-Attest-Verdict: verified"

step "9. strict HTTP: a request-smuggling attempt (Content-Length + Transfer-Encoding) is refused"
python3 - <<'PY'
import socket
s = socket.create_connection(("127.0.0.1", 18080), timeout=5)
s.sendall(b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
reply = s.recv(4096).decode()
print("  ->", reply.split("\r\n")[0], reply.split("\r\n\r\n", 1)[-1])
PY

step "9b. the same protected path spelled differently is judged as the path a decoding upstream would serve"
for p in '/%61pi/payments/charge' '//api/payments/charge' '/x/../api/payments/charge' '/api/./payments/charge'; do
  echo "  POST $p without a token:"
  call -X POST --path-as-is "http://127.0.0.1:18080$p" -d '{}'
done
echo "  spellings servers read differently are refused (encoded slash, path parameter, .. above the root):"
for p in '/api%2Fpayments/charge' '/api;x/payments/charge' '/../api/payments/charge'; do
  call -X POST --path-as-is "http://127.0.0.1:18080$p" -d '{}'
done

step "10. the access log: one JSON line per request with verdict and reason — never a token or a query string"
sleep 0.2
cat "$tmp/access.log"
if grep -q "${token##*.}" "$tmp/access.log"; then echo "!! token found in the access log"; exit 1; fi

step "10b. the rollout view: what enforcing each route would reject (open http://127.0.0.1:18081/ in a browser)"
curl -s http://127.0.0.1:18081/stats | python3 -c '
import json, sys
for r in json.load(sys.stdin)["routes"]:
    h = r["last_hour"]
    print("  %-9s %-7s verified %d, missing %d, device could not attest %d, invalid %s, replayed %d -> %s %% %s" % (
        r["name"], r["mode"], h["verified"], h["missing"], h["client_attestation_failed"], h["invalid"] or "{}",
        h["replayed"], r["would_reject_percent"], "would be rejected if enforced" if r["mode"] == "monitor" else "rejected"))'

step "11. SIGTERM drains and exits 0"
kill -TERM "$gw"; wait "$gw"; echo "gateway exit code: $?"
