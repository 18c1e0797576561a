#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/fuzz_*.cpp) with clang and runs each for N seconds
# (default 60) on a scratch copy of its seed corpus (tests/fuzz/corpus/<name>/, if any).
# Usage: tests/fuzz/smoke.sh [SECONDS] [TARGET...]     env: BUILD_DIR (default build-fuzz), JOBS (default 2:
# build jobs, and targets run at once)
# Exit status: non-zero if the build fails or any target finds a crash/leak/timeout (an input running
# longer than FUZZ_UNIT_TIMEOUT seconds, default 30: generous for the instrumented build).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
shift || true
build="${BUILD_DIR:-build-fuzz}"
jobs="${JOBS:-2}"

# -O1 -g1: the instrumented build compiles ~2x faster than at -O2 (CI's time budget), runs nearly as fast,
# and line tables symbolize the reproducers' stack traces.
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DTM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" >/dev/null
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

# Targets run JOBS at a time (each is single-threaded); results are printed in target order.
run_one() {
  local t="$1" name="${1#fuzz_}"
  local work="$build/fuzz-work/$name"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
  if [ -d "tests/fuzz/corpus/$name" ]; then cp -r "tests/fuzz/corpus/$name/." "$work/corpus/"; fi
  if "$build/tests/$t" "$work/corpus" -max_total_time="$secs" -rss_limit_mb=2048 -timeout="${FUZZ_UNIT_TIMEOUT:-30}" \
      -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log.txt" 2>&1; then
    echo ok >"$work/status"
  else
    echo failed >"$work/status"
  fi
}
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

status=0
for t in "${targets[@]}"; do
  name="${t#fuzz_}"
  work="$build/fuzz-work/$name"
  echo "== $t: ${secs}s"
  if [ "$(cat "$work/status" 2>/dev/null)" = ok ]; then
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)" "$work/log.txt" | tr '\n' ' '
    echo "-> ok"
  else
    echo "-> FAILED (log: $work/log.txt, reproducer in $work/artifacts/)"
    tail -40 "$work/log.txt"
    status=1
  fi
done
exit $status
