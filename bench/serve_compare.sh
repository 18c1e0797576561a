#!/usr/bin/env bash
# The serving row of the issue "CPU speed", measured for both servers the same way, one after the
# other on the same model file: 64 streaming completions, 128-token prompts, 128 generated tokens each
# (ignore EOS), 16 at a time, 2 threads, `tokenmill bench serve` as the client. llama.cpp's server is
# `llama-server -np 16` (the issue's command) from --llamacpp DIR, else build-llamacpp/build/bin
# (bench/build_llamacpp.sh), else PATH; without it only tokenmill is measured.
#
# usage: bench/serve_compare.sh [--model FILE] [--seeds "1 2 3"] [--threads N] [--llamacpp DIR]
# (default model: the Q8_0 file of bench/cpu_table.sh in bench/models, generated if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=2 SEEDS="1 2 3" MODEL="" LDIR="" PORT=${PORT:-8131}
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --llamacpp) LDIR=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TM=${TOKENMILL:-build/tokenmill}
[ -x "$TM" ] || { echo "build tokenmill first (cmake --build build)" >&2; exit 1; }
if [ -z "$MODEL" ]; then
  VOCAB=${VOCAB:-tests/data/tokenizers/ggml-vocab-qwen2.gguf}
  MODEL=bench/models/qwen2.5-0.5b-q8_0.gguf
  mkdir -p bench/models
  [ -f "$MODEL" ] || "$TM" dummy --shape qwen2.5-0.5b --dtype Q8_0 --vocab "$VOCAB" -o "$MODEL" >&2
fi
[ -n "$LDIR" ] || { [ -x build-llamacpp/build/bin/llama-server ] && LDIR=build-llamacpp/build/bin; }
LS=""
if [ -n "$LDIR" ]; then LS=$LDIR/llama-server; else LS=$(command -v llama-server || true); fi

OUT=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$OUT"; }
trap cleanup EXIT

measure() {  # name seed -> one JSON file per run
  "$TM" bench serve --base-url "http://127.0.0.1:$PORT" --endpoint completions --num-prompts 64 \
    --max-concurrency 16 --input-len 128 --output-len 128 --ignore-eos --seed "$2" \
    --ready-check-timeout-sec 600 --json "$OUT/$1-$2.json" >/dev/null 2>"$OUT/$1-$2.err" ||
    { echo "bench serve against $1 failed:" >&2; cat "$OUT/$1-$2.err" >&2; exit 1; }
}
serve() {  # name command...
  local name=$1; shift
  "$@" >"$OUT/$name.log" 2>&1 &
  PID=$!
  for s in $SEEDS; do measure "$name" "$s"; done
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}
serve tokenmill "$TM" serve --model "$MODEL" --threads "$THREADS" --max-model-len 1024 --port "$PORT"
[ -n "$LS" ] && serve llama.cpp "$LS" -m "$MODEL" -t "$THREADS" -np 16 --port "$PORT"

# One value of a run's JSON file, by a dotted path (ttft_ms.p50).
val() { node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const v = process.argv[2].split(".").reduce((o, k) => (o == null ? o : o[k]), j); console.log(v ?? "")' "$1" "$2"; }
cells() {  # name key -> "a / b / c" over the seeds
  local out=""
  for s in $SEEDS; do
    local v; v=$(val "$OUT/$1-$s.json" "$2")
    out="$out${out:+ / }$(awk -v v="${v:-0}" 'BEGIN { printf "%.1f", v }')"
  done
  echo "$out"
}
echo "tokenmill $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M') UTC, $(basename "$MODEL"), $THREADS threads, seeds $SEEDS"
echo
names="tokenmill"; [ -n "$LS" ] && names="tokenmill llama.cpp"
printf '| figure |'; for n in $names; do printf ' %s |' "$n"; done; echo
printf '|---|'; for n in $names; do printf -- '---|'; done; echo
for row in "output tok/s:output_throughput" "TTFT p50 (ms):ttft_ms.p50" "TTFT p99 (ms):ttft_ms.p99" \
           "TPOT p50 (ms):tpot_ms.p50" "failed requests:failed"; do
  IFS=: read -r label key <<<"$row"
  printf '| %s |' "$label"; for n in $names; do printf ' %s |' "$(cells "$n" "$key")"; done; echo
done
