#!/usr/bin/env bash
# Benchmarks attest-gateway as an HTTP/1.1 reverse proxy against nginx proxy_pass, on loopback.
#
#   upstream : nginx `return 200 "<50-byte body>"`, 1 worker, pinned to core 1
#   proxy    : attest-gateway (--workers 1, access log on, to /dev/null)   | nginx proxy_pass (1 worker, keepalive 256)
#              pinned to core 0, measured one after the other (never at the same time)
#   load     : wrk -t1 -c64 --latency, pinned to core 1 (shared with the upstream)
#
# For each proxy: requests/s, p50/p99 latency, and CPU µs per request = Δ(utime+stime) of the proxy process
# (/proc/<pid>/stat, all threads) / requests completed. CPU µs/req is the stable figure on a shared machine.
#
# Environment: GATEWAY_BIN (default .build/release/attest-gateway), NGINX_BIN (default: nginx on PATH or
# /usr/sbin/nginx), BENCH_SECONDS (10), BENCH_ROUNDS (3), BENCH_WARMUP_SECONDS (2), BENCH_CONNECTIONS (64).
# Exits non-zero only when something fails to start; missing the targets is reported, never asserted.
set -euo pipefail

GATEWAY_BIN=${GATEWAY_BIN:-.build/release/attest-gateway}
NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
SECONDS_PER_RUN=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=${BENCH_WARMUP_SECONDS:-2}
CONNS=${BENCH_CONNECTIONS:-64}
TARGET_CPU_RATIO=0.8   # gateway CPU µs/req ÷ nginx CPU µs/req must be ≤ this
TARGET_RPS_RATIO=1.2   # gateway req/s ÷ nginx req/s must be ≥ this

die() { echo "bench: ERROR: $*" >&2; exit 1; }
loud() { echo; echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; echo "!!! $*"; echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"; echo; }

for tool in wrk taskset getconf awk sort timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (run: scripts/install-deps.sh bench)"
done
[ -x "$NGINX_BIN" ] || die "nginx not found at $NGINX_BIN (run: scripts/install-deps.sh bench)"
[ -x "$GATEWAY_BIN" ] || die "gateway binary $GATEWAY_BIN not found or not executable (run: make build)"
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
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 30000 ))
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

UPORT=$(free_port); GPORT=$(free_port); NPORT=$(free_port)
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

start_nginx() { # NAME DIR CPU PORT -> sets STARTED_PID
  "$NGINX_BIN" -t -q -e "$2/err.log" -p "$2" -c "$2/nginx.conf" >"$2/stdout.log" 2>&1 \
    || { cat "$2/stdout.log" "$2/err.log" >&2 2>/dev/null || true; die "$1 nginx config test failed"; }
  taskset -c "$3" "$NGINX_BIN" -e "$2/err.log" -p "$2" -c "$2/nginx.conf" >"$2/stdout.log" 2>&1 &
  STARTED_PID=$!; PIDS+=("$STARTED_PID")
  wait_port "$4" "$STARTED_PID" "$1" "$2/err.log"
}
GW_PID=""
start_gateway() {
  taskset -c 0 "$GATEWAY_BIN" serve --config "$TMP/gateway.yml" --workers 1 >/dev/null 2>"$TMP/gateway.err" &
  GW_PID=$!; PIDS+=("$GW_PID")
  wait_port "$GPORT" "$GW_PID" "attest-gateway" "$TMP/gateway.err"
}

start_nginx "upstream" "$TMP/upstream" 1 "$UPORT"; UP_PID=$STARTED_PID
start_nginx "nginx proxy" "$TMP/nginxproxy" 0 "$NPORT"; NG_PID=$STARTED_PID
start_gateway

# Sanity: one request through each proxy must return the upstream body.
for p in "$GPORT" "$NPORT"; do
  exec 3<>"/dev/tcp/127.0.0.1/$p"
  printf 'GET /bench HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
  reply=$(timeout 5 cat <&3 || true); exec 3<&- 3>&-
  if [[ "$reply" != "HTTP/1.1 200"* || "$reply" != *"50-byte body ok."* ]]; then
    loud "sanity request through 127.0.0.1:$p did not return the upstream's 200 + body"
    printf '%s\n' "$reply" | head -n 20
    die "proxy on port $p does not proxy correctly"
  fi
done

cpu_ticks() { # utime+stime of PID (all threads), in clock ticks; fields 14 and 15, counted after the ')' of comm
  local s; s=$(cat "/proc/$1/stat") || return 1
  s=${s##*) }
  awk '{ print $12 + $13 }' <<<"$s"
}
to_us() { # wrk latency value (e.g. 812.00us, 1.23ms, 1.01s) -> µs
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) m = 1; else if (v ~ /ms$/) m = 1000; else if (v ~ /m$/) m = 60e6; else if (v ~ /s$/) m = 1e6; else m = 1; printf "%.1f", n * m }'
}

WRK_CMD="taskset -c 1 wrk -t1 -c$CONNS -d${SECONDS_PER_RUN}s --latency http://127.0.0.1:<port>/bench"
echo "== attest-gateway benchmark"
echo "machine : $(nproc) cores, kernel $(uname -r), CPU $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
echo "gateway : $GATEWAY_BIN (pid $GW_PID, core 0, --workers 1, access log -> /dev/null)"
echo "nginx   : $("$NGINX_BIN" -v 2>&1 | sed 's/.*: //') proxy_pass (pid $NG_PID, core 0); upstream nginx return 200 (pid $UP_PID, core 1)"
echo "load    : $WRK_CMD   (warm-up ${WARMUP}s before each run, $ROUNDS rounds, order alternates)"
echo "command : GATEWAY_BIN=$GATEWAY_BIN BENCH_SECONDS=$SECONDS_PER_RUN BENCH_ROUNDS=$ROUNDS $0"
echo

ANY_ERRORS=0
declare -A R   # R[name,round,metric]
# run_one NAME PORT PID ROUND
run_one() {
  local name=$1 port=$2 pid=$3 round=$4 out t0 t1 reqs rps p50 p99 non2xx sockerr cpu
  timeout $(( WARMUP + 30 )) taskset -c 1 wrk -t1 -c"$CONNS" -d"${WARMUP}s" "http://127.0.0.1:$port/bench" >/dev/null 2>&1 || true
  if ! kill -0 "$pid" 2>/dev/null; then
    loud "$name (pid $pid) DIED during warm-up in round $round"; ANY_ERRORS=1; return 1
  fi
  t0=$(cpu_ticks "$pid")
  out=$(timeout $(( SECONDS_PER_RUN + 30 )) taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECONDS_PER_RUN}s" --latency "http://127.0.0.1:$port/bench" 2>&1) || true
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
  if [ -n "$non2xx$sockerr" ]; then
    ANY_ERRORS=1
    loud "$name round $round: wrk reported ERRORS: ${R[$name,$round,err]}"
  fi
}

row() { # NAME ROUND
  printf '| %-14s | %10s | %8s | %8s | %12s | %8s | %11s | %s\n' "$1" "${R[$1,$2,rps]:-FAILED}" "${R[$1,$2,p50]:--}" \
    "${R[$1,$2,p99]:--}" "${R[$1,$2,cpu]:--}" "${R[$1,$2,cpus]:--}" "${R[$1,$2,reqs]:--}" "${R[$1,$2,err]:-none}"
}
header() {
  printf '| %-14s | %10s | %8s | %8s | %12s | %8s | %11s | %s\n' proxy "req/s" "p50 us" "p99 us" "CPU us/req" "CPU s" requests "wrk errors"
  printf '|%s|%s|%s|%s|%s|%s|%s|%s\n' ---------------- ------------ ---------- ---------- -------------- ---------- ------------- -----------
}

for round in $(seq 1 "$ROUNDS"); do
  if ! kill -0 "$GW_PID" 2>/dev/null; then
    echo "--- attest-gateway stderr (last 30 lines):"; tail -n 30 "$TMP/gateway.err" || true
    echo "bench: restarting attest-gateway for round $round"; start_gateway
  fi
  if (( round % 2 == 1 )); then order="gateway nginx"; else order="nginx gateway"; fi
  for who in $order; do
    if [ "$who" = gateway ]; then run_one attest-gateway "$GPORT" "$GW_PID" "$round" || true
    else run_one nginx "$NPORT" "$NG_PID" "$round" || true; fi
  done
  echo "-- round $round (order: $order)"
  header; row attest-gateway "$round"; row nginx "$round"; echo
done

median() { # NAME METRIC -> median over the rounds that produced a value
  local name=$1 metric=$2 r
  for r in $(seq 1 "$ROUNDS"); do [ -n "${R[$name,$r,$metric]:-}" ] && echo "${R[$name,$r,$metric]}"; done \
    | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit; if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for name in attest-gateway nginx; do
  for m in rps p50 p99 cpu cpus reqs; do R[$name,median,$m]=$(median "$name" "$m"); done
  R[$name,median,err]=""
done
echo "-- median of $ROUNDS rounds"
header; row attest-gateway median; row nginx median; echo

g_cpu=${R[attest-gateway,median,cpu]}; n_cpu=${R[nginx,median,cpu]}
g_rps=${R[attest-gateway,median,rps]}; n_rps=${R[nginx,median,rps]}
if [ -n "$g_cpu" ] && [ -n "$n_cpu" ] && [ -n "$g_rps" ] && [ -n "$n_rps" ]; then
  awk -v gc="$g_cpu" -v nc="$n_cpu" -v gr="$g_rps" -v nr="$n_rps" -v tc="$TARGET_CPU_RATIO" -v tr="$TARGET_RPS_RATIO" 'BEGIN {
    c = gc / nc; r = gr / nr
    printf "CPU µs/req  gateway ÷ nginx = %.2f  (target ≤ %.1f: %s)\n", c, tc, (c <= tc ? "MET" : "MISSED")
    printf "req/s       gateway ÷ nginx = %.2f  (target ≥ %.1f: %s)\n", r, tr, (r >= tr ? "MET" : "MISSED")
  }'
else
  loud "ratios unavailable: at least one proxy produced no result in every round"
fi
if [ "$ANY_ERRORS" -ne 0 ]; then
  loud "SOME RUNS HAD ERRORS (see above): their figures are not comparable"
  if [ -s "$TMP/gateway.err" ]; then echo "--- attest-gateway stderr (last 30 lines):"; tail -n 30 "$TMP/gateway.err"; fi
fi
exit 0
