#!/usr/bin/env bash
# Every test tier, in order, each logged to test-results/TIER.log:
#   setup   scripts/setup.sh on fake bare machines (seconds)
#   native  cargo test: kernels vs CPU references on the native adapter
#           (lavapipe without a GPU), both f16 storage modes
#   chrome  the same kernel test bodies in headless Chrome (SwiftShader)
#   e2e     the built page in Chrome, driven by Playwright
# Runs every tier even after a failure, prints each tier's counts, and
# exits non-zero if any tier failed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
mkdir -p test-results
# The whole Chrome run, one page: about 4 min of tests on a loaded 2-core
# machine (pipelines are compiled once per device and only where used),
# and machines differ 2-3x: the limit leaves room.
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-2400}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"                # quiets Mesa's WSI

summary=()
total_pass=0
total_fail=0
total_skipped=0
failed=0

# count TIER LOG: passed, failed and skipped tests from cargo/wasm-bindgen
# ("N ignored": a test gated off this adapter, with its reason in the log)
# or node:test output
count() {
  local log=$1 pass fail skipped
  if grep -q '^# pass ' "$log"; then
    pass=$(awk '/^# pass /{s+=$3} END{print s+0}' "$log")
    fail=$(awk '/^# fail /{s+=$3} END{print s+0}' "$log")
    skipped=$(awk '/^# skipped /{s+=$3} END{print s+0}' "$log")
  else
    pass=$(grep -o '[0-9]* passed' "$log" | awk '{s+=$1} END{print s+0}')
    fail=$(grep -o '[0-9]* failed' "$log" | awk '{s+=$1} END{print s+0}')
    skipped=$(grep -o '[0-9]* ignored' "$log" | awk '{s+=$1} END{print s+0}')
  fi
  echo "$pass $fail $skipped"
}

tier() {
  local name=$1; shift
  echo "=== tier $name: $*"
  local start=$SECONDS
  "$@" 2>&1 | tee "test-results/$name.log"
  local status=${PIPESTATUS[0]} seconds=$((SECONDS - start))
  read -r pass fail skipped < <(count "test-results/$name.log")
  if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi  # failed before counting
  if [ "$status" -eq 0 ] && [ "$pass" -eq 0 ]; then status=1; fail=1; fi  # ran nothing
  [ "$status" -ne 0 ] && failed=1
  summary+=("$(printf '%-7s %4d passed, %d failed, %d skipped  (%d s)' "$name" "$pass" "$fail" "$skipped" "$seconds")")
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail)); total_skipped=$((total_skipped + skipped))
}

tier setup node --test --test-reporter=tap tests/setup/
node scripts/brown-corpus.mjs  # the built-in corpus, read by data tests
tier native cargo test --workspace
tier chrome wasm-pack test --headless --chrome --chromedriver "$CHROMEDRIVER" crate
echo "=== build (for the e2e tier)"
build_start=$SECONDS
if bash scripts/build.sh 2>&1 | tee test-results/build.log; then
  summary+=("$(printf '%-7s %d s' build $((SECONDS - build_start)))")
  tier e2e node --test --test-reporter=tap tests/e2e/
else
  failed=1; total_fail=$((total_fail + 1)); summary+=("e2e     not run: the build failed (test-results/build.log)")
fi

echo
echo "=== test tiers"
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed, $total_skipped skipped"
exit $failed
