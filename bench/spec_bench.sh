#!/usr/bin/env bash
# Speculative decoding figures (issue 23, docs/speculative.md), one run, printed as a markdown table:
#  - Qwen2.5-0.5B shape, Q8_0 random weights (`tokenmill dummy --shape qwen2.5-0.5b --dtype Q8_0 --seed 1`),
#    one stream, the replay test proposer at 0/25/50/75/100 % acceptance (k = 4, adaptive off; the
#    per-token error rate e solves (sum_{i=1..k} (1-e)^i) / k = acceptance) and at 0 % with adaptive on;
#  - 16 concurrent streams on that model, the n-gram proposer at its defaults, on against off;
#  - the n-gram proposer on stories260K (a tiny model whose greedy stories repeat themselves).
# Every speculative run comes right after a run without speculation on the same file (baseline
# first, then speculation, REPS times); the table gives the medians of each and the ratio of the
# row's speculative median to its own baseline median, so every ratio compares the same minutes.
# Prefix caching is off (the replay runs compute the greedy continuation first, untimed; their
# prompts must not hit the cache either). Needs jq. Take the figures on a quiet machine.
#
# usage: bench/spec_bench.sh [--reps N] [--threads N] [--gen-len N] [--prompt-len N] [--models-dir DIR]
#                            [--model FILE] [--stories FILE] [--quick]
#   --model FILE  use FILE instead of the Q8_0 Qwen2.5-0.5B-shape dummy (generated in --models-dir)
#   --quick       a smoke run: 1 rep, 24 generated tokens, stories260K for every row
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=5 THREADS=2 GEN=128 PROMPT=32 DIR=bench/models MODEL= QUICK=0
STORIES=models/stories260K/stories260K.gguf
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --gen-len) GEN=$2; shift 2 ;;
    --prompt-len) PROMPT=$2; shift 2 ;;
    --models-dir) DIR=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --stories) STORIES=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TM=${TOKENMILL:-build/tokenmill}
[ -x "$TM" ] || { echo "build tokenmill first (cmake --build build --target tokenmill)" >&2; exit 1; }
command -v jq >/dev/null || { echo "needs jq (apt-get install jq)" >&2; exit 1; }
[ -f "$STORIES" ] || { echo "no $STORIES (--stories FILE)" >&2; exit 1; }
if [ "$QUICK" = 1 ]; then
  REPS=1 GEN=24
  [ -n "$MODEL" ] || MODEL=$STORIES
fi
if [ -z "$MODEL" ]; then
  mkdir -p "$DIR"
  MODEL=$DIR/qwen2.5-0.5b-q8_0-seed1.gguf
  [ -f "$MODEL" ] || "$TM" dummy --shape qwen2.5-0.5b --dtype Q8_0 --seed 1 -o "$MODEL" >&2
fi
LOG=$(mktemp -t spec_bench.XXXXXX.log)

# One `bench engine` run -> "gen_tok/s acceptance tokens_per_verification" ("-" where nothing was drafted).
run() {  # model batch prompt_len gen_len [speculative-config JSON]
  local args=(bench engine --model "$1" --batch "$2" --prompt-len "$3" --gen-len "$4" --threads "$THREADS"
              --repetitions 1 --no-prefix-caching --json)
  [ -n "${5:-}" ] && args+=(--speculative-config "$5")
  echo "+ $TM ${args[*]}" >>"$LOG"
  "$TM" "${args[@]}" 2>>"$LOG" | tee -a "$LOG" | jq -r --argjson b "$2" \
    '.[] | select(.batch == $b) | if (.spec_draft_tokens // 0) > 0
       then "\(.gen_tokens_per_s) \(.spec_acceptance_rate) \(.spec_tokens_per_verification)"
       else "\(.gen_tokens_per_s) - -" end'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# The replay error rate that gives acceptance A with k drafts (bisection on q = 1 - e).
error_for() {  # A k
  awk -v A="$1" -v k="$2" 'BEGIN {
    if (A <= 0) { print 1; exit } if (A >= 1) { print 0; exit }
    lo = 0; hi = 1
    for (it = 0; it < 60; it++) { q = (lo + hi) / 2; s = 0; p = 1; for (i = 1; i <= k; i++) { p *= q; s += p } if (s / k < A) lo = q; else hi = q }
    printf "%.4f\n", 1 - (lo + hi) / 2 }'
}

# One table row: REPS rounds of (baseline run, speculative run) on the same file; medians and ratio.
row() {  # label target model batch prompt_len gen_len spec_json
  local label=$1 target=$2 model=$3 batch=$4 plen=$5 glen=$6 spec=$7
  local base="" sp="" acc="" tpv="" g a t
  for _ in $(seq "$REPS"); do
    read -r g a t <<<"$(run "$model" "$batch" "$plen" "$glen")"
    [ -n "$g" ] || { echo "bench engine failed (baseline, $label); see $LOG" >&2; exit 1; }
    base="$base $g"
    read -r g a t <<<"$(run "$model" "$batch" "$plen" "$glen" "$spec")"
    [ -n "$g" ] || { echo "bench engine failed ($label); see $LOG" >&2; exit 1; }
    sp="$sp $g" acc="$acc $a" tpv="$tpv $t"
  done
  local mb ms ma mt
  values() { tr ' ' '\n' | awk '$0 != "" && $0 != "-"'; }  # the numbers of a list ("-": nothing drafted)
  mb=$(values <<<"$base" | median)
  ms=$(values <<<"$sp" | median)
  ma=$(values <<<"$acc" | median)
  mt=$(values <<<"$tpv" | median)
  awk -v l="$label" -v b="$batch" -v mb="$mb" -v ms="$ms" -v ma="$ma" -v mt="$mt" -v tg="$target" -v s="$spec" 'BEGIN {
    acc = (ma == "nan") ? "— (no drafts)" : sprintf("%.1f %%", 100 * ma)
    tpv = (mt == "nan") ? "—" : sprintf("%.2f", mt)
    printf "| %s | %d | %.1f | %.1f | ×%.3f | %s | %s | %s | `%s` |\n", l, b, mb, ms, ms / mb, acc, tpv, tg, s }'
}

replay() {  # acceptance adaptive -> speculative config
  printf '{"method":"replay","num_speculative_tokens":4,"replay_error_rate":%s,"adaptive":%s}' "$(error_for "$1" 4)" "$2"
}

echo "## Speculative decoding, bench/spec_bench.sh"
echo
echo "- commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M UTC'), CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (say \"machine shared with builds\" if it was)"
echo "- \`--reps $REPS --threads $THREADS --prompt-len $PROMPT --gen-len $GEN\`, prefix caching off; model \`$MODEL\`, stories \`$STORIES\`"
echo "- each row: $REPS × (baseline run without speculation, then the speculative run); medians; ratio = speculative / baseline median of the same row"
echo
echo "| row | streams | baseline gen tok/s | speculative gen tok/s | ratio | acceptance | tokens / verification | issue target | --speculative-config |"
echo "|---|---|---|---|---|---|---|---|---|"
for A in 0 0.25 0.5 0.75 1; do
  target="—"
  [ "$A" = 0 ] && target="≥ ×0.95"
  [ "$A" = 0.75 ] && target="≥ ×2"
  row "replay, acceptance $(awk -v a="$A" 'BEGIN { printf "%d %%", 100 * a }'), k 4, adaptive off" "$target" \
    "$MODEL" 1 "$PROMPT" "$GEN" "$(replay "$A" false)"
done
row "replay, acceptance 0 %, k 4, adaptive on" "—" "$MODEL" 1 "$PROMPT" "$GEN" "$(replay 0 true)"
row "n-gram defaults, 16 streams" "≥ ×0.97" "$MODEL" 16 "$PROMPT" "$GEN" '{"method":"ngram"}'
row "n-gram on stories260K (k 4, lookup 1..3)" "report" "$STORIES" 1 16 "$((GEN * 2))" \
  '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":3,"prompt_lookup_min":1}'
echo
echo "(raw bench engine output: $LOG)"
