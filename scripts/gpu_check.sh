#!/usr/bin/env bash
# The CUDA backend's device checks (issue 26) in one run, for a session that is lent a GPU. Build
# here (no GPU needed), then run this script on the device machine with the built test binary:
#
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DTM_CUDA=ON -DTM_BUILD_BENCH=OFF
#   cmake --build build-cuda --target test_gpu        # core, quant, kernels, gpu: minutes, not the CLI
#   # then, on the device (the `device` tool's run, with build-cuda/tests/test_gpu carried over):
#   scripts/gpu_check.sh build-cuda/tests/test_gpu
#
# Prints the GPU, then every GPU test (kernels against the CPU oracle); fails if one fails or if
# the device tests were skipped (no device visible is a failure here, not a skip).
set -euo pipefail
BIN=${1:-build-cuda/tests/test_gpu}
[ -x "$BIN" ] || { echo "no test binary at $BIN (build it with -DTM_CUDA=ON, see above)" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
OUT=$(mktemp)
"$BIN" --gtest_brief=0 2>&1 | tee "$OUT"
if grep -q "no CUDA device" "$OUT"; then
  echo "gpu_check: the device tests were skipped: no CUDA device visible" >&2
  exit 1
fi
grep -q "FAILED" "$OUT" && exit 1
echo "gpu_check: all GPU tests passed on the device"
