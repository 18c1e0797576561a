#!/usr/bin/env bash
# Builds llama.cpp's own benchmark tools (llama-bench, llama-batched-bench) and llama-server natively
# on this machine, from the llama.cpp source that the npm package node-llama-cpp ships as a git bundle
# (tests/llamacpp: `npm install --omit=optional --ignore-scripts` there). That bundle is llama.cpp
# commit de3ff81, the commit the issue "CPU speed" quotes its figures for, so bench/cpu_table.sh and
# bench/serve_compare.sh can measure llama.cpp on the same files, on the same host, in the same minutes
# as tokenmill instead of quoting figures taken at another time (the host's memory bandwidth moves by
# tens of percent between minutes). Nothing is downloaded: the source is the npm package's bundle.
#
# usage: bench/build_llamacpp.sh [--dir DIR]      (default build-llamacpp; binaries in DIR/build/bin)
# Takes ~15 minutes on 2 cores. Native build (-march=native, as llama.cpp builds by default), OpenMP.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=build-llamacpp
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
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
LOG=$DIR/build.log
{
  cmake -S "$DIR/src" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF &&
  cmake --build "$DIR/build" -j "$(nproc)" --target llama-bench llama-batched-bench llama-server llama-perplexity
} >"$LOG" 2>&1 || { tail -40 "$LOG" >&2; echo "llama.cpp build failed; full log: $LOG" >&2; exit 1; }
echo "$DIR/build/bin"
