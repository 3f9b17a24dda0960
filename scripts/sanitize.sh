#!/usr/bin/env bash
# Runs the tests under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer (see docs/hardening.md "Sanitizers").
#
# Per sanitizer: builds everything with `--sanitize=…` into its own scratch path (.build/asan, .build/tsan, so normal
# builds are never disturbed), runs `swift test` on it, then the end-to-end suite against the sanitizer-built
# `attest-gateway` and `attest-gateway-dev` (every process the suite starts: serve, the CLI; dev issuer, dev echo,
# the simulated device). Sanitizer reports go to files (log_path), which this script counts; logs and reports stay
# in .build/<asan|tsan>/sanitize/.
# Prints a summary (tests passed, reports found, suppressions used, time taken) and exits non-zero on any sanitizer
# report or test failure (2 if a build fails).
#
# Environment:
#   SANITIZERS       which, in order (default "address thread")
#   SANITIZE_E2E     1 (default): also the end-to-end suite; 0: `swift test` only
#   SANITIZE_E2E_ARGS  the pytest selection (default: all of Tests/e2e except test_deploy.py, which checks the
#                    release binary's linked libraries against deploy/, not run-time behaviour)
#   SANITIZE_PROOFS  1 (default): first build and run Tests/Sanitizers/Proofs, which show why each LeakSanitizer
#                    suppression and AnnotatedMutex exist, and fail if an outcome has changed (a suppression may
#                    be stale)
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
SWIFTC=${SWIFTC:-swiftc}
SANITIZERS=${SANITIZERS:-address thread}
E2E=${SANITIZE_E2E:-1}
PROOFS=${SANITIZE_PROOFS:-1}
read -r -a E2E_ARGS <<<"${SANITIZE_E2E_ARGS:-Tests/e2e --ignore=Tests/e2e/test_deploy.py}"
LSAN_SUPPRESSIONS=$PWD/Tests/Sanitizers/lsan.supp
# A sanitizer report line (ASan/LSan errors, TSan warnings, either runtime's fatal errors).
REPORT='^==[0-9]+==ERROR: |^WARNING: ThreadSanitizer|^FATAL: ThreadSanitizer|ThreadSanitizer: CHECK failed'

# The Swift runtime's backtracer would catch a trap before the sanitizer and trip AddressSanitizer while reading
# memory (see scripts/fuzz.sh); the sanitizers print their own stacks.
export SWIFT_BACKTRACE=enable=no

failures=0
summary=()

seconds() { date +%s; }

# Filters ld.gold's warnings about every ASan check symbol it cannot export; shows the rest of a failed build.
show_build_log() { grep -v "Cannot export local symbol" "$1" | tail -40; }

# --- 1. Plain Synchronization.Mutex is invisible to ThreadSanitizer when contended (AnnotatedMutex explains).
plain=$(grep -rnE '(^|[^A-Za-z_])Mutex *[<(]' Sources Tests --include='*.swift' \
  | grep -v -e '^Sources/GatewayCore/AnnotatedMutex.swift:' -e '^Tests/Sanitizers/Proofs/' || true)
if [[ -n $plain ]]; then
  echo "sanitize: use AnnotatedMutex (GatewayCore) instead of Synchronization.Mutex, which ThreadSanitizer cannot" \
    "follow when contended (false race reports):" >&2
  echo "$plain" >&2
  failures=$((failures + 1))
fi

# --- 2. The premises of the suppressions and of AnnotatedMutex.
# Usage: proof SANITIZER SOURCE VARIANT EXPECTED (reported|clean)
proof_failures=0
proof() {
  local bin=.build/sanitize-proofs/$(basename "$2" .swift)-$1 out status found
  out=$(env -u ASAN_OPTIONS -u LSAN_OPTIONS -u TSAN_OPTIONS "$bin" "$3" 2>&1)
  status=$?
  found=clean
  if grep -qE "$REPORT" <<<"$out" || ((status != 0)); then found=reported; fi
  if [[ $found != "$4" ]]; then
    echo "sanitize: PREMISE CHANGED: $2 $3 is now $found (expected $4) — revisit Tests/Sanitizers/lsan.supp and" \
      "AnnotatedMutex (docs/hardening.md \"Sanitizers\")" >&2
    proof_failures=$((proof_failures + 1))
  fi
}
if [[ $PROOFS == 1 ]]; then
  mkdir -p .build/sanitize-proofs
  for sanitizer in $SANITIZERS; do
    case $sanitizer in
      address) source=Tests/Sanitizers/Proofs/LeakCheck.swift ;;
      thread) source=Tests/Sanitizers/Proofs/MutexUnderTSan.swift ;;
      *) continue ;;
    esac
    bin=.build/sanitize-proofs/$(basename "$source" .swift)-$sanitizer
    if ! $SWIFTC -sanitize="$sanitizer" -g "$source" -o "$bin" >.build/sanitize-proofs/build-$sanitizer.log 2>&1; then
      show_build_log .build/sanitize-proofs/build-$sanitizer.log
      echo "sanitize: cannot build $source" >&2
      exit 2
    fi
    # Without log_path or suppressions (`proof` clears them): what the runtimes report on their own.
    case $sanitizer in
      address)
        for v in plain weak one-byte-file; do proof address "$source" $v clean; done
        for v in enum weak-dropped empty-file; do proof address "$source" $v reported; done ;;
      thread)
        for v in pthread annotated; do proof thread "$source" $v clean; done
        for v in mutex annotated-racy; do proof thread "$source" $v reported; done ;;
    esac
  done
  if ((proof_failures > 0)); then
    failures=$((failures + 1))
  else
    echo "sanitize: proofs hold (Tests/Sanitizers/Proofs)"
  fi
fi

# --- 3. Each sanitizer: build, swift test, e2e.
for sanitizer in $SANITIZERS; do
  case $sanitizer in
    address) short=asan ;;
    thread) short=tsan ;;
    *)
      echo "sanitize: unknown sanitizer $sanitizer (address, thread; undefined is not supported on Linux)" >&2
      exit 2 ;;
  esac
  scratch=.build/$short
  out=$scratch/sanitize
  rm -rf "$out"
  mkdir -p "$out/reports"
  started=$(seconds)

  echo "sanitize: building with --sanitize=$sanitizer in $scratch (log: $out/build.log)"
  if ! $SWIFT build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch" >"$out/build.log" 2>&1; then
    show_build_log "$out/build.log"
    echo "sanitize: $sanitizer build failed" >&2
    exit 2
  fi
  built=$(seconds)

  # Reports into files named <sanitizer>.<pid> (several processes run under the e2e suite). AddressSanitizer stops at
  # its first error (memory is corrupt from there on); ThreadSanitizer goes on, so one run shows every race — its
  # processes still exit non-zero (66) at the end, and this script fails on any report.
  log="log_path=$PWD/$out/reports/$short"
  case $sanitizer in
    address)
      export ASAN_OPTIONS="$log:halt_on_error=1:detect_leaks=1:handle_sigill=1:detect_stack_use_after_return=1"
      export LSAN_OPTIONS="suppressions=$LSAN_SUPPRESSIONS:print_suppressions=1"
      unset TSAN_OPTIONS ;;
    thread)
      export TSAN_OPTIONS="$log:halt_on_error=0:second_deadlock_stack=1"
      unset ASAN_OPTIONS LSAN_OPTIONS ;;
  esac

  echo "sanitize: swift test under $sanitizer (log: $out/unit.log)"
  $SWIFT test --skip-build --sanitize="$sanitizer" --scratch-path "$scratch" >"$out/unit.log" 2>&1
  unit_status=$?
  unit_done=$(seconds)
  testing=$(grep -oE 'Test run with [0-9]+ tests? in [0-9]+ suites? (passed|failed)' "$out/unit.log" | tail -1)
  unit_count=$(grep -oE '[0-9]+ tests?' <<<"$testing" | head -1 | grep -oE '[0-9]+')
  unit="${unit_count:-?} ${testing##* }"
  # XCTest runs too (this package has no XCTest tests yet): shown once it executes any.
  xctests=$(grep -oE 'Executed [1-9][0-9]* tests?, with [0-9]+ failures?' "$out/unit.log" | tail -1)
  [[ -n $xctests ]] && unit+=", XCTest: ${xctests#Executed }"
  if ((unit_status != 0)); then
    unit+=" EXIT $unit_status"
    failures=$((failures + 1))
    grep -E '✘|error:|Fatal error' "$out/unit.log" | head -20
  fi

  e2e="skipped"
  e2e_done=$unit_done
  if [[ $E2E == 1 ]]; then
    echo "sanitize: end-to-end tests against $scratch/debug/attest-gateway (log: $out/e2e.log)"
    E2E_SANITIZER=$sanitizer GATEWAY_BIN=$PWD/$scratch/debug/attest-gateway \
      GATEWAY_DEV_BIN=$PWD/$scratch/debug/attest-gateway-dev python3 -m pytest -q "${E2E_ARGS[@]}" >"$out/e2e.log" 2>&1
    e2e_status=$?
    e2e_done=$(seconds)
    e2e=$(tail -1 "$out/e2e.log" | sed -E 's/^=+ //; s/ in [0-9.]+s.*//')
    if ((e2e_status != 0)); then
      e2e+=" EXIT $e2e_status"
      failures=$((failures + 1))
      grep -E '^(FAILED|ERROR) ' "$out/e2e.log" | head -20
    fi
  fi
  unset ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS

  # Reports: in the report files, and (should one ever bypass log_path) in the logs.
  reports=$(cat "$out"/reports/* "$out"/unit.log "$out"/e2e.log 2>/dev/null | grep -cE "$REPORT")
  # LeakSanitizer's "Suppressions used" tables: template → allocations, summed over all processes.
  suppressed=$(cat "$out"/reports/* 2>/dev/null | awk '
    /^Suppressions used:/ { table = 1; next }
    table && /^-+$/ { table = 0; next }
    table && $1 ~ /^[0-9]+$/ { used[$3] += $1 }
    END { for (t in used) { printf "%s%s ×%d", sep, t, used[t]; sep = ", " } }')
  if ((reports > 0)); then
    failures=$((failures + 1))
    echo "sanitize: $reports $sanitizer report(s); first lines of each (full reports in $out/reports/):"
    grep -lE "$REPORT" "$out"/reports/* 2>/dev/null | while read -r f; do
      echo "--- $f"
      grep -E "$REPORT|^SUMMARY|^ +#[0-4] " "$f" | head -14
    done
    grep -lE "$REPORT" "$out/unit.log" "$out/e2e.log" 2>/dev/null | sed 's/^/--- report in log: /'
  fi
  summary+=("$(printf '%-9s %5ss  %-24s %-28s %7s  %s' "$sanitizer" "$((built - started))" \
    "$unit ($((unit_done - built))s)" "$e2e ($((e2e_done - unit_done))s)" "$reports" "${suppressed:--}")")
done

echo
printf '%-9s %6s  %-24s %-28s %7s  %s\n' sanitizer build "swift test" "end-to-end" reports \
  "suppressed (LeakSanitizer template ×allocations)"
for line in "${summary[@]}"; do echo "$line"; done
if ((failures > 0)); then
  echo "sanitize: FAILED (see above; logs and reports in .build/<asan|tsan>/sanitize/)" >&2
  exit 1
fi
echo "sanitize: clean"
