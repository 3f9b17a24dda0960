#!/usr/bin/env bash
# Fuzzes the parsers with libFuzzer (see docs/hardening.md): builds GatewayFuzz with -sanitize=fuzzer,address and
# -DFUZZING into its own scratch path (.build/fuzz, so normal builds are never disturbed), then runs each target
# for a bounded time on a scratch copy of its seed corpus (Tests/Fuzz/Corpus/<target>/ is never grown).
#
# Per target it prints executions, exec/s, the corpus size (seed files → files at the end) and any crash file;
# it exits non-zero if any target crashed (a trap, a sanitizer report, a leak, a timeout or running out of memory).
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 60), libFuzzer's -max_total_time
#   FUZZ_TARGETS   targets to run, space-separated (default: all nine: http1-request jose cbor-appattest
#                  config-yaml receipt http2-session request-target h2-request-head play-integrity)
#   FUZZ_CONFIG    release (default: ~4x the executions of debug) or debug (adds the debug-only exclusivity checks)
#   FUZZ_ARGS      extra libFuzzer flags, e.g. "-jobs=2 -workers=2" or "-seed=1"
#   FUZZ_WORKDIR   where the working corpora, crash files and logs go (default .build/fuzz/runs/<target>/)
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-http1-request jose cbor-appattest config-yaml receipt http2-session request-target h2-request-head play-integrity}
CONFIG=${FUZZ_CONFIG:-release}
SCRATCH=.build/fuzz
WORKDIR=${FUZZ_WORKDIR:-$SCRATCH/runs}
read -r -a EXTRA <<<"${FUZZ_ARGS:-}"

mkdir -p "$SCRATCH"
echo "fuzz: building GatewayFuzz ($CONFIG, -sanitize=fuzzer,address) in $SCRATCH"
# ld.gold warns about every ASan check symbol it cannot export; those lines are noise, anything else is shown.
if ! $SWIFT build -c "$CONFIG" --scratch-path "$SCRATCH" --product GatewayFuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING >"$SCRATCH/build.log" 2>&1; then
  grep -v "Cannot export local symbol" "$SCRATCH/build.log"
  echo "fuzz: build failed" >&2
  exit 2
fi
BIN=$SCRATCH/$CONFIG/GatewayFuzz

# A Swift trap must reach libFuzzer's signal handler: the Swift runtime's own backtracer would catch it first and
# trip AddressSanitizer while reading memory. For a Swift backtrace, replay the crash file without libFuzzer:
#   swift run GatewayFuzz --target=NAME FILE
export SWIFT_BACKTRACE=enable=no

failed=()
summary=()
for target in $TARGETS; do
  seeds=Tests/Fuzz/Corpus/$target
  if [[ ! -d $seeds ]]; then
    echo "fuzz: unknown target $target (no $seeds)" >&2
    exit 2
  fi
  run=$WORKDIR/$target
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  cp "$seeds"/* "$run/corpus/"
  dict=()
  [[ -f Tests/Fuzz/Dictionaries/$target.dict ]] && dict=(-dict="Tests/Fuzz/Dictionaries/$target.dict")
  echo "fuzz: $target for ${SECONDS_PER_TARGET}s (log: $run/log)"
  "$BIN" --target="$target" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$run/artifacts/" "${dict[@]}" "${EXTRA[@]}" "$run/corpus" >"$run/log" 2>&1
  status=$?

  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$run/log" | tail -1)
  rate=$(awk '/stat::average_exec_per_sec/ {print $2}' "$run/log" | tail -1)
  seeds_count=$(find "$seeds" -maxdepth 1 -type f | wc -l)
  final_count=$(find "$run/corpus" -maxdepth 1 -type f | wc -l)
  mapfile -t crashes < <(find "$run/artifacts" -type f | sort)
  result=ok
  if ((status != 0 || ${#crashes[@]} > 0)); then
    result="CRASH (exit $status)"
    failed+=("$target")
    echo "fuzz: $target crashed; the report:"
    # The first report in the log, without libFuzzer's dictionary dump.
    grep -v -E '^"|^###### |^#[0-9]+ ' "$run/log" | grep -A60 -m1 -E 'Fatal error|Precondition failed|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|==ERROR' | head -80
    for file in "${crashes[@]}"; do echo "fuzz: crash file $file"; done
  fi
  summary+=("$(printf '%-16s %12s %8s %8s → %-6s %s' "$target" "${execs:-?}" "${rate:-?}" "$seeds_count" "$final_count" "$result")")
done

echo
printf '%-16s %12s %8s %17s %s\n' target executions exec/s "corpus files" result
for line in "${summary[@]}"; do echo "$line"; done
if ((${#failed[@]} > 0)); then
  echo "fuzz: crashed: ${failed[*]} — minimise with '$BIN --target=NAME -minimize_crash=1 -runs=10000 FILE'," \
    "then save the input under Tests/Fuzz/Regressions/NAME/ (see docs/hardening.md)" >&2
  exit 1
fi
