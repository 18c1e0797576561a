#!/usr/bin/env bash
# Before/after on one row: alternates two tokenmill binaries (and llama.cpp's llama-batched-bench when
# LDIR names its tools) round by round on the same file, so a change is measured in the same minutes as
# its baseline (this host's bandwidth moves by tens of percent between minutes).
#
# usage: [LDIR=build-llamacpp/build/bin] bench/ab_engine.sh OLD_TOKENMILL NEW_TOKENMILL MODEL [ROUNDS] [BATCH]
#   prints one line per round: the generated tokens/s of old, new (and llama.cpp), 128-token prompts,
#   128 generated per stream, 2 threads (THREADS=N to change).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n 2,8p "$0" >&2; exit 2; }
OLD=$1 NEW=$2 M=$3 ROUNDS=${4:-3} B=${5:-16}
THREADS=${THREADS:-2} NPP=128 NTG=128 TM=$NEW BASE="" LDIR=${LDIR:-}
. bench/table_lib.sh
echo "old $OLD, new $NEW, $M, batch $B, $(lscpu | sed -n 's/^Model name: *//p')"
for r in $(seq "$ROUNDS"); do
  o=$(RUN_TM=$OLD run "$M" "$B" "$NPP" "$NTG" gen_tokens_per_s)
  n=$(RUN_TM=$NEW run "$M" "$B" "$NPP" "$NTG" gen_tokens_per_s)
  l=""
  if [ -n "$LBB" ]; then l="llama.cpp $(lcpp_batched "$M" "$B")"; fi
  printf 'round %s %s old %.1f new %.1f %s\n' "$r" "$(date -u +%H:%M:%S)" "$o" "$n" "$l"
done
