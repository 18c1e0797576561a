#!/usr/bin/env bash
# The CPU speed table (issue "CPU speed"): generates random-weight Qwen2.5-0.5B-shaped models with the
# real Qwen2 vocabulary, then measures tokenmill with `bench engine` (medians of REPS runs) next to
# llama.cpp's figures. If `llama-bench` and `llama-batched-bench` are on PATH they are measured on the
# same files; otherwise the figures quoted in the issue (llama.cpp de3ff81, this machine kind) are used.
# Without llama-bench, `node bench/llamacpp_bench.mjs --model FILE` measures llama.cpp's decode and
# prompt speed on the same file through node-llama-cpp's prebuilt library (tests/llamacpp).
#
# usage: bench/cpu_table.sh [--threads N] [--reps N] [--models-dir DIR] [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=2 REPS=3 DIR=bench/models QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --models-dir) DIR=$2; shift 2 ;;
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

# bench engine --json -> the value of a key for the given batch
field() { sed -e 's/},{/}\n{/g' | grep "\"batch\":$1," | sed -e "s/.*\"$2\":\([0-9.e+-]*\).*/\1/"; }
run() {  # model batch prompt_len gen_len key
  "$TM" bench engine --model "$1" --batch "$2" --prompt-len "$3" --gen-len "$4" --threads "$THREADS" \
    --repetitions "$REPS" --max-num-batched-tokens 2048 --json 2>/dev/null | field "$2" "$5"
}
decode() { run "$1" 1 8 "$GEN" gen_tokens_per_s; }
prompt() { run "$1" 1 "$PP" 2 prompt_tokens_per_s; }
batched() { run "$1" "$2" "$NPP" "$NTG" gen_tokens_per_s; }

# llama.cpp on the same files when its tools are on PATH (else the issue's quoted figures).
LB=$(command -v llama-bench || true); LBB=$(command -v llama-batched-bench || true)
lcpp_bench() {  # model -p -n column(avg_ts)
  [ -n "$LB" ] || { echo "$4"; return; }
  "$LB" -m "$1" -t "$THREADS" -p "$2" -n "$3" -r "$REPS" -o csv 2>/dev/null |
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i; next } { v = $c } END { gsub(/"/, "", v); print v }'
}
lcpp_batched() {  # model npl fallback
  [ -n "$LBB" ] || { echo "$3"; return; }
  "$LBB" -m "$1" -t "$THREADS" -npp "$NPP" -ntg "$NTG" -npl "$2" 2>/dev/null |
    awk -F'|' '/S_TG/ { for (i = 1; i <= NF; i++) if ($i ~ /S_TG/) c = i; next } c && $4 ~ /[0-9]/ { gsub(/ /, "", $c); v = $c } END { print v }'
}
row() {  # label tokenmill llama target
  awk -v l="$1" -v t="$2" -v r="$3" -v g="$4" 'BEGIN { printf "| %s | %.1f | %s | %.2fx | %s |\n", l, t, r, t / r, g }'
}
echo "tokenmill $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d), $THREADS threads, medians of $REPS"
echo
echo "| figure | tokenmill | llama.cpp | ratio | target |"
echo "|---|---|---|---|---|"
row "decode, 1 stream, Q8_0 (tok/s)" "$(decode "$Q8")" "$(lcpp_bench "$Q8" 0 "$GEN" 61.6)" "1.15x"
row "decode, 1 stream, Q4_0 (Q8_0 output)" "$(decode "$Q4")" "$(lcpp_bench "$Q4" 0 "$GEN" 87.6)" "1.15x"
row "decode, 1 stream, Q4_0 pure" "$(decode "$Q4P")" "$(lcpp_bench "$Q4P" 0 "$GEN" 112)" "1.15x"
row "decode, 1 stream, F16" "$(decode "$F16")" "$(lcpp_bench "$F16" 0 "$GEN" 38.4)" "1.0x"
row "prompt $PP tokens, Q8_0" "$(prompt "$Q8")" "$(lcpp_bench "$Q8" "$PP" 0 341)" "1.5x"
row "prompt $PP tokens, Q4_0" "$(prompt "$Q4")" "$(lcpp_bench "$Q4" "$PP" 0 637)" "1.2x"
row "prompt $PP tokens, F16" "$(prompt "$F16")" "$(lcpp_bench "$F16" "$PP" 0 439)" "1.2x"
row "16 streams x $NTG generated, Q8_0" "$(batched "$Q8" 16)" "$(lcpp_batched "$Q8" 16 175)" "2.5x"
row "32 streams x $NTG generated, Q8_0" "$(batched "$Q8" 32)" "$(lcpp_batched "$Q8" 32 183)" "3x"
row "16 streams x $NTG generated, Q4_0" "$(batched "$Q4" 16)" "$(lcpp_batched "$Q4" 16 290)" "1.5x"

# The memory bandwidth the host gave around the run: decode follows it (tokens/s <= GB/s / model
# bytes), and on a shared VM it moves by tens of percent within minutes.
BM=${BENCH_MATMUL:-$(dirname "$TM")/bench/bench_matmul}
if [ -x "$BM" ]; then
  bw=$("$BM" --benchmark_filter='BM_MemRead/2' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null |
       awk '/_median/ { for (i = 1; i <= NF; i++) if ($i ~ /^GB\/s=/) { v = $i; sub(/GB\/s=/, "", v); sub(/G\/s/, "", v); printf "%.1f\n", v } }')
  [ -n "$bw" ] && { echo; echo "host read bandwidth after the run (BM_MemRead, 2 threads, median of 3): $bw GB/s"; }
fi
