#!/usr/bin/env bash
# Soak test (issue 9, scope 5): a bounded mixed load against a real gateway for SOAK_SECONDS (default 600), watching
# its RSS, file descriptors and threads for growth. What `make soak` runs; the work is in scripts/soak/soak.py.
#
#   upstream `attest-gateway-dev echo`, App Check issuer `attest-gateway-dev issuer`, state SQLite (SOAK_STATE=redis:
#   a redis-server without persistence), the gateway with an admin listener, its client listener `http2: true` (h2c with
#   prior knowledge beside HTTP/1.1; without when SOAK_H2_CONNECTIONS=0), and routes for App Check, limited-use
#   App Check, App Attest (simulated devices: `attest-gateway-dev appattest ca|attest|assert`), no verification,
#   aborted clients.
#   Load: accepted, rejected (missing / expired / forged tokens), replayed (limited-use token again, App Attest
#   assertion again) and aborted requests on HTTP/1.1 keep-alive and one-request connections and on long-lived h2c
#   connections (Python `h2`; up to SOAK_H2_STREAMS streams in flight, aborted = stream reset by the client with
#   RST_STREAM CANCEL after its HEADERS), paced together to SOAK_RATE.
#
# Environment (all optional):
#   SOAK_SECONDS (600)        load in all, warm-up included     SOAK_WARMUP_SECONDS (60)   load before the baseline
#   SOAK_IDLE_SECONDS (35)    quiet before each checkpoint      SOAK_MAX_REQUESTS (1000000) stops the load early
#   SOAK_RATE (400)           requests/s, all connections       SOAK_CONNECTIONS (24)      HTTP/1.1 client threads
#   SOAK_H2_CONNECTIONS (4)   h2c client connections (0: none)  SOAK_H2_STREAMS (8)        h2 streams in flight, most
#   SOAK_STATE (sqlite)       sqlite | redis                    SOAK_SAMPLE_SECONDS (10)   RSS/FD/threads sampling
#   SOAK_RSS_SLACK_MIB (5)    allowed RSS growth, baseline→end  SOAK_FD_SLACK (0)          allowed FD growth
#   SOAK_GATEWAY_WORKERS (2)  serve --workers                   SOAK_TOKEN_CACHE (500)     verified_token_cache_size
#   SOAK_SEED (1)             request mix                       SOAK_OUT (.build/soak/<time>) samples.csv, logs, summary
#   GATEWAY_BIN (.build/release/attest-gateway)          GATEWAY_DEV_BIN (attest-gateway-dev beside GATEWAY_BIN)
# Exit 0: pass; 1: growth beyond the rule, an unexpected answer or a count mismatch; 2: something did not start.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
export GATEWAY_BIN=${GATEWAY_BIN:-$REPO/.build/release/attest-gateway}
export GATEWAY_DEV_BIN=${GATEWAY_DEV_BIN:-$(dirname "$GATEWAY_BIN")/attest-gateway-dev}

die() { echo "soak: ERROR: $*" >&2; exit 2; }
[ -x "$GATEWAY_BIN" ] || die "gateway binary $GATEWAY_BIN not found or not executable (run: make build)"
[ -x "$GATEWAY_DEV_BIN" ] || die "dev tools binary $GATEWAY_DEV_BIN not found or not executable (run: make build)"
command -v python3 >/dev/null || die "python3 not found (run: scripts/install-deps.sh soak)"
[ -d /proc/self/fd ] || die "needs Linux /proc (VmRSS, fd/)"
if [ "${SOAK_STATE:-sqlite}" = redis ]; then
  command -v "${REDIS_SERVER:-redis-server}" >/dev/null || die "redis-server not found (run: scripts/install-deps.sh soak)"
fi
exec python3 "$HERE/soak/soak.py"
