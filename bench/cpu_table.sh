#!/usr/bin/env bash
# The CPU speed table (issue "CPU speed"): generates random-weight Qwen2.5-0.5B-shaped models with the
# real Qwen2 vocabulary, then measures tokenmill with `bench engine` (medians of REPS runs) next to
# llama.cpp's figures. llama.cpp is measured on the same files, row by row in the same minutes, with its
# own `llama-bench` and `llama-batched-bench` when they are found: in --llamacpp DIR, else in
# build-llamacpp/build/bin (bench/build_llamacpp.sh builds them natively from the llama.cpp de3ff81
# source that node-llama-cpp ships), else on PATH. The figures quoted in the issue (llama.cpp de3ff81,
# this machine kind, another day) always have their own column; without the tools they are the only ones.
#
# With --baseline BIN the peer column is another tokenmill binary instead of llama.cpp (a build of an
# earlier commit): the two alternate run by run on the same files, for before/after figures of a change.
#
# usage: bench/cpu_table.sh [--threads N] [--reps N] [--models-dir DIR] [--llamacpp DIR] [--baseline BIN] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=2 REPS=3 DIR=bench/models QUICK=0 LDIR= BASE=
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --models-dir) DIR=$2; shift 2 ;;
    --llamacpp) LDIR=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TM=${TOKENMILL:-build/tokenmill}
[ -x "$TM" ] || { echo "build tokenmill first (cmake --build build)" >&2; exit 1; }
VOCAB=${VOCAB:-tests/data/tokenizers/ggml-vocab-qwen2.gguf}
[ -f "$VOCAB" ] || VOCAB=../shared/tokenizers/gguf/ggml-vocab-qwen2.gguf
mkdir -p "$DIR"
gen() {  # name dtype [--pure]
  local f="$DIR/qwen2.5-0.5b-$1.gguf"
  [ -f "$f" ] || "$TM" dummy --shape qwen2.5-0.5b --dtype "$2" ${3:-} --vocab "$VOCAB" -o "$f" >&2
  echo "$f"
}
Q8=$(gen q8_0 Q8_0); Q4=$(gen q4_0 Q4_0); Q4P=$(gen q4_0-pure Q4_0 --pure); F16=$(gen f16 F16)
GEN=128; PP=512; NPP=128; NTG=128
[ "$QUICK" = 1 ] && { GEN=32; PP=128; NTG=32; REPS=1; }

. bench/table_lib.sh  # run, lcpp_bench, lcpp_batched, median; LB / LBB (llama.cpp or --baseline)

# One row: REPS rounds, each one tokenmill run and then (when found) one llama.cpp run on the same
# file, so both see the same minutes of a host whose memory bandwidth moves; medians of each.
row() {  # label issue_figure target tokenmill_args -- llama_kind llama_args
  local label=$1 issue=$2 target=$3; shift 3
  local tm_args=() l_args=()
  while [ "$1" != -- ]; do tm_args+=("$1"); shift; done; shift
  l_args=("$@")
  local t_all="" l_all=""
  for _ in $(seq "$REPS"); do
    t_all="$t_all $(run "${tm_args[@]}")"
    if [ -n "$BASE" ]; then
      l_all="$l_all $(RUN_TM=$BASE run "${tm_args[@]}")"
    elif [ -n "$LB" ]; then
      if [ "${l_args[0]}" = bench ]; then l_all="$l_all $(lcpp_bench "${l_args[@]:1}")"
      else l_all="$l_all $(lcpp_batched "${l_args[@]:1}")"; fi
    fi
  done
  local t l
  t=$(echo "$t_all" | tr ' ' '\n' | grep . | median)
  if [ -n "$LB" ]; then
    l=$(echo "$l_all" | tr ' ' '\n' | grep . | median)
    awk -v lb="$label" -v t="$t" -v l="$l" -v i="$issue" -v g="$target" \
      'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %s | %.2fx | %s |\n", lb, t, l, (l > 0 ? t / l : 0), i, t / i, g }'
  else
    awk -v lb="$label" -v t="$t" -v i="$issue" -v g="$target" \
      'BEGIN { printf "| %s | %.1f | – | – | %s | %.2fx | %s |\n", lb, t, i, t / i, g }'
  fi
}
echo "tokenmill $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M') UTC, $THREADS threads, medians of $REPS"
if [ -n "$BASE" ]; then
  echo "baseline: $BASE ($("$BASE" --version 2>&1 | head -1)), measured on the same files, alternating with tokenmill run by run"
  echo "(the 'llama.cpp (this run)' column below is the baseline; its ratio is tokenmill / baseline)"
elif [ -n "$LB" ]; then
  echo "llama.cpp: $LB ($("$LB" --version 2>&1 | head -1)), measured on the same files, alternating with tokenmill run by run"
else
  echo "llama.cpp: not found (bench/build_llamacpp.sh builds it); only the issue's figures"
fi
echo
echo "| figure | tokenmill | llama.cpp (this run) | ratio | llama.cpp (issue) | ratio to issue | target |"
echo "|---|---|---|---|---|---|---|"
row "decode, 1 stream, Q8_0 (tok/s)" 61.6 1.15x "$Q8" 1 8 "$GEN" gen_tokens_per_s -- bench "$Q8" 0 "$GEN"
row "decode, 1 stream, Q4_0 (Q8_0 output)" 87.6 1.15x "$Q4" 1 8 "$GEN" gen_tokens_per_s -- bench "$Q4" 0 "$GEN"
row "decode, 1 stream, Q4_0 pure" 112 1.15x "$Q4P" 1 8 "$GEN" gen_tokens_per_s -- bench "$Q4P" 0 "$GEN"
row "decode, 1 stream, F16" 38.4 1.0x "$F16" 1 8 "$GEN" gen_tokens_per_s -- bench "$F16" 0 "$GEN"
row "prompt $PP tokens, Q8_0" 341 1.5x "$Q8" 1 "$PP" 2 prompt_tokens_per_s -- bench "$Q8" "$PP" 0
row "prompt $PP tokens, Q4_0" 637 1.2x "$Q4" 1 "$PP" 2 prompt_tokens_per_s -- bench "$Q4" "$PP" 0
row "prompt $PP tokens, F16" 439 1.2x "$F16" 1 "$PP" 2 prompt_tokens_per_s -- bench "$F16" "$PP" 0
row "16 streams x $NTG generated, Q8_0" 175 2.5x "$Q8" 16 "$NPP" "$NTG" gen_tokens_per_s -- batched "$Q8" 16
row "32 streams x $NTG generated, Q8_0" 183 3x "$Q8" 32 "$NPP" "$NTG" gen_tokens_per_s -- batched "$Q8" 32
row "16 streams x $NTG generated, Q4_0" 290 1.5x "$Q4" 16 "$NPP" "$NTG" gen_tokens_per_s -- batched "$Q4" 16

# The memory bandwidth the host gave around the run: decode follows it (tokens/s <= GB/s / model
# bytes), and on a shared VM it moves by tens of percent within minutes.
BM=${BENCH_MATMUL:-$(dirname "$TM")/bench/bench_matmul}
if [ -x "$BM" ]; then
  bw() {  # benchmark name -> its median GB/s
    "$BM" --benchmark_filter="$1" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
      awk '/_median/ { for (i = 1; i <= NF; i++) if ($i ~ /^GB\/s=/) { v = $i; sub(/GB\/s=/, "", v); sub(/G\/s/, "", v); printf "%.1f\n", v } }'
  }
  sw=$(bw 'BM_MemRead/2') hw=$(bw 'BM_MemReadHw/2')
  [ -n "$sw" ] && { echo; echo "host read bandwidth after the run (2 threads, median of 3): $sw GB/s with software prefetch (BM_MemRead), ${hw:-?} GB/s without (BM_MemReadHw)"; }
fi
