#!/usr/bin/env bash
# Issue 19's speed rows: the model families beyond Qwen2 (MoE, Gemma 3, Phi-3.5, gpt-oss) against
# llama.cpp on the same random-weight files of real shapes (`tokenmill dummy --shape`), row by row in the
# same minutes: decode of one stream (llama-bench tg128), a 512-token prompt (pp512) and 16 streams
# (llama-batched-bench, 128-token prompts, 128 generated), medians of REPS alternating rounds. The files
# are written once into --models-dir (gpt-oss-20b MXFP4 is 12 GB; one engine runs at a time).
#
# usage: bench/family_table.sh [--threads N] [--reps N] [--models-dir DIR] [--llamacpp DIR] [--only NAME[,NAME]]
#   NAME: gemma3, phi3, olmoe-q4, olmoe-iq4xs, gptoss (default: all); ROWS=tg,pp,b16 (environment) picks rows
#   On a Xeon with AMX, pass the peer from `bench/build_llamacpp.sh --no-amx` (DIR/build-noamx/bin): the
#   default build's AMX path crashed llama-batched-bench there (bench/RESULTS.md, 2026-12-04).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=2 REPS=3 DIR=bench/models LDIR= BASE= ONLY=all
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --models-dir) DIR=$2; shift 2 ;;
    --llamacpp) LDIR=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TM=${TOKENMILL:-build/tokenmill}
[ -x "$TM" ] || { echo "build tokenmill first (cmake --build build)" >&2; exit 1; }
NPP=128 NTG=128 GEN=128 PP=512
. bench/table_lib.sh
[ -n "$LB" ] || { echo "no llama.cpp tools (bench/build_llamacpp.sh builds them)" >&2; exit 1; }
mkdir -p "$DIR"
gen() {  # shape dtype [vocab]
  local f="$DIR/$1-$2.gguf"
  [ -f "$f" ] || "$TM" dummy --shape "$1" --dtype "$2" ${3:+--vocab "$3"} -o "$f" >&2
  echo "$f"
}
row() {  # label target model batch prompt_len gen_len key -- llama_kind llama_args...
  local label=$1 target=$2; shift 2
  local tm_args=() l_args=()
  while [ "$1" != -- ]; do tm_args+=("$1"); shift; done; shift
  l_args=("$@")
  local t_all="" l_all=""
  for _ in $(seq "$REPS"); do
    t_all="$t_all $(run "${tm_args[@]}")"
    if [ "${l_args[0]}" = bench ]; then l_all="$l_all $(lcpp_bench "${l_args[@]:1}")"
    else l_all="$l_all $(lcpp_batched "${l_args[@]:1}")"; fi
  done
  local t l
  t=$(echo "$t_all" | tr ' ' '\n' | grep . | median)
  l=$(echo "$l_all" | tr ' ' '\n' | grep . | median)
  awk -v lb="$label" -v t="$t" -v l="$l" -v g="$target" -v ta="$t_all" -v la="$l_all" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %s | %s / %s |\n", lb, t, l, (l > 0 ? t / l : 0), g, ta, la }'
}
want() { [ "$ONLY" = all ] || [[ ",$ONLY," == *",$1,"* ]]; }
ROWS=${ROWS:-tg,pp,b16}
three() {  # name file tg_target pp_target b16_target
  [[ ",$ROWS," == *,tg,* ]] && row "$1: decode, 1 stream (tok/s)" "$3" "$2" 1 8 "$GEN" gen_tokens_per_s -- bench "$2" 0 "$GEN"
  [[ ",$ROWS," == *,pp,* ]] && row "$1: prompt $PP tokens (tok/s)" "$4" "$2" 1 "$PP" 2 prompt_tokens_per_s -- bench "$2" "$PP" 0
  [[ ",$ROWS," == *,b16,* ]] && row "$1: 16 streams x $NTG generated (tok/s)" "$5" "$2" 16 "$NPP" "$NTG" gen_tokens_per_s -- batched "$2" 16
  return 0
}
echo "tokenmill $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M') UTC, $THREADS threads, medians of $REPS; $(lscpu | sed -n 's/^Model name: *//p')"
echo "llama.cpp: $LB ($("$LB" --version 2>&1 | head -1)), same files, alternating run by run"
echo
echo "| figure | tokenmill | llama.cpp | ratio | target | runs (tokenmill / llama.cpp) |"
echo "|---|---|---|---|---|---|"
if want gemma3; then three "gemma-3-1b Q8_0" "$(gen gemma-3-1b Q8_0)" ">=1.2x" ">=1.2x" ">=1.2x"; fi
if want phi3; then
  PHI_VOCAB=../shared/tokenizers/gguf/ggml-vocab-phi-3.gguf; [ -f "$PHI_VOCAB" ] || PHI_VOCAB=
  three "phi-3.5-mini Q8_0" "$(gen phi-3.5-mini Q8_0 "$PHI_VOCAB")" ">=1.2x" ">=1.2x" ">=1.2x"
fi
if want olmoe-q4; then three "OLMoE-1B-7B Q4_0" "$(gen olmoe-1b-7b Q4_0)" ">=1.3x" ">=1.5x" ">=3x"; fi
if want olmoe-iq4xs; then three "OLMoE-1B-7B IQ4_XS" "$(gen olmoe-1b-7b IQ4_XS)" ">=1.3x" ">=1.5x" ">=3x"; fi
if want gptoss; then
  F=$(gen gpt-oss-20b MXFP4)
  row "gpt-oss-20b MXFP4: decode, 1 stream (tok/s)" ">=1.2x" "$F" 1 8 "$GEN" gen_tokens_per_s -- bench "$F" 0 "$GEN"
fi
