#!/usr/bin/env bash
# Builds tokenmill (Release) and runs the whole test suite: unit, golden, CLI and end-to-end tests.
# Usage: scripts/test.sh [build-dir]   (environment: JOBS, CTEST_ARGS)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
JOBS="${JOBS:-$(nproc)}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$JOBS"
if [ -f tests/e2e/package-lock.json ] && [ ! -d tests/e2e/node_modules ]; then
  (cd tests/e2e && npm ci --no-audit --no-fund)
fi
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" ${CTEST_ARGS:-}
