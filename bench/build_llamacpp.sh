#!/usr/bin/env bash
# Builds llama.cpp's own benchmark tools (llama-bench, llama-batched-bench) and llama-server natively
# on this machine, from the llama.cpp source that the npm package node-llama-cpp ships as a git bundle
# (tests/llamacpp: `npm install --omit=optional --ignore-scripts` there). That bundle is llama.cpp
# commit de3ff81, the commit the issue "CPU speed" quotes its figures for, so bench/cpu_table.sh and
# bench/serve_compare.sh can measure llama.cpp on the same files, on the same host, in the same minutes
# as tokenmill instead of quoting figures taken at another time (the host's memory bandwidth moves by
# tens of percent between minutes). Nothing is downloaded: the source is the npm package's bundle.
#
# usage: bench/build_llamacpp.sh [--dir DIR] [--no-amx]
#   (default build-llamacpp; binaries in DIR/build/bin, with --no-amx in DIR/build-noamx/bin)
# Takes ~15 minutes on 2 cores. Native build (-march=native, as llama.cpp builds by default), OpenMP.
# --no-amx: the same without the AMX instructions. On an Intel Xeon with AMX (2026-12-04) de3ff81's
# AMX path (ggml_backend_amx_mul_mat) crashed llama-batched-bench on OLMoE Q4_0 even at one stream;
# that build measures llama.cpp there (its VNNI kernels, as on CPUs without AMX).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=build-llamacpp
OUT=build FLAGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --no-amx)
      OUT=build-noamx
      FLAGS=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
             -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
      shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
BUNDLE=tests/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ ! -f "$BUNDLE" ]; then
  echo "no llama.cpp source: run (cd tests/llamacpp && npm install --no-save --omit=optional --ignore-scripts) first" >&2
  exit 1
fi
if [ ! -d "$DIR/src/.git" ]; then
  rm -rf "$DIR/src"
  mkdir -p "$DIR"
  git clone -q "$BUNDLE" "$DIR/src"
fi
echo "llama.cpp $(git -C "$DIR/src" rev-parse --short HEAD)" >&2
# Its compiler warnings (GCC 12 on AVX-512 intrinsics) go to the log, shown only on failure.
LOG=$DIR/$OUT.log
{
  cmake -S "$DIR/src" -B "$DIR/$OUT" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF ${FLAGS[@]+"${FLAGS[@]}"} &&
  cmake --build "$DIR/$OUT" -j "$(nproc)" --target llama-bench llama-batched-bench llama-server llama-perplexity
} >"$LOG" 2>&1 || { tail -40 "$LOG" >&2; echo "llama.cpp build failed; full log: $LOG" >&2; exit 1; }
echo "$DIR/$OUT/bin"
