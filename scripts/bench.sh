#!/usr/bin/env bash
# Benchmarks attest-gateway as an HTTP/1.1 reverse proxy against nginx proxy_pass and HAProxy, on loopback.
#
#   upstream : nginx `return 200 "<48-byte body>"`, 1 worker, pinned to core 1
#   proxies  : pinned to core 0, all running side by side but loaded one after the other (never at the same time)
#     nginx            nginx proxy_pass (1 worker, keepalive 256), no token             (baseline)
#     attest-gateway   attest-gateway --workers 1, route verify: [] , no token           (plain proxy path)
#     gw-rs256-distinct  attest-gateway with an app_check verifier (RS256, jwks_file), a different token per request
#     gw-rs256-repeated  the same gateway, one token in every request (its verified-token cache answers)
#     haproxy-distinct   HAProxy (Debian's 2.6) jwt_verify + claim ACLs, nbthread 1, a different token per request
#     haproxy-repeated   the same HAProxy, one token in every request (HAProxy has no verification cache)
#     gw-lu-sqlite       the RS256 gateway config plus `limited_use: true`, state {backend: sqlite}: each distinct
#                        token's jti is consumed once (one WAL commit per request); restarted on a fresh file per run
#     gw-lu-redis        the same with state {backend: redis} (redis-server on core 1, one Lua script per request);
#                        restarted with a fresh key_prefix on a flushed redis per run
#     gw-appattest-sqlite  attest-gateway with an app_attest verifier (binding: request, max_skew 24h, root_ca: a
#                        `dev appattest ca`), state {backend: sqlite}: every request carries a fresh assertion (ECDSA
#                        P-256 verify + one counter compare-and-set UPDATE, its own WAL commit, per request); restarted
#                        on a fresh file per run, its simulated devices registered again (challenge + attest) before the
#                        warm-up; load wrk -tN -cN, device k = thread k = one connection (so its counters arrive in
#                        order), N = BENCH_APPATTEST_DEVICES (8); with sqlite3 on PATH, the counters in the file are
#                        checked against wrk's request count after each run
#   HTTP/2 rows (BENCH_H2=1, the default; 0 skips them), all loaded by h2load (nghttp2-client) instead of wrk:
#     gw-h1-h2load     the plain attest-gateway process above (http2 off) over HTTP/1.1: h2load --h1 -c64 -m1, so the
#                      HTTP/1.1 and HTTP/2 figures below come from the same load generator
#     gw-h2c           a second plain-proxy gateway (route verify: []) whose listener has `http2: true`: h2c with prior
#                      knowledge, h2load -c64 -m1 (one stream at a time per connection, like the HTTP/1.1 rows)
#     gw-h2c-mux       the same listener, h2load -c8 -m32 (fewer connections, many streams each: multiplexing)
#     nginx-h2c        nginx proxy_pass (1 worker, same upstream block) on `listen … http2` (h2c), -c64 -m1  (h2 peer)
#     nginx-h2c-mux    the same nginx, -c8 -m32
#     gw-h2-tls        the h2 gateway's second listener, `http2: true` + `tls:` (ALPN h2), h2load --npn-list=h2 -c64 -m1
#     nginx-h2-tls     the same nginx on `listen … ssl http2`, same load   (BENCH_H2_TLS=0 skips both TLS rows)
#                      TLS: a self-signed P-256 certificate made with openssl at run time in the temp dir (deleted on exit)
#                      Before measuring, nghttp must get the upstream's 200 + body over h2c / TLS h2 from each; a gateway
#                      that does not answer HTTP/2 (a binary from before HTTP/2 support) has its h2 rows skipped, reported.
#                      Per run: h2load's req/s ("finished in …"), succeeded / failed (+ errored, timeout, non-2xx),
#                      mean and max request time, the negotiated protocol; CPU µs/req as for the wrk rows, over the
#                      requests h2load counted as succeeded; core1 %, core 1's busy share (h2load + upstream; near 100,
#                      req/s is bounded by the load side, not the proxy). A run with any failure, a non-2xx or another
#                      protocol than asked for makes the row INVALID.
#   load     : wrk -t1 -c64 --latency, pinned to core 1 (shared with the upstream); the distinct rows use
#              scripts/bench/tokens.lua (next token of a list per request), the repeated rows a fixed -H header;
#              gw-appattest-sqlite scripts/bench/appattest.lua (thread k sends device k's next assertion)
#   tokens   : scripts/bench/mint_tokens.py: a fresh RSA-2048 key per invocation, Firebase App Check claims
#   assertions: `attest-gateway dev appattest assert` before the first run (GET /bench, empty body, one timestamp),
#              one list per device; the warm-up takes its head, the measured run the rest (disjoint counters); every
#              run has a new store, so each round sends the same lists again as counters the store has never seen
#
# For each row: requests/s, p50/p99 latency, and CPU µs per request = Δ(utime+stime) of the proxy process
# (/proc/<pid>/stat, all threads) / requests completed. CPU µs/req is the stable figure on a shared machine.
#
# Environment: GATEWAY_BIN (default .build/release/attest-gateway), NGINX_BIN (default: nginx on PATH or
# /usr/sbin/nginx), HAPROXY_BIN (default: haproxy on PATH or /usr/sbin/haproxy), BENCH_SECONDS (10),
# BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (1), BENCH_CONNECTIONS (64), BENCH_TOKENS (distinct tokens to mint,
# default 22000 x BENCH_SECONDS, at least 20000: a measured run above 22k req/s wraps the list, which is reported), BENCH_RS256 (1; 0 skips the four token rows and HAProxy).
# BENCH_LU (1; 0 skips the two limited-use rows and redis-server; forced to 0 by BENCH_RS256=0), REDIS_BIN (default
# redis-server on PATH), REDIS_CLI (default redis-cli on PATH).
# BENCH_APPATTEST (1; 0 skips gw-appattest-sqlite; it runs with BENCH_RS256=0 too), BENCH_APPATTEST_DEVICES (8: wrk
# -t and -c of that row), BENCH_APPATTEST_ASSERTIONS (per measured run, all devices together; default 20000 x
# BENCH_SECONDS: a run above 20k req/s exhausts the lists, which is reported and makes the row invalid, as does any
# non-2xx answer, e.g. a replayed counter's 401).
# BENCH_H2 (1; 0 skips the HTTP/2 rows, h2load and the second nginx and gateway), BENCH_H2_TLS (1; 0 skips the two TLS
# rows), BENCH_H2_MUX_CONNECTIONS (8) and BENCH_H2_MUX_STREAMS (32): h2load -c and -m of the *-mux rows. Quick HTTP/2 run:
# BENCH_RS256=0 BENCH_APPATTEST=0 BENCH_SECONDS=5 BENCH_ROUNDS=2 (the two plain wrk rows and the HTTP/2 rows).
# Exits non-zero only when something fails to start; missing the targets is reported, never asserted.
set -euo pipefail

GATEWAY_BIN=${GATEWAY_BIN:-.build/release/attest-gateway}
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
HAPROXY_BIN=${HAPROXY_BIN:-$(command -v haproxy || echo /usr/sbin/haproxy)}
SECONDS_PER_RUN=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=${BENCH_WARMUP_SECONDS:-1}
CONNS=${BENCH_CONNECTIONS:-64}
RS256=${BENCH_RS256:-1}
LU=${BENCH_LU:-1}
[ "$RS256" = 1 ] || LU=0
REDIS_BIN=${REDIS_BIN:-$(command -v redis-server || echo /usr/bin/redis-server)}
REDIS_CLI=${REDIS_CLI:-$(command -v redis-cli || echo /usr/bin/redis-cli)}
TOKENS=${BENCH_TOKENS:-$(( SECONDS_PER_RUN * 22000 > 20000 ? SECONDS_PER_RUN * 22000 : 20000 ))}
AA=${BENCH_APPATTEST:-1}
AA_DEVICES=${BENCH_APPATTEST_DEVICES:-8}
AA_ASSERTIONS=${BENCH_APPATTEST_ASSERTIONS:-$(( SECONDS_PER_RUN * 20000 ))}
AA_TEAM=BENCH12345; AA_BUNDLE=com.example.bench; AA_REG=/.attest/ios
H2=${BENCH_H2:-1}
H2_TLS=${BENCH_H2_TLS:-1}
[ "$H2" = 1 ] || H2_TLS=0
H2_MUX_CONNS=${BENCH_H2_MUX_CONNECTIONS:-8}
H2_MUX_STREAMS=${BENCH_H2_MUX_STREAMS:-32}
TARGET_CPU_RATIO=0.8   # gateway CPU µs/req ÷ nginx CPU µs/req must be ≤ this
TARGET_RPS_RATIO=1.2   # gateway req/s ÷ nginx req/s must be ≥ this
TARGET_DISTINCT=1.5    # gw-rs256-distinct req/s ÷ haproxy-distinct req/s must be ≥ this
TARGET_REPEATED=1.0    # gw-rs256-repeated req/s ÷ nginx (proxy_pass, no token) req/s must be ≥ this
TARGET_LU_SQLITE=0.7   # gw-lu-sqlite req/s ÷ gw-rs256-distinct req/s must be ≥ this
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOKEN_PROJECT_NUMBER=123456789012   # must match scripts/bench/mint_tokens.py

die() { echo "bench: ERROR: $*" >&2; exit 1; }
loud() { echo; echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; echo "!!! $*"; echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; echo; }

for tool in wrk taskset getconf awk sort timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (run: scripts/install-deps.sh bench)"
done
[ -x "$NGINX_BIN" ] || die "nginx not found at $NGINX_BIN (run: scripts/install-deps.sh bench)"
[ -x "$GATEWAY_BIN" ] || die "gateway binary $GATEWAY_BIN not found or not executable (run: make build)"
if [ "$RS256" = 1 ]; then
  [ -x "$HAPROXY_BIN" ] || die "haproxy not found at $HAPROXY_BIN (run: scripts/install-deps.sh bench)"
  command -v python3 >/dev/null || die "python3 not found (the token minter needs it)"
  if ! python3 -c 'import cryptography' 2>/dev/null; then
    echo "bench: installing python cryptography (token minter)"
    python3 -m pip install --quiet cryptography || die "python3 -m pip install cryptography failed"
  fi
  [ -f "$HERE/bench/mint_tokens.py" ] && [ -f "$HERE/bench/tokens.lua" ] && [ -f "$HERE/bench/threads.lua" ] \
    || die "scripts/bench/ helpers missing"
fi
if [ "$AA" = 1 ]; then
  [ -f "$HERE/bench/appattest.lua" ] && [ -f "$HERE/bench/threads.lua" ] || die "scripts/bench/ helpers missing"
  [[ "$AA_DEVICES" =~ ^[1-9][0-9]*$ ]] && [[ "$AA_ASSERTIONS" =~ ^[1-9][0-9]*$ ]] \
    || die "BENCH_APPATTEST_DEVICES and BENCH_APPATTEST_ASSERTIONS must be positive integers"
fi
if [ "$LU" = 1 ]; then
  [ -x "$REDIS_BIN" ] || die "redis-server not found at $REDIS_BIN (run: scripts/install-deps.sh bench, or BENCH_LU=0)"
  [ -x "$REDIS_CLI" ] || die "redis-cli not found at $REDIS_CLI (run: scripts/install-deps.sh bench, or BENCH_LU=0)"
fi
if [ "$H2" = 1 ]; then
  for tool in h2load nghttp; do
    command -v "$tool" >/dev/null || die "$tool not found (run: scripts/install-deps.sh bench, or BENCH_H2=0)"
  done
  [ "$H2_TLS" = 0 ] || command -v openssl >/dev/null || die "openssl not found (run: scripts/install-deps.sh bench, or BENCH_H2_TLS=0)"
  [[ "$H2_MUX_CONNS" =~ ^[1-9][0-9]*$ ]] && [[ "$H2_MUX_STREAMS" =~ ^[1-9][0-9]*$ ]] \
    || die "BENCH_H2_MUX_CONNECTIONS and BENCH_H2_MUX_STREAMS must be positive integers"
fi
[ "$(nproc)" -ge 2 ] || die "needs at least 2 cores for the pinning (core 0: proxy, core 1: wrk + upstream)"

TMP=$(mktemp -d /tmp/attest-bench.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]+"${PIDS[@]}"}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Listening ports come from below the kernel's ephemeral range when it leaves room (20000 up to its start), so that a
# client connection made meanwhile (by anything on the machine) cannot already hold the port when a server binds it.
EPHEMERAL_LOW=$(awk '{ print $1; exit }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 0)
PORT_SPAN=30000; [[ "$EPHEMERAL_LOW" =~ ^[0-9]+$ ]] && (( EPHEMERAL_LOW > 25000 && EPHEMERAL_LOW < 50000 )) && PORT_SPAN=$(( EPHEMERAL_LOW - 20000 ))
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % PORT_SPAN ))
    if ! port_busy "$p" && [[ " ${USED_PORTS:-} " != *" $p "* ]]; then USED_PORTS="${USED_PORTS:-} $p"; echo "$p"; return; fi
  done
  die "no free loopback port found"
}
# wait_port PORT PID NAME LOG: waits (≤10 s) until PORT accepts, failing if PID exits first.
wait_port() {
  for _ in $(seq 1 100); do
    kill -0 "$2" 2>/dev/null || { echo "--- $3 output:" >&2; tail -n 30 "$4" >&2 || true; die "$3 exited during startup"; }
    port_busy "$1" && return 0
    sleep 0.1
  done
  echo "--- $3 output:" >&2; tail -n 30 "$4" >&2 || true
  die "$3 did not listen on 127.0.0.1:$1 within 10 s"
}

UPORT=$(free_port); GPORT=$(free_port); NPORT=$(free_port); VPORT=$(free_port); HPORT=$(free_port)
LSPORT=$(free_port); LRPORT=$(free_port); RPORT=$(free_port)   # gw-lu-sqlite, gw-lu-redis, redis-server
AAPORT=$(free_port)                                             # gw-appattest-sqlite
G2PORT=$(free_port); G2TPORT=$(free_port); N2PORT=$(free_port); N2TPORT=$(free_port)   # HTTP/2: gateway, nginx (h2c, TLS)
CLK_TCK=$(getconf CLK_TCK)
BODY='attest-gateway bench upstream: 50-byte body ok.\n'   # 47 characters + newline = 48 bytes

# Temp paths inside $TMP so nginx needs nothing from /var/lib/nginx; only for modules this nginx has.
nginx_temp_paths() {
  local d=$1 v m
  v=$("$NGINX_BIN" -V 2>&1)
  echo "client_body_temp_path $d/body; proxy_temp_path $d/proxy;"
  for m in fastcgi uwsgi scgi; do
    [[ "$v" == *"--without-http_${m}_module"* ]] || echo "${m}_temp_path $d/$m;"
  done
}
TEMP_PATHS=$(nginx_temp_paths "$TMP")

mkdir -p "$TMP/upstream" "$TMP/nginxproxy"
cat > "$TMP/upstream/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $TMP/upstream/err.log; pid $TMP/upstream/pid;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 100000; keepalive_timeout 75s;
  $TEMP_PATHS
  server {
    listen 127.0.0.1:$UPORT;
    location / { default_type text/plain; return 200 "$BODY"; }
  }
}
EOF
cat > "$TMP/nginxproxy/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $TMP/nginxproxy/err.log; pid $TMP/nginxproxy/pid;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 100000; keepalive_timeout 75s;
  $TEMP_PATHS
  upstream api { server 127.0.0.1:$UPORT; keepalive 256; keepalive_requests 100000; }
  server {
    listen 127.0.0.1:$NPORT;
    location / { proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
cat > "$TMP/gateway.yml" <<EOF
version: 1
listeners: [{address: 127.0.0.1:$GPORT}]
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:$UPORT", max_idle_connections: 256}
routes:
  - {name: bench, match: {path_prefix: /}, upstream: api, verify: []}
EOF

if [ "$H2" = 1 ]; then
  # nginx h2 peer: the proxy config above on h2c (`listen … http2` without ssl: prior knowledge) and, with TLS, on
  # `listen … ssl http2` (ALPN h2). keepalive_requests also bounds the streams of one HTTP/2 connection in 1.22:
  # raised so that no connection is closed within a run. The gateway: the plain config with http2: true listeners.
  mkdir -p "$TMP/nginxh2"
  N2_TLS_LISTEN=""; G2_TLS_LISTENER=""
  if [ "$H2_TLS" = 1 ]; then
    mkdir -p "$TMP/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
      -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/tls/key.pem" -out "$TMP/tls/cert.pem" \
      >"$TMP/tls/openssl.log" 2>&1 || { cat "$TMP/tls/openssl.log" >&2; die "openssl could not make the bench certificate"; }
    chmod 600 "$TMP/tls/key.pem"
    N2_TLS_LISTEN="listen 127.0.0.1:$N2TPORT ssl http2;
    ssl_certificate $TMP/tls/cert.pem; ssl_certificate_key $TMP/tls/key.pem; ssl_protocols TLSv1.2 TLSv1.3;"
    G2_TLS_LISTENER="
  - {name: h2-tls, address: 127.0.0.1:$G2TPORT, http2: true, tls: {certificate: $TMP/tls/cert.pem, private_key: $TMP/tls/key.pem}}"
  fi
  cat > "$TMP/nginxh2/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $TMP/nginxh2/err.log; pid $TMP/nginxh2/pid;
events { worker_connections 4096; }
http {
  access_log off; keepalive_requests 100000000; keepalive_timeout 75s;
  $TEMP_PATHS
  upstream api { server 127.0.0.1:$UPORT; keepalive 256; keepalive_requests 100000; }
  server {
    listen 127.0.0.1:$N2PORT http2;
    $N2_TLS_LISTEN
    location / { proxy_pass http://api; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
  cat > "$TMP/gateway-h2.yml" <<EOF
version: 1
listeners:
  - {name: h2c, address: 127.0.0.1:$G2PORT, http2: true}$G2_TLS_LISTENER
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:$UPORT", max_idle_connections: 256}
routes:
  - {name: bench, match: {path_prefix: /}, upstream: api, verify: []}
EOF
fi

if [ "$RS256" = 1 ]; then
  mkdir -p "$TMP/tokens" "$TMP/haproxy"
  # The limited-use rows warm up from a slice of their own (LU_WARM more tokens, never in a measured run's list):
  # a warm-up must not consume a token the measured run will send.
  LU_WARM=0; [ "$LU" = 1 ] && LU_WARM=$(( WARMUP * 22000 > 5000 ? WARMUP * 22000 : 5000 ))
  echo "bench: minting an RSA-2048 key and $(( TOKENS + LU_WARM )) distinct RS256 tokens ($(nproc) processes)..."
  python3 "$HERE/bench/mint_tokens.py" "$TMP/tokens" "$(( TOKENS + LU_WARM ))" || die "token minting failed"
  if [ "$LU" = 1 ]; then
    tail -n "$LU_WARM" "$TMP/tokens/distinct.jwt" > "$TMP/tokens/lu-warmup.jwt"
    head -n "$TOKENS" "$TMP/tokens/distinct.jwt" > "$TMP/tokens/distinct.tmp" && mv "$TMP/tokens/distinct.tmp" "$TMP/tokens/distinct.jwt"
    [ "$(wc -l < "$TMP/tokens/distinct.jwt")" = "$TOKENS" ] && [ "$(wc -l < "$TMP/tokens/lu-warmup.jwt")" = "$LU_WARM" ] \
      || die "splitting the token list failed"
    LU_FRESH=$(tail -n 1 "$TMP/tokens/lu-warmup.jwt")   # for the sanity check (each LU gateway gets fresh state)
  fi
  sync   # write the token file back now, not during the first measured runs
  REPEATED_TOKEN=$(cat "$TMP/tokens/repeated.jwt"); BAD_TOKEN=$(cat "$TMP/tokens/bad.jwt")
  FIRST_DISTINCT=$(head -n 1 "$TMP/tokens/distinct.jwt")
  cat > "$TMP/gateway-rs256.yml" <<EOF
version: 1
listeners: [{address: 127.0.0.1:$VPORT}]
state: {backend: memory}
upstreams:
  api: {url: "http://127.0.0.1:$UPORT", max_idle_connections: 256}
verifiers:
  fb: {type: app_check, project_number: "$TOKEN_PROJECT_NUMBER", project_id: demo-project, jwks_file: $TMP/tokens/jwks.json}
routes:
  - {name: bench, match: {path_prefix: /}, upstream: api, verify: [fb]}
EOF
  # HAProxy 2.6: no JWKS, no claim checks of its own: the key is a PEM file, each claim is an ACL. Every
  # jwt_* converter call decodes the token again; jwt_verify returns 1 only for a good signature.
  cat > "$TMP/haproxy/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 8192
defaults
  mode http
  timeout connect 5s
  timeout client 75s
  timeout server 75s
  timeout http-keep-alive 75s
  option http-keep-alive
  http-reuse always
frontend fe
  bind 127.0.0.1:$HPORT
  http-request set-var(txn.bearer) req.hdr(X-Firebase-AppCheck)
  http-request set-var(txn.now) date()
  http-request set-var(txn.exp) var(txn.bearer),jwt_payload_query('\$.exp','int')
  http-request set-var(txn.iat) var(txn.bearer),jwt_payload_query('\$.iat','int')
  acl jwt_alg var(txn.bearer),jwt_header_query('\$.alg') -m str RS256
  acl jwt_typ var(txn.bearer),jwt_header_query('\$.typ') -m str JWT
  acl jwt_kid var(txn.bearer),jwt_header_query('\$.kid') -m str bench
  acl jwt_sig var(txn.bearer),jwt_verify("RS256","$TMP/tokens/public.pem") -m int 1
  acl jwt_iss var(txn.bearer),jwt_payload_query('\$.iss') -m str https://firebaseappcheck.googleapis.com/$TOKEN_PROJECT_NUMBER
  acl jwt_aud var(txn.bearer),jwt_payload_query('\$.aud[0]') -m str projects/$TOKEN_PROJECT_NUMBER projects/demo-project
  acl jwt_aud var(txn.bearer),jwt_payload_query('\$.aud[1]') -m str projects/$TOKEN_PROJECT_NUMBER projects/demo-project
  acl jwt_exp var(txn.exp),sub(txn.now) -m int gt 0
  acl jwt_iat var(txn.iat),sub(txn.now) -m int le 0
  acl jwt_sub var(txn.bearer),jwt_payload_query('\$.sub') -m found
  http-request deny deny_status 401 unless jwt_alg jwt_typ jwt_kid jwt_sig jwt_iss jwt_aud jwt_exp jwt_iat jwt_sub
  default_backend api
backend api
  server up 127.0.0.1:$UPORT
EOF
fi

if [ "$AA" = 1 ]; then
  # One simulated device per wrk thread (dev-0 …) and one for the sanity check, under a test CA. Each list holds
  # AA_PER_WARM assertions for the warm-ups, then AA_PER_RUN for the measured runs (counters 1, 2, … in that order).
  AA_WARM=$(( WARMUP * 20000 > 5000 ? WARMUP * 20000 : 5000 ))
  AA_PER_WARM=$(( (AA_WARM + AA_DEVICES - 1) / AA_DEVICES ))
  AA_PER_RUN=$(( (AA_ASSERTIONS + AA_DEVICES - 1) / AA_DEVICES ))
  AA_TS=$(date +%s)   # one timestamp for every assertion: the verifier's max_skew is 24h
  mkdir -p "$TMP/aa"
  AA_ROOT=$("$GATEWAY_BIN" dev appattest ca --dir "$TMP/aa/ca") && [ -f "$AA_ROOT" ] || die "dev appattest ca failed"
  aa_generate() { # NAME COUNT: device $TMP/aa/dev-NAME, and COUNT assertions (counters 1..COUNT) in assert-NAME.jsonl
    local dir=$TMP/aa/dev-$1 out=$TMP/aa/assert-$1.jsonl count=$2 c=1 k
    "$GATEWAY_BIN" dev appattest attest --dir "$dir" --ca "$TMP/aa/ca" --team-id "$AA_TEAM" --bundle-id "$AA_BUNDLE" \
      --challenge bench-setup >/dev/null || return 1   # creates the key; each gateway registers it again (start_aa)
    : > "$out"
    while (( c <= count )); do   # dev appattest assert prints at most 10 000 per call
      k=$(( count - c + 1 > 10000 ? 10000 : count - c + 1 ))
      "$GATEWAY_BIN" dev appattest assert --dir "$dir" --method GET --target /bench --timestamp "$AA_TS" \
        --count "$k" --counter "$c" >> "$out" || return 1
      c=$(( c + k ))
    done
    [ "$(wc -l < "$out")" = "$count" ]
  }
  echo "bench: creating $AA_DEVICES simulated App Attest devices and $(( AA_DEVICES * (AA_PER_WARM + AA_PER_RUN) )) assertions..."
  gen_pids=()
  for k in $(seq 0 $(( AA_DEVICES - 1 ))); do aa_generate "$k" $(( AA_PER_WARM + AA_PER_RUN )) & gen_pids+=("$!"); done
  aa_generate sanity 2 || die "creating the sanity device failed"
  for p in "${gen_pids[@]}"; do wait "$p" || die "generating App Attest assertions failed"; done
  sync   # as for the tokens: written back now, not during the first measured runs
fi

start_nginx() { # NAME DIR CPU PORT -> sets STARTED_PID
  "$NGINX_BIN" -t -q -e "$2/err.log" -p "$2" -c "$2/nginx.conf" >"$2/stdout.log" 2>&1 \
    || { cat "$2/stdout.log" "$2/err.log" >&2 2>/dev/null || true; die "$1 nginx config test failed"; }
  taskset -c "$3" "$NGINX_BIN" -e "$2/err.log" -p "$2" -c "$2/nginx.conf" >"$2/stdout.log" 2>&1 &
  STARTED_PID=$!; PIDS+=("$STARTED_PID")
  wait_port "$4" "$STARTED_PID" "$1" "$2/err.log"
}
GW_PID=""; VG_PID=""; HA_PID=""; G2_PID=""; N2_PID=""
start_gateway() { # [rs256|h2]: the verifying gateway (gateway-rs256.yml, port VPORT) or the http2 one instead of the plain one
  if [ "${1:-}" = h2 ]; then
    taskset -c 0 "$GATEWAY_BIN" serve --config "$TMP/gateway-h2.yml" --workers 1 >/dev/null 2>"$TMP/gateway-h2.err" &
    G2_PID=$!; PIDS+=("$G2_PID")
    wait_port "$G2PORT" "$G2_PID" "attest-gateway (http2)" "$TMP/gateway-h2.err"
    if [ "$H2_TLS" = 1 ]; then wait_port "$G2TPORT" "$G2_PID" "attest-gateway (http2, tls)" "$TMP/gateway-h2.err"; fi
  elif [ "${1:-}" = rs256 ]; then
    taskset -c 0 "$GATEWAY_BIN" serve --config "$TMP/gateway-rs256.yml" --workers 1 >/dev/null 2>"$TMP/gateway-rs256.err" &
    VG_PID=$!; PIDS+=("$VG_PID")
    wait_port "$VPORT" "$VG_PID" "attest-gateway (rs256)" "$TMP/gateway-rs256.err"
  else
    taskset -c 0 "$GATEWAY_BIN" serve --config "$TMP/gateway.yml" --workers 1 >/dev/null 2>"$TMP/gateway.err" &
    GW_PID=$!; PIDS+=("$GW_PID")
    wait_port "$GPORT" "$GW_PID" "attest-gateway" "$TMP/gateway.err"
  fi
}
start_haproxy() {
  "$HAPROXY_BIN" -c -q -f "$TMP/haproxy/haproxy.cfg" >"$TMP/haproxy/check.log" 2>&1 \
    || { cat "$TMP/haproxy/check.log" >&2; die "haproxy config check failed"; }
  taskset -c 0 "$HAPROXY_BIN" -db -f "$TMP/haproxy/haproxy.cfg" >"$TMP/haproxy/haproxy.log" 2>&1 &
  HA_PID=$!; PIDS+=("$HA_PID")
  wait_port "$HPORT" "$HA_PID" "haproxy" "$TMP/haproxy/haproxy.log"
}

# --- limited-use rows: redis-server, and the two gateways, restarted with fresh state before every measured run
RS_PID=""; LS_PID=""; LR_PID=""; LU_SEQ=0
start_redis() {
  mkdir -p "$TMP/redis"
  (cd "$TMP/redis" && exec taskset -c 1 "$REDIS_BIN" --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no \
     --dir "$TMP/redis" --daemonize no --logfile "$TMP/redis/redis.log") >/dev/null 2>&1 &
  RS_PID=$!; PIDS+=("$RS_PID")
  wait_port "$RPORT" "$RS_PID" "redis-server" "$TMP/redis/redis.log"
}
stop_pid() { # PID: stops one process this script started and waits for it; drops it from PIDS
  local p=$1 keep=() q
  [ -n "$p" ] || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  for q in "${PIDS[@]+"${PIDS[@]}"}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
}
# start_lu sqlite|redis TAG: (re)starts that limited-use gateway with state nobody has seen: a new SQLite file
# (the previous one deleted), or a flushed redis and a new key_prefix. Sets LS_PID / LR_PID.
start_lu() {
  local kind=$1 tag=$2 port pidvar state cfg err old
  LU_SEQ=$(( LU_SEQ + 1 ))
  if [ "$kind" = sqlite ]; then port=$LSPORT; pidvar=LS_PID; else port=$LRPORT; pidvar=LR_PID; fi
  old=${!pidvar}
  if [ -n "$old" ]; then
    if ! kill -0 "$old" 2>/dev/null; then
      echo "--- gw-lu-$kind (pid $old) had exited; its stderr (last 30 lines):"; tail -n 30 "$TMP/lu/gw-$kind.err" || true
    fi
    stop_pid "$old"
  fi
  mkdir -p "$TMP/lu"
  if [ "$kind" = sqlite ]; then
    rm -f "$TMP"/lu/state-*.db "$TMP"/lu/state-*.db-wal "$TMP"/lu/state-*.db-shm
    state="{backend: sqlite, path: $TMP/lu/state-$tag.db}"
  else
    [ "$("$REDIS_CLI" -p "$RPORT" FLUSHALL 2>&1)" = OK ] || die "redis-cli FLUSHALL failed"
    state="{backend: redis, url: \"redis://127.0.0.1:$RPORT/0\", key_prefix: \"bench-$tag-$LU_SEQ:\"}"
  fi
  cfg="$TMP/lu/gateway-$kind.yml"; err="$TMP/lu/gw-$kind.err"
  cat > "$cfg" <<EOF
version: 1
listeners: [{address: 127.0.0.1:$port}]
state: $state
upstreams:
  api: {url: "http://127.0.0.1:$UPORT", max_idle_connections: 256}
verifiers:
  fb: {type: app_check, project_number: "$TOKEN_PROJECT_NUMBER", project_id: demo-project, jwks_file: $TMP/tokens/jwks.json}
routes:
  - {name: bench, match: {path_prefix: /}, upstream: api, verify: [fb], limited_use: true}
EOF
  taskset -c 0 "$GATEWAY_BIN" serve --config "$cfg" --workers 1 >/dev/null 2>"$err" &
  printf -v "$pidvar" '%s' "$!"; PIDS+=("$!")
  wait_port "$port" "${!pidvar}" "attest-gateway (limited use, $kind)" "$err"
}

# start_aa TAG DEVICE…: (re)starts gw-appattest-sqlite on a new SQLite file (the previous one deleted), so no counter
# is known to it, and registers each device's key with it (challenge, attest: 201). Sets AA_PID.
AA_PID=""
start_aa() {
  local tag=$1 d; shift
  if [ -n "$AA_PID" ]; then
    if ! kill -0 "$AA_PID" 2>/dev/null; then
      echo "--- gw-appattest-sqlite (pid $AA_PID) had exited; its stderr (last 30 lines):"; tail -n 30 "$TMP/aa/gw.err" || true
    fi
    stop_pid "$AA_PID"
  fi
  rm -f "$TMP"/aa/state-*.db "$TMP"/aa/state-*.db-wal "$TMP"/aa/state-*.db-shm
  AA_DB=$TMP/aa/state-$tag.db
  cat > "$TMP/aa/gateway.yml" <<EOF
version: 1
listeners: [{address: 127.0.0.1:$AAPORT}]
state: {backend: sqlite, path: $AA_DB}
upstreams:
  api: {url: "http://127.0.0.1:$UPORT", max_idle_connections: 256}
verifiers:
  aa: {type: app_attest, team_id: $AA_TEAM, bundle_ids: [$AA_BUNDLE], root_ca: $AA_ROOT, binding: request, max_skew: 24h, registration_path: $AA_REG}
routes:
  - {name: bench, match: {path_prefix: /}, upstream: api, verify: [aa]}
EOF
  taskset -c 0 "$GATEWAY_BIN" serve --config "$TMP/aa/gateway.yml" --workers 1 >/dev/null 2>"$TMP/aa/gw.err" &
  AA_PID=$!; PIDS+=("$AA_PID")
  wait_port "$AAPORT" "$AA_PID" "attest-gateway (app attest)" "$TMP/aa/gw.err"
  for d in "$@"; do aa_register "$d"; done
}

start_nginx "upstream" "$TMP/upstream" 1 "$UPORT"; UP_PID=$STARTED_PID
start_nginx "nginx proxy" "$TMP/nginxproxy" 0 "$NPORT"; NG_PID=$STARTED_PID
start_gateway
if [ "$RS256" = 1 ]; then start_gateway rs256; start_haproxy; fi
if [ "$H2" = 1 ]; then
  start_nginx "nginx h2" "$TMP/nginxh2" 0 "$N2PORT"; N2_PID=$STARTED_PID
  if [ "$H2_TLS" = 1 ]; then wait_port "$N2TPORT" "$N2_PID" "nginx h2 (tls)" "$TMP/nginxh2/err.log"; fi
  start_gateway h2
fi
if [ "$LU" = 1 ]; then start_redis; start_lu sqlite sanity; start_lu redis sanity; fi

# exchange PORT METHOD TARGET HEADERS [BODY]: one request (HEADERS: "Name: value\r\n" lines) on a new connection
# -> sets PROBE_STATUS (status code or "none") and PROBE_REPLY (raw reply)
exchange() {
  PROBE_REPLY=""; PROBE_STATUS=none
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return 0
  if [ $# -ge 5 ]; then   # a body (ASCII here: the length in characters is the length in bytes)
    printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s' "$2" "$3" "$4" "${#5}" "$5" >&3
  else
    printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sConnection: close\r\n\r\n' "$2" "$3" "$4" >&3
  fi
  PROBE_REPLY=$(timeout 5 cat <&3 || true); exec 3<&- 3>&-
  if [[ "$PROBE_REPLY" =~ ^HTTP/1\.[01]\ ([0-9]{3}) ]]; then PROBE_STATUS=${BASH_REMATCH[1]}; fi
}
# probe PORT [TOKEN] [HEADERS]: GET /bench, with the token in X-Firebase-AppCheck and/or HEADERS
probe() {
  local hdr=""
  [ -n "${2:-}" ] && hdr="X-Firebase-AppCheck: $2"$'\r\n'
  exchange "$1" GET /bench "$hdr${3:-}"
}
# Sanity: one request through each proxy must return the upstream body (with a valid token where one is needed).
check_pass() { # NAME PORT [TOKEN] [HEADERS]
  probe "$2" "${3:-}" "${4:-}"
  if [ "$PROBE_STATUS" != 200 ] || [[ "$PROBE_REPLY" != *"50-byte body ok."* ]]; then
    loud "sanity request through $1 (127.0.0.1:$2) did not return the upstream's 200 + body"
    printf '%s\n' "$PROBE_REPLY" | head -n 20
    die "$1 does not proxy correctly"
  fi
}
check_pass nginx "$NPORT"; check_pass attest-gateway "$GPORT"
# h2_check NAME URL: one GET /bench through nghttp (http://: h2c with prior knowledge; https://: ALPN h2, the
# self-signed certificate not verified); 0 when it answered :status 200 with the upstream's body over HTTP/2
h2_check() {
  local out
  out=$(timeout 10 nghttp -v "$2" 2>&1) || true
  if [[ "$out" == *") :status: 200"* ]] && [[ "$out" == *"50-byte body ok."* ]] \
     && { [[ "$2" != https:* ]] || [[ "$out" == *"The negotiated protocol: h2"* ]]; }; then
    printf '  %-22s %s: 200 + body over HTTP/2\n' "$1" "$2"; return 0
  fi
  printf '  %-22s %s: NO HTTP/2 200 + body; nghttp said:\n' "$1" "$2"
  printf '%s\n' "$out" | grep -vE '^ {10}|PRIORITY frame' | head -n 12 | sed 's/^/      /'
  return 1
}
GW_H2C=0; GW_H2TLS=0
if [ "$H2" = 1 ]; then
  echo "sanity, HTTP/2 (nghttp; h2c = prior knowledge, TLS = ALPN h2):"
  h2_check nginx-h2c "http://127.0.0.1:$N2PORT/bench" || die "nginx does not proxy h2c (nginx built without http_v2?)"
  if [ "$H2_TLS" = 1 ]; then h2_check nginx-h2-tls "https://127.0.0.1:$N2TPORT/bench" || die "nginx does not proxy h2 over TLS"; fi
  check_pass "attest-gateway (http2 listener, HTTP/1.1)" "$G2PORT"   # an http2: true listener still takes HTTP/1.1
  if h2_check gw-h2c "http://127.0.0.1:$G2PORT/bench"; then GW_H2C=1; else
    loud "attest-gateway ($GATEWAY_BIN) does not answer h2c on its http2: true listener (a build from before HTTP/2?): gw-h2c rows SKIPPED"
  fi
  if [ "$H2_TLS" = 1 ]; then
    if h2_check gw-h2-tls "https://127.0.0.1:$G2TPORT/bench"; then GW_H2TLS=1; else
      loud "attest-gateway ($GATEWAY_BIN) does not answer h2 (ALPN) on its http2: true tls: listener: gw-h2-tls row SKIPPED"
    fi
  fi
  echo
fi
if [ "$RS256" = 1 ]; then
  echo "sanity (status per proxy; must be 200 for a valid token, 401 for a bad signature or no token):"
  for who in attest-gateway-rs256:$VPORT haproxy:$HPORT; do
    name=${who%%:*}; port=${who##*:}
    check_pass "$name" "$port" "$REPEATED_TOKEN"; s_rep=$PROBE_STATUS
    check_pass "$name" "$port" "$FIRST_DISTINCT"; s_dis=$PROBE_STATUS
    probe "$port" "$BAD_TOKEN"; s_bad=$PROBE_STATUS
    probe "$port"; s_none=$PROBE_STATUS
    printf '  %-22s valid repeated token %s, valid distinct token %s, bad signature %s, no token %s\n' \
      "$name" "$s_rep" "$s_dis" "$s_bad" "$s_none"
    if [ "$s_bad" != 401 ] || [ "$s_none" != 401 ]; then
      loud "$name did not answer 401 to a bad or missing token (bad: $s_bad, none: $s_none)"
      die "$name does not verify tokens"
    fi
  done
  echo
fi
probe_reason() { # the "reason" of a local JSON reply, or "-"
  if [[ "$PROBE_REPLY" =~ \"reason\":\"([a-z_]+)\" ]]; then echo "${BASH_REMATCH[1]}"; else echo -; fi
}
if [ "$LU" = 1 ]; then
  echo "sanity, limited use (must be: fresh token 200, the same token again 401 token_replayed, token without jti 401 missing_jti):"
  for who in gw-lu-sqlite:$LSPORT gw-lu-redis:$LRPORT; do
    name=${who%%:*}; port=${who##*:}
    check_pass "$name" "$port" "$LU_FRESH"; s_fresh=$PROBE_STATUS
    probe "$port" "$LU_FRESH"; s_again="$PROBE_STATUS $(probe_reason)"
    probe "$port" "$REPEATED_TOKEN"; s_nojti="$PROBE_STATUS $(probe_reason)"   # repeated.jwt has no jti
    printf '  %-22s fresh token %s, same token again %s, token without jti %s\n' "$name" "$s_fresh" "$s_again" "$s_nojti"
    if [ "$s_again" != "401 token_replayed" ] || [ "$s_nojti" != "401 missing_jti" ]; then
      loud "$name does not enforce limited use (again: $s_again, no jti: $s_nojti)"
      die "$name does not enforce limited use"
    fi
  done
  echo
fi
aa_headers() { # LINE: one line of `dev appattest assert` (a flat JSON object of strings) -> AA_HDR, "Name: value\r\n" each
  local line=$1; AA_HDR=""
  while [[ "$line" =~ \"([A-Za-z-]+)\":\"([^\"]*)\"(.*) ]]; do
    AA_HDR+="${BASH_REMATCH[1]}: ${BASH_REMATCH[2]}"$'\r\n'; line=${BASH_REMATCH[3]}
  done
}
aa_register() { # DEVICE_DIR: registers the device's key with gw-appattest-sqlite (new challenge, same key); dies unless 201
  local body
  exchange "$AAPORT" POST "$AA_REG/challenge" "" ""
  if [ "$PROBE_STATUS" != 200 ] || ! [[ "$PROBE_REPLY" =~ \"challenge\":\"([A-Za-z0-9_=-]+)\" ]]; then
    printf '%s\n' "$PROBE_REPLY" | head -n 20; die "gw-appattest-sqlite: POST $AA_REG/challenge answered $PROBE_STATUS, not 200"
  fi
  body=$("$GATEWAY_BIN" dev appattest attest --dir "$1" --ca "$TMP/aa/ca" --team-id "$AA_TEAM" --bundle-id "$AA_BUNDLE" \
    --challenge "${BASH_REMATCH[1]}") || die "dev appattest attest failed for $1"
  exchange "$AAPORT" POST "$AA_REG/attest" $'Content-Type: application/json\r\n' "$body"
  if [ "$PROBE_STATUS" != 201 ]; then
    printf '%s\n' "$PROBE_REPLY" | head -n 20; die "gw-appattest-sqlite: registering $1 answered $PROBE_STATUS, not 201"
  fi
}
if [ "$AA" = 1 ]; then
  echo "sanity, app attest (must be: counter 2 200, counter 2 again 401 counter_not_increasing, counter 1 after it 401 counter_not_increasing, no assertion 401 missing_token):"
  start_aa sanity "$TMP/aa/dev-sanity"
  aa_headers "$(sed -n 1p "$TMP/aa/assert-sanity.jsonl")"; AA_HDR1=$AA_HDR
  aa_headers "$(sed -n 2p "$TMP/aa/assert-sanity.jsonl")"
  check_pass gw-appattest-sqlite "$AAPORT" "" "$AA_HDR"; s_fresh=$PROBE_STATUS
  probe "$AAPORT" "" "$AA_HDR"; s_again="$PROBE_STATUS $(probe_reason)"
  probe "$AAPORT" "" "$AA_HDR1"; s_lower="$PROBE_STATUS $(probe_reason)"
  probe "$AAPORT"; s_none="$PROBE_STATUS $(probe_reason)"
  printf '  %-22s counter 2 %s, counter 2 again %s, counter 1 after it %s, no assertion %s\n' gw-appattest-sqlite \
    "$s_fresh" "$s_again" "$s_lower" "$s_none"
  if [ "$s_again" != "401 counter_not_increasing" ] || [ "$s_lower" != "401 counter_not_increasing" ] \
     || [ "$s_none" != "401 missing_token" ]; then
    loud "gw-appattest-sqlite does not enforce App Attest (again: $s_again, lower: $s_lower, none: $s_none)"
    die "gw-appattest-sqlite does not enforce App Attest"
  fi
  echo
fi

cpu_ticks() { # utime+stime of PID (all threads), in clock ticks; fields 14 and 15, counted after the ')' of comm
  local s; s=$(cat "/proc/$1/stat") || return 1
  s=${s##*) }
  awk '{ print $12 + $13 }' <<<"$s"
}
to_us() { # wrk latency value (e.g. 812.00us, 1.23ms, 1.01s) -> µs
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) m = 1; else if (v ~ /ms$/) m = 1000; else if (v ~ /m$/) m = 60e6; else if (v ~ /s$/) m = 1e6; else m = 1; printf "%.1f", n * m }'
}

to_us_h2() { # h2load time (e.g. 152us, 27.06ms, 1.20s) -> µs
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) m = 1; else if (v ~ /ms$/) m = 1000; else if (v ~ /s$/) m = 1e6; else m = 1; printf "%.1f", n * m }'
}

WRK_CMD="taskset -c 1 wrk -t1 -c$CONNS -d${SECONDS_PER_RUN}s --latency http://127.0.0.1:<port>/bench"
echo "== attest-gateway benchmark"
echo "machine : $(nproc) cores, kernel $(uname -r), CPU $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
echo "gateway : $GATEWAY_BIN (pid $GW_PID, core 0, --workers 1, access log -> /dev/null)"
echo "nginx   : $("$NGINX_BIN" -v 2>&1 | sed 's/.*: //') proxy_pass (pid $NG_PID, core 0); upstream nginx return 200 (pid $UP_PID, core 1)"
if [ "$RS256" = 1 ]; then
  echo "rs256   : gateway with app_check verifier (pid $VG_PID, core 0); $("$HAPROXY_BIN" -v | head -n 1 | awk '{ print $1, $3 }') jwt_verify (pid $HA_PID, core 0, nbthread 1)"
  echo "tokens  : $TOKENS distinct (scripts/bench/tokens.lua, measured runs from the start of the list, warm-ups from its middle), 1 repeated (-H); $(wc -c < "$TMP/tokens/repeated.jwt") bytes each"
fi
if [ "$LU" = 1 ]; then
  echo "lu      : gw-lu-sqlite / gw-lu-redis: the rs256 gateway + limited_use: true (core 0), restarted before each run on a new"
  echo "          SQLite file in $TMP/lu ($(df -PT "$TMP" | awk 'NR == 2 { print $2 }')) / a flushed redis + new key_prefix; warm-ups from a separate"
  echo "          $LU_WARM-token slice; $("$REDIS_BIN" --version | awk '{ print $1, $2, $3 }') (pid $RS_PID, core 1, no persistence)"
fi
if [ "$AA" = 1 ]; then
  echo "aa      : gw-appattest-sqlite: app_attest verifier, binding request (core 0), restarted before each run on a new SQLite"
  echo "          file in $TMP/aa, its $AA_DEVICES devices registered again; wrk -t$AA_DEVICES -c$AA_DEVICES (device k = thread k = 1 connection);"
  echo "          $AA_PER_WARM assertions per device for warm-ups, then $AA_PER_RUN for the measured run (from counter $(( AA_PER_WARM + 1 )))"
fi
if [ "$H2" = 1 ]; then
  echo "h2      : $(h2load --version 2>&1 | head -n 1), taskset -c 1 h2load -t1 -D ${SECONDS_PER_RUN}s (where wrk runs): gw-h1-h2load --h1 -c$CONNS -m1 on the"
  echo "          plain gateway; http2 gateway (pid $G2_PID, core 0, --workers 1) and nginx h2 proxy_pass (pid $N2_PID, core 0):"
  echo "          *-h2c -c$CONNS -m1, *-h2c-mux -c$H2_MUX_CONNS -m$H2_MUX_STREAMS (h2c prior knowledge)$([ "$H2_TLS" = 1 ] && echo ", *-h2-tls --npn-list=h2 -c$CONNS -m1 (self-signed P-256)")"
fi
echo "load    : $WRK_CMD   (warm-up ${WARMUP}s before each run, $ROUNDS rounds, order reverses every round)"
echo "command : GATEWAY_BIN=$GATEWAY_BIN BENCH_SECONDS=$SECONDS_PER_RUN BENCH_ROUNDS=$ROUNDS BENCH_RS256=$RS256 BENCH_LU=$LU BENCH_APPATTEST=$AA BENCH_H2=$H2 BENCH_H2_TLS=$H2_TLS $0"
echo

ANY_ERRORS=0
declare -A R   # R[name,round,metric]
# wrk_run MODE SECONDS PORT [--latency]: MODE none (no token), repeated (one token, fixed header), distinct
# (tokens.lua from the start of the list), distinct-warmup (tokens.lua from the middle of the list), lu (as
# distinct), lu-warmup (tokens.lua over the limited-use rows' own warm-up slice, never sent in a measured run),
# aa (appattest.lua, one thread and connection per device, the assertions after each list's warm-up head),
# aa-warmup (the same over each list's head)
wrk_run() {
  local mode=$1 secs=$2 port=$3 extra=${4:-} url="http://127.0.0.1:$3/bench" conns=$CONNS threads=1
  [[ "$mode" == aa* ]] && conns=$AA_DEVICES threads=$AA_DEVICES
  local base=(timeout $(( secs + 60 )) taskset -c 1 wrk -t"$threads" -c"$conns" -d"${secs}s" $extra)
  case "$mode" in
    none) "${base[@]}" "$url" ;;
    repeated) "${base[@]}" -H "X-Firebase-AppCheck: $REPEATED_TOKEN" "$url" ;;
    distinct|lu) BENCH_TOKEN_FILE="$TMP/tokens/distinct.jwt" BENCH_TOKEN_START=0 BENCH_WRK_THREADS=1 \
      "${base[@]}" -s "$HERE/bench/tokens.lua" "$url" ;;
    distinct-warmup) BENCH_TOKEN_FILE="$TMP/tokens/distinct.jwt" BENCH_TOKEN_START=0.5 BENCH_WRK_THREADS=1 \
      "${base[@]}" -s "$HERE/bench/tokens.lua" "$url" ;;
    lu-warmup) BENCH_TOKEN_FILE="$TMP/tokens/lu-warmup.jwt" BENCH_TOKEN_START=0 BENCH_WRK_THREADS=1 \
      "${base[@]}" -s "$HERE/bench/tokens.lua" "$url" ;;
    aa) BENCH_AA_DIR="$TMP/aa" BENCH_AA_FIRST=$(( AA_PER_WARM + 1 )) BENCH_AA_LAST=$(( AA_PER_WARM + AA_PER_RUN )) \
      "${base[@]}" -s "$HERE/bench/appattest.lua" "$url" ;;
    aa-warmup) BENCH_AA_DIR="$TMP/aa" BENCH_AA_FIRST=1 BENCH_AA_LAST="$AA_PER_WARM" \
      "${base[@]}" -s "$HERE/bench/appattest.lua" "$url" ;;
  esac
}
# run_one NAME PORT PID ROUND MODE [SIDE_PID]: SIDE_PID (redis-server) gets its own CPU µs/req (metric scpu)
run_one() {
  local name=$1 port=$2 pid=$3 round=$4 mode=${5:-none} side=${6:-} out t0 t1 s0 s1 reqs rps p50 p99 non2xx sockerr cpu wmode=${5:-none}
  [ "$mode" = distinct ] && wmode=distinct-warmup
  [ "$mode" = lu ] && wmode=lu-warmup
  [ "$mode" = aa ] && wmode=aa-warmup
  out=$(wrk_run "$wmode" "$WARMUP" "$port" 2>&1) || true
  if [ "$mode" = aa ] && [ "$(wraps_in "$out")" != 0 ]; then   # it replayed its own head: 401s, but all below the run's counters
    echo "bench: $name round $round: the warm-up used up its $AA_PER_WARM assertions per device and replayed them (401s in the warm-up only)"
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    loud "$name (pid $pid) DIED during warm-up in round $round"; ANY_ERRORS=1; return 1
  fi
  [ -n "$side" ] && s0=$(cpu_ticks "$side")
  t0=$(cpu_ticks "$pid")
  out=$(wrk_run "$mode" "$SECONDS_PER_RUN" "$port" --latency 2>&1) || true
  [ -n "$side" ] && { s1=$(cpu_ticks "$side" 2>/dev/null) || s1=""; }
  if ! t1=$(cpu_ticks "$pid" 2>/dev/null); then
    loud "$name (pid $pid) DIED during the measured run in round $round"; printf '%s\n' "$out"; ANY_ERRORS=1; return 1
  fi
  reqs=$(awk '/requests in/ { print $1; exit }' <<<"$out")
  rps=$(awk '/^Requests\/sec:/ { print $2; exit }' <<<"$out")
  p50=$(awk '$1 == "50%" { print $2; exit }' <<<"$out")
  p99=$(awk '$1 == "99%" { print $2; exit }' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF; exit }' <<<"$out")
  sockerr=$(awk '/Socket errors:/ { sub(/.*Socket errors: */, ""); print; exit }' <<<"$out")
  if [ -z "$reqs" ] || [ -z "$rps" ] || [ "$reqs" = 0 ]; then
    loud "$name: wrk produced no result in round $round"; printf '%s\n' "$out"; ANY_ERRORS=1; return 1
  fi
  cpu=$(awk -v d=$(( t1 - t0 )) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
  R[$name,$round,rps]=$rps; R[$name,$round,p50]=$(to_us "$p50"); R[$name,$round,p99]=$(to_us "$p99")
  R[$name,$round,cpu]=$cpu; R[$name,$round,reqs]=$reqs
  R[$name,$round,cpus]=$(awk -v d=$(( t1 - t0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')
  R[$name,$round,err]="${non2xx:+non-2xx $non2xx; }${sockerr:+socket $sockerr}"
  if [ -n "$side" ] && [ -n "$s0" ] && [ -n "$s1" ]; then
    R[$name,$round,scpu]=$(awk -v d=$(( s1 - s0 )) -v hz="$CLK_TCK" -v n="$reqs" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
  fi
  if [ "$mode" = aa ]; then   # the lists must last the run: after a wrap every request is a replayed counter (401)
    local wraps; wraps=$(wraps_in "$out")
    R[$name,$round,wraps]=$wraps
    if [ "$wraps" != 0 ]; then
      ANY_ERRORS=1
      R[$name,$round,err]="${R[$name,$round,err]}assertion lists exhausted ${wraps}x (raise BENCH_APPATTEST_ASSERTIONS); "
      loud "$name round $round: a device's $AA_PER_RUN assertions ran out ($wraps wrap-arounds): replays followed, the run is INVALID; raise BENCH_APPATTEST_ASSERTIONS"
    fi
    aa_store_check "$name" "$round" "$reqs"
  fi
  if [ "$mode" = distinct ] || [ "$mode" = lu ]; then   # the list must not wrap within a measured run (else tokens repeat)
    local wraps; wraps=$(wraps_in "$out")
    R[$name,$round,wraps]=$wraps
    if [ "$wraps" != 0 ]; then
      R[$name,$round,err]="${R[$name,$round,err]}token list wrapped ${wraps}x (raise BENCH_TOKENS)"
      echo "bench: $name round $round: the $TOKENS-token list wrapped $wraps time(s): tokens recurred after $TOKENS others (the gateway's 10 000-entry LRU cannot hold them; raise BENCH_TOKENS for strictly distinct)"
    fi
  fi
  if [ -n "$non2xx$sockerr" ]; then
    ANY_ERRORS=1
    loud "$name round $round: wrk reported ERRORS: ${R[$name,$round,err]}"
    if [ "$mode" = lu ] && [ -n "$non2xx" ]; then
      loud "$name round $round: $non2xx requests were refused in a limited-use run: a REPLAY slipped in, or the store failed (see its stderr at the end)"
    fi
    if [ "$mode" = aa ] && [ -n "$non2xx" ]; then
      loud "$name round $round: $non2xx requests were REJECTED: the row is INVALID (a counter replayed or out of order, or the store failed; see its stderr at the end)"
    fi
  fi
}

wraps_in() { # WRK_OUTPUT: wrap-arounds summed over the "bench-tokens:" / "bench-appattest:" lines of tokens.lua / appattest.lua
  awk '/^bench-(tokens|appattest):/ { w += $(NF - 1) } END { print w + 0 }' <<<"$1"
}
# aa_store_check NAME ROUND REQUESTS: with sqlite3 on PATH, reads the devices' counters in the gateway's SQLite file: each
# measured run starts at counter AA_PER_WARM + 1, so the counters advanced by the assertions the store accepted; that
# must be wrk's completed requests (plus at most one in flight per device when wrk stopped).
aa_store_check() {
  command -v sqlite3 >/dev/null || return 0
  local accepted
  accepted=$(sqlite3 "$AA_DB" "SELECT COALESCE(SUM(counter - $AA_PER_WARM), 0) FROM keys WHERE counter > $AA_PER_WARM" 2>&1) \
    || { echo "bench: $1 round $2: reading the counters from $AA_DB failed: $accepted"; return 0; }
  R[$1,$2,stored]=$accepted
  if (( accepted < $3 || accepted > $3 + AA_DEVICES )); then
    ANY_ERRORS=1
    R[$1,$2,err]="${R[$1,$2,err]}store accepted $accepted assertions for $3 requests; "
    loud "$1 round $2: the store's counters advanced by $accepted for $3 completed requests: not one accepted assertion per request"
  fi
}

# h2load_run KIND SECONDS PORT: h2load on core 1 (where wrk runs), one thread, for SECONDS. KIND h1: --h1 -cCONNS -m1;
# h2c: h2c prior knowledge -cCONNS -m1; mux: h2c -cH2_MUX_CONNS -mH2_MUX_STREAMS; tls: https with ALPN h2 only (no
# fallback to http/1.1) -cCONNS -m1
h2load_run() {
  local kind=$1 secs=$2 url="http://127.0.0.1:$3/bench" c=$CONNS m=1 args=()
  case "$kind" in
    h1) args=(--h1) ;;
    h2c) args=(--no-tls-proto=h2c) ;;
    mux) args=(--no-tls-proto=h2c); c=$H2_MUX_CONNS; m=$H2_MUX_STREAMS ;;
    tls) args=(--npn-list=h2); url="https://127.0.0.1:$3/bench" ;;
  esac
  timeout $(( secs + 60 )) taskset -c 1 h2load -t1 -c"$c" -m"$m" -D "$secs" "${args[@]}" "$url"
}
h2load_field() { # OUTPUT LINE_PREFIX WORD: the number before WORD on h2load's "requests:" or "status codes:" line
  awk -v p="$2" -v w="$3" 'index($0, p) == 1 { for (i = 1; i < NF; i++) { k = $(i + 1); sub(/,$/, "", k); if (k == w) { print $i; exit } } }' <<<"$1"
}
# run_h2 NAME PORT PID ROUND KIND: a warm-up, then the measured h2load run; as run_one, CPU µs/req of PID over the
# requests h2load counted as succeeded. Failed/errored/timed-out requests, non-2xx answers or another application
# protocol than KIND asks for are errors (the row is INVALID).
run_h2() {
  local name=$1 port=$2 pid=$3 round=$4 kind=$5 out t0 t1 l0 l1 want rps ok failed errored tmo n3 n4 n5 bad err="" proto tlsv cipher
  case "$kind" in h1) want=http/1.1 ;; tls) want=h2 ;; *) want=h2c ;; esac
  out=$(h2load_run "$kind" "$WARMUP" "$port" 2>&1) || true
  if ! kill -0 "$pid" 2>/dev/null; then
    loud "$name (pid $pid) DIED during warm-up in round $round"; ANY_ERRORS=1; R[$name,$round,err]="died"; return 1
  fi
  t0=$(cpu_ticks "$pid"); l0=$(core_ticks 1)
  out=$(h2load_run "$kind" "$SECONDS_PER_RUN" "$port" 2>&1) || true
  l1=$(core_ticks 1)
  if ! t1=$(cpu_ticks "$pid" 2>/dev/null); then
    loud "$name (pid $pid) DIED during the measured run in round $round"; printf '%s\n' "$out" | tail -n 20
    ANY_ERRORS=1; R[$name,$round,err]="died"; return 1
  fi
  rps=$(awk -F', ' '/^finished in / { split($2, a, " "); print a[1]; exit }' <<<"$out")
  ok=$(h2load_field "$out" "requests:" succeeded); failed=$(h2load_field "$out" "requests:" failed)
  errored=$(h2load_field "$out" "requests:" errored); tmo=$(h2load_field "$out" "requests:" timeout)
  n3=$(h2load_field "$out" "status codes:" 3xx); n4=$(h2load_field "$out" "status codes:" 4xx); n5=$(h2load_field "$out" "status codes:" 5xx)
  proto=$(awk -F': ' '/^Application protocol:/ { print $2; exit }' <<<"$out")
  tlsv=$(awk -F': ' '/^TLS Protocol:/ { print $2; exit }' <<<"$out"); cipher=$(awk -F': ' '/^Cipher:/ { print $2; exit }' <<<"$out")
  if [ -z "$rps" ] || [ -z "$ok" ] || [ "$ok" = 0 ]; then
    loud "$name: h2load produced no successful request in round $round"; printf '%s\n' "$out" | grep -v '^progress:' | tail -n 25
    ANY_ERRORS=1; R[$name,$round,err]="no result${proto:+ (protocol $proto)}"; return 1
  fi
  bad=$(( ${failed:-0} + ${errored:-0} + ${tmo:-0} ))
  (( bad == 0 )) || err+="failed ${failed:-?}, errored ${errored:-?}, timeout ${tmo:-?}; "
  (( ${n3:-0} + ${n4:-0} + ${n5:-0} == 0 )) || err+="non-2xx ${n3:-0}/${n4:-0}/${n5:-0} (3xx/4xx/5xx); "
  [ "$proto" = "$want" ] || err+="protocol ${proto:-none}, not $want; "
  R[$name,$round,rps]=$rps; R[$name,$round,ok]=$ok; R[$name,$round,fail]=$bad
  R[$name,$round,cpu]=$(awk -v d=$(( t1 - t0 )) -v hz="$CLK_TCK" -v n="$ok" 'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
  R[$name,$round,cpus]=$(awk -v d=$(( t1 - t0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')
  R[$name,$round,mean]=$(to_us_h2 "$(awk '/^time for request:/ { print $6; exit }' <<<"$out")")
  R[$name,$round,max]=$(to_us_h2 "$(awk '/^time for request:/ { print $5; exit }' <<<"$out")")
  R[$name,$round,proto]="$proto${tlsv:+ $tlsv $cipher}"
  R[$name,$round,core1]=$(awk -v a="$l0" -v b="$l1" 'BEGIN { split(a, x, " "); split(b, y, " "); t = y[2] - x[2]
    if (t > 0) printf "%.0f", (y[1] - x[1]) * 100 / t }')
  R[$name,$round,err]=$err
  if [ -n "$err" ]; then ANY_ERRORS=1; loud "$name round $round: h2load reported ERRORS: $err the row is INVALID"; fi
}
core_ticks() { # CORE: "busy total" clock ticks of that core from /proc/stat (busy = all but idle and iowait)
  awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}
h2row() { # NAME ROUND
  local rps=${R[$1,$2,rps]:-FAILED} note=${R[$1,$2,err]:-none}
  if [ -n "${H2SKIP[$1]:-}" ]; then rps=skipped; note=${H2SKIP[$1]}; fi
  printf '| %-14s | %-21s | %10s | %8s | %8s | %10s | %7s | %7s | %9s | %6s | %-8s | %s\n' "$1" "${H2DESC[$1]}" "$rps" \
    "${R[$1,$2,mean]:--}" "${R[$1,$2,max]:--}" "${R[$1,$2,cpu]:--}" "${R[$1,$2,cpus]:--}" "${R[$1,$2,core1]:--}" \
    "${R[$1,$2,ok]:--}" "${R[$1,$2,fail]:--}" "${R[$1,$2,proto]:--}" "$note"
}
h2header() {
  printf '| %-14s | %-21s | %10s | %8s | %8s | %10s | %7s | %7s | %9s | %6s | %-8s | %s\n' row "h2load" "req/s" "mean us" "max us" \
    "CPU us/req" "CPU s" "core1 %" succeeded failed protocol errors
  printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n' ---------------- ----------------------- ------------ ---------- ---------- \
    ------------ --------- --------- ----------- -------- ---------- -------
}

row() { # NAME ROUND
  printf '| %-19s | %10s | %8s | %8s | %12s | %8s | %11s | %s\n' "$1" "${R[$1,$2,rps]:-FAILED}" "${R[$1,$2,p50]:--}" \
    "${R[$1,$2,p99]:--}" "${R[$1,$2,cpu]:--}" "${R[$1,$2,cpus]:--}" "${R[$1,$2,reqs]:--}" "${R[$1,$2,err]:-none}"
}
header() {
  printf '| %-19s | %10s | %8s | %8s | %12s | %8s | %11s | %s\n' proxy "req/s" "p50 us" "p99 us" "CPU us/req" "CPU s" requests "wrk errors"
  printf '|%s|%s|%s|%s|%s|%s|%s|%s\n' --------------------- ------------ ---------- ---------- -------------- ---------- ------------- -----------
}

# Rows: NAME:PORTVAR:PIDVAR:MODE. The order reverses every round.
ROWS=("nginx:NPORT:NG_PID:none" "attest-gateway:GPORT:GW_PID:none")
if [ "$RS256" = 1 ]; then
  ROWS+=("gw-rs256-distinct:VPORT:VG_PID:distinct" "gw-rs256-repeated:VPORT:VG_PID:repeated"
         "haproxy-distinct:HPORT:HA_PID:distinct" "haproxy-repeated:HPORT:HA_PID:repeated")
fi
if [ "$LU" = 1 ]; then ROWS+=("gw-lu-sqlite:LSPORT:LS_PID:lu" "gw-lu-redis:LRPORT:LR_PID:lu"); fi
if [ "$AA" = 1 ]; then ROWS+=("gw-appattest-sqlite:AAPORT:AA_PID:aa"); fi
NAMES=(); for r in "${ROWS[@]}"; do NAMES+=("${r%%:*}"); done
# HTTP/2 rows (mode h2-KIND, see h2load_run), in their own table; a gateway row whose protocol failed the sanity
# check is listed as skipped.
H2NAMES=(); declare -A H2DESC H2SKIP
h2add() { # NAME PORTVAR PIDVAR KIND DESCRIPTION [SKIP_REASON]
  H2NAMES+=("$1"); H2DESC[$1]=$5
  if [ -n "${6:-}" ]; then H2SKIP[$1]=$6; else ROWS+=("$1:$2:$3:h2-$4"); fi
}
if [ "$H2" = 1 ]; then
  no_h2c=""; [ "$GW_H2C" = 1 ] || no_h2c="gateway did not answer h2c (sanity)"
  no_tls=""; [ "$GW_H2TLS" = 1 ] || no_tls="gateway did not answer h2 over TLS (sanity)"
  h2add gw-h1-h2load GPORT GW_PID h1 "--h1 -c$CONNS -m1"
  h2add gw-h2c G2PORT G2_PID h2c "h2c -c$CONNS -m1" "$no_h2c"
  h2add nginx-h2c N2PORT N2_PID h2c "h2c -c$CONNS -m1"
  h2add gw-h2c-mux G2PORT G2_PID mux "h2c -c$H2_MUX_CONNS -m$H2_MUX_STREAMS" "$no_h2c"
  h2add nginx-h2c-mux N2PORT N2_PID mux "h2c -c$H2_MUX_CONNS -m$H2_MUX_STREAMS"
  if [ "$H2_TLS" = 1 ]; then
    h2add gw-h2-tls G2TPORT G2_PID tls "h2 TLS -c$CONNS -m1" "$no_tls"
    h2add nginx-h2-tls N2TPORT N2_PID tls "h2 TLS -c$CONNS -m1"
  fi
fi

ensure_running() { # restart a proxy that died in an earlier run (reported there)
  if ! kill -0 "$GW_PID" 2>/dev/null; then
    echo "--- attest-gateway stderr (last 30 lines):"; tail -n 30 "$TMP/gateway.err" || true
    echo "bench: restarting attest-gateway"; start_gateway
  fi
  if [ "$RS256" = 1 ] && ! kill -0 "$VG_PID" 2>/dev/null; then
    echo "--- attest-gateway (rs256) stderr (last 30 lines):"; tail -n 30 "$TMP/gateway-rs256.err" || true
    echo "bench: restarting attest-gateway (rs256)"; start_gateway rs256
  fi
  if [ "$RS256" = 1 ] && ! kill -0 "$HA_PID" 2>/dev/null; then
    echo "--- haproxy output (last 30 lines):"; tail -n 30 "$TMP/haproxy/haproxy.log" || true
    echo "bench: restarting haproxy"; start_haproxy
  fi
  if [ "$H2" = 1 ] && ! kill -0 "$G2_PID" 2>/dev/null; then
    echo "--- attest-gateway (http2) stderr (last 30 lines):"; tail -n 30 "$TMP/gateway-h2.err" || true
    echo "bench: restarting attest-gateway (http2)"; start_gateway h2
  fi
}

for round in $(seq 1 "$ROUNDS"); do
  order=()
  if (( round % 2 == 1 )); then order=("${ROWS[@]}"); else for (( k=${#ROWS[@]}-1; k>=0; k-- )); do order+=("${ROWS[$k]}"); done; fi
  for r in "${order[@]}"; do
    ensure_running
    IFS=: read -r name portvar pidvar mode <<<"$r"
    side=""
    case "$name" in   # a token is accepted once: fresh state before every measured run of a limited-use row
      gw-lu-sqlite) start_lu sqlite "r$round" ;;
      gw-lu-redis) start_lu redis "r$round"; side=$RS_PID ;;
      gw-appattest-sqlite) start_aa "r$round" "$TMP"/aa/dev-[0-9]* ;;   # a counter is accepted once: fresh store too
    esac
    case "$mode" in
      h2-*) run_h2 "$name" "${!portvar}" "${!pidvar}" "$round" "${mode#h2-}" || true ;;
      *) run_one "$name" "${!portvar}" "${!pidvar}" "$round" "$mode" $side || true ;;
    esac
  done
  echo "-- round $round (order: $(for r in "${order[@]}"; do printf '%s ' "${r%%:*}"; done))"
  header; for name in "${NAMES[@]}"; do row "$name" "$round"; done
  if [ "$H2" = 1 ]; then echo "   HTTP/2 rows (h2load; mean/max: h2load's time for request; core1 %: busy share of core 1, h2load + upstream):"; h2header; for name in "${H2NAMES[@]}"; do h2row "$name" "$round"; done; fi
  if [ "$LU" = 1 ]; then echo "   redis-server CPU us/req during gw-lu-redis: ${R[gw-lu-redis,$round,scpu]:--}"; fi
  if [ "$AA" = 1 ]; then echo "   assertions the SQLite store accepted during gw-appattest-sqlite: ${R[gw-appattest-sqlite,$round,stored]:--} (needs sqlite3 on PATH)"; fi
  echo
done

median() { # NAME METRIC -> median over the rounds that produced a value
  local name=$1 metric=$2 r
  for r in $(seq 1 "$ROUNDS"); do if [ -n "${R[$name,$r,$metric]:-}" ]; then echo "${R[$name,$r,$metric]}"; fi; done \
    | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for name in "${NAMES[@]}"; do
  for m in rps p50 p99 cpu cpus reqs scpu; do R[$name,median,$m]=$(median "$name" "$m"); done
  R[$name,median,err]=""
done
if [ "$AA" = 1 ]; then   # one rejected request (a replay or a store failure) invalidates the App Attest row
  for r in $(seq 1 "$ROUNDS"); do
    if [ -z "${R[gw-appattest-sqlite,$r,rps]:-}" ] || [ -n "${R[gw-appattest-sqlite,$r,err]:-}" ]; then
      R[gw-appattest-sqlite,median,err]="INVALID: errors in round $r (see above)"
    fi
  done
fi
for name in "${H2NAMES[@]}"; do   # a run with failures, non-2xx or the wrong protocol invalidates the row
  for m in rps mean max cpu cpus core1 ok; do R[$name,median,$m]=$(median "$name" "$m"); done
  R[$name,median,err]=""; R[$name,median,fail]=""
  for r in $(seq 1 "$ROUNDS"); do   # failed: the sum over the rounds, not a median
    [ -n "${R[$name,$r,fail]:-}" ] && R[$name,median,fail]=$(( ${R[$name,median,fail]:-0} + R[$name,$r,fail] ))
    [ -n "${R[$name,$r,proto]:-}" ] && R[$name,median,proto]=${R[$name,$r,proto]}
    if [ -z "${H2SKIP[$name]:-}" ] && { [ -z "${R[$name,$r,rps]:-}" ] || [ -n "${R[$name,$r,err]:-}" ]; }; then
      R[$name,median,err]="INVALID: errors in round $r (see above)"
    fi
  done
done
echo "-- median of $ROUNDS rounds"
header; for name in "${NAMES[@]}"; do row "$name" median; done
if [ "$H2" = 1 ]; then echo "   HTTP/2 rows (h2load; failed: summed over the rounds):"; h2header; for name in "${H2NAMES[@]}"; do h2row "$name" median; done; fi
if [ "$LU" = 1 ]; then echo "   redis-server CPU us/req during gw-lu-redis: ${R[gw-lu-redis,median,scpu]:--}"; fi
echo

# ratio LABEL NUM DEN TARGET CMP(ge|le): prints NUM ÷ DEN against the target; "unavailable" when a side is missing
ratio() {
  local label=$1 a=${R[$2,median,$3]:-} b=${R[$4,median,$5]:-} target=$6 cmp=$7
  if [ -z "$a" ] || [ -z "$b" ]; then echo "$label = unavailable (no result)"; return; fi
  awk -v l="$label" -v a="$a" -v b="$b" -v t="$target" -v c="$cmp" 'BEGIN {
    r = a / b
    if (c == "ge") printf "%s = %.2f  (target ≥ %s: %s)\n", l, r, t, (r >= t ? "MET" : "MISSED")
    else if (c == "le") printf "%s = %.2f  (target ≤ %s: %s)\n", l, r, t, (r <= t ? "MET" : "MISSED")
    else printf "%s = %.2f\n", l, r }'
}
echo "-- plain proxy path (no verification)"
ratio "CPU µs/req  attest-gateway ÷ nginx            " attest-gateway cpu nginx cpu "$TARGET_CPU_RATIO" le
ratio "req/s       attest-gateway ÷ nginx            " attest-gateway rps nginx rps "$TARGET_RPS_RATIO" ge
if [ "$RS256" = 1 ]; then
  echo "-- RS256 App Check tokens"
  ratio "req/s       gw-rs256-distinct ÷ haproxy-distinct" gw-rs256-distinct rps haproxy-distinct rps "$TARGET_DISTINCT" ge
  ratio "CPU µs/req  gw-rs256-distinct ÷ haproxy-distinct" gw-rs256-distinct cpu haproxy-distinct cpu - info
  ratio "req/s       gw-rs256-repeated ÷ nginx           " gw-rs256-repeated rps nginx rps "$TARGET_REPEATED" ge
  ratio "CPU µs/req  gw-rs256-repeated ÷ nginx           " gw-rs256-repeated cpu nginx cpu - info
  ratio "req/s       gw-rs256-repeated ÷ haproxy-repeated" gw-rs256-repeated rps haproxy-repeated rps - info
  ratio "CPU µs/req  gw-rs256-repeated ÷ haproxy-repeated" gw-rs256-repeated cpu haproxy-repeated cpu - info
  # Verification cost per request over the plain proxy path of the same program.
  awk -v gd="${R[gw-rs256-distinct,median,cpu]:-}" -v gr="${R[gw-rs256-repeated,median,cpu]:-}" -v g="${R[attest-gateway,median,cpu]:-}" \
      -v hd="${R[haproxy-distinct,median,cpu]:-}" -v n="${R[nginx,median,cpu]:-}" 'BEGIN {
    if (gd != "" && g != "") printf "CPU µs/req added by verification: gateway distinct %+.2f, gateway repeated %+.2f (vs attest-gateway)", gd - g, gr - g
    if (hd != "" && n != "") printf "; haproxy distinct %+.2f (vs nginx proxy_pass)", hd - n
    print "" }'
fi
if [ "$LU" = 1 ]; then
  echo "-- limited use (each jti consumed once; SQLite: one WAL commit per request, Redis: one Lua script round trip)"
  ratio "req/s       gw-lu-sqlite ÷ gw-rs256-distinct " gw-lu-sqlite rps gw-rs256-distinct rps "$TARGET_LU_SQLITE" ge
  ratio "CPU µs/req  gw-lu-sqlite ÷ gw-rs256-distinct " gw-lu-sqlite cpu gw-rs256-distinct cpu - info
  ratio "req/s       gw-lu-redis ÷ gw-rs256-distinct  " gw-lu-redis rps gw-rs256-distinct rps - info
  ratio "CPU µs/req  gw-lu-redis ÷ gw-rs256-distinct  " gw-lu-redis cpu gw-rs256-distinct cpu - info
  awk -v s="${R[gw-lu-sqlite,median,cpu]:-}" -v r="${R[gw-lu-redis,median,cpu]:-}" -v rs="${R[gw-lu-redis,median,scpu]:-}" \
      -v d="${R[gw-rs256-distinct,median,cpu]:-}" 'BEGIN {
    if (d == "") exit
    if (s != "") printf "CPU µs/req added by the store (vs gw-rs256-distinct): sqlite %+.2f", s - d
    if (r != "") printf "; redis %+.2f in the gateway", r - d
    if (r != "" && rs != "") printf " + %.2f in redis-server (core 1, not in the gateway figure) = %+.2f", rs, r - d + rs
    print "" }'
fi
if [ "$AA" = 1 ]; then
  echo "-- App Attest assertions (binding: request; ECDSA P-256 verify + SQLite counter compare-and-set per request; wrk -c$AA_DEVICES, the others -c$CONNS)"
  ratio "req/s       gw-appattest-sqlite ÷ attest-gateway   " gw-appattest-sqlite rps attest-gateway rps - info
  ratio "CPU µs/req  gw-appattest-sqlite ÷ attest-gateway   " gw-appattest-sqlite cpu attest-gateway cpu - info
  if [ "$RS256" = 1 ]; then
    ratio "req/s       gw-appattest-sqlite ÷ gw-rs256-distinct" gw-appattest-sqlite rps gw-rs256-distinct rps - info
    ratio "CPU µs/req  gw-appattest-sqlite ÷ gw-rs256-distinct" gw-appattest-sqlite cpu gw-rs256-distinct cpu - info
  else
    echo "req/s       gw-appattest-sqlite ÷ gw-rs256-distinct = n/a (BENCH_RS256=0)"
    echo "CPU µs/req  gw-appattest-sqlite ÷ gw-rs256-distinct = n/a (BENCH_RS256=0)"
  fi
  awk -v a="${R[gw-appattest-sqlite,median,cpu]:-}" -v g="${R[attest-gateway,median,cpu]:-}" -v d="${R[gw-rs256-distinct,median,cpu]:-}" 'BEGIN {
    if (a == "" || g == "") exit
    printf "CPU µs/req added by App Attest (vs attest-gateway): %+.2f", a - g
    if (d != "") printf "; %+.2f more than RS256 App Check (vs gw-rs256-distinct)", a - d
    print "" }'
  if [ -n "${R[gw-appattest-sqlite,median,err]}" ]; then echo "gw-appattest-sqlite: ${R[gw-appattest-sqlite,median,err]}: its figures do not count"; fi
fi
if [ "$H2" = 1 ]; then
  # h2ratio LABEL NUM DEN METRIC: as ratio (information: no HTTP/2 target is set), flagged when a side is INVALID
  h2ratio() {
    local flag=""
    [ -z "${R[$2,median,err]:-}" ] || flag+=" [$2 INVALID]"
    [ -z "${R[$3,median,err]:-}" ] || flag+=" [$3 INVALID]"
    printf '%s%s\n' "$(ratio "$1" "$2" "$4" "$3" "$4" - info)" "$flag"
  }
  echo "-- HTTP/2 (h2load for every row here; no HTTP/2 target is set: information)"
  h2ratio "req/s       gw-h2c ÷ nginx-h2c              " gw-h2c nginx-h2c rps
  h2ratio "CPU µs/req  gw-h2c ÷ nginx-h2c              " gw-h2c nginx-h2c cpu
  h2ratio "req/s       gw-h2c-mux ÷ nginx-h2c-mux      " gw-h2c-mux nginx-h2c-mux rps
  h2ratio "CPU µs/req  gw-h2c-mux ÷ nginx-h2c-mux      " gw-h2c-mux nginx-h2c-mux cpu
  h2ratio "req/s       gw-h2c ÷ gw-h1-h2load           " gw-h2c gw-h1-h2load rps
  h2ratio "CPU µs/req  gw-h2c ÷ gw-h1-h2load           " gw-h2c gw-h1-h2load cpu
  h2ratio "req/s       gw-h2c-mux ÷ gw-h1-h2load       " gw-h2c-mux gw-h1-h2load rps
  h2ratio "CPU µs/req  gw-h2c-mux ÷ gw-h1-h2load       " gw-h2c-mux gw-h1-h2load cpu
  if [ "$H2_TLS" = 1 ]; then
    h2ratio "req/s       gw-h2-tls ÷ nginx-h2-tls        " gw-h2-tls nginx-h2-tls rps
    h2ratio "CPU µs/req  gw-h2-tls ÷ nginx-h2-tls        " gw-h2-tls nginx-h2-tls cpu
  fi
  # the same process under both load generators: how far h2load's and wrk's figures differ
  h2ratio "CPU µs/req  gw-h1-h2load ÷ attest-gateway (wrk)" gw-h1-h2load attest-gateway cpu
  for name in "${H2NAMES[@]}"; do
    if [ -n "${H2SKIP[$name]:-}" ]; then echo "$name: skipped: ${H2SKIP[$name]}"
    elif [ -n "${R[$name,median,err]}" ]; then echo "$name: ${R[$name,median,err]}: its figures do not count"; fi
  done
fi
if [ "$ANY_ERRORS" -ne 0 ]; then
  loud "SOME RUNS HAD ERRORS (see above): their figures are not comparable"
  for f in gateway.err gateway-rs256.err haproxy/haproxy.log lu/gw-sqlite.err lu/gw-redis.err redis/redis.log aa/gw.err \
           gateway-h2.err nginxh2/err.log; do
    if [ -s "$TMP/$f" ]; then echo "--- $f (last 30 lines):"; tail -n 30 "$TMP/$f"; fi
  done
fi
exit 0
