#!/usr/bin/env bash
# The AMX level (TOKENMILL_ISA=amx, kernels/qgemm_legacy_amx.cpp) against AVX-512 VNNI (the default) on
# this machine, alternating round by round on the same binaries: the evidence for making amx the
# default level on AMX Xeons (src/core/cpu.cpp env_limit) or for changing its kMinTokens.
#   1. bench_moe olmoe/Q4_0 and olmoe/Q8_0 at 4, 16 and 64 tokens (2 threads): expert products
#   2. bench_matmul BM_Gemm Q4_0 / Q8_0 896x896 at 16 and 64 tokens (1 thread): the tile kernels alone
#   3. with --model FILE (e.g. `tokenmill dummy --shape olmoe-1b-7b --dtype Q4_0`): `bench engine`
#      16 streams x 128 generated and a 512-token prompt
# Prints one line per figure: the medians per level and amx / avx512 (time: below 1 is faster; tok/s:
# above 1 is faster), then every round's values.
#
# usage: bench/amx_ab.sh [--rounds N] [--model FILE] [--force]
#   --force runs without AMX too (both levels are then avx512: a check of this script, not a figure)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 MODEL= FORCE=
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
B=build/bench
for f in "$B/bench_moe" "$B/bench_matmul" build/tokenmill; do
  [ -x "$f" ] || { echo "build $f first (cmake --build build)" >&2; exit 1; }
done
if ! grep -qw amx_int8 /proc/cpuinfo && [ -z "$FORCE" ]; then
  echo "no AMX-INT8 on this CPU (/proc/cpuinfo): nothing to compare (--force runs anyway)" >&2
  exit 1
fi
TM=build/tokenmill THREADS=2 LDIR= BASE=
. bench/table_lib.sh  # median, and run (one `bench engine` figure)

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# Lines "figure value" into $OUT/<isa>.
gbench() {  # isa binary filter
  TOKENMILL_ISA=$1 "$2" --benchmark_filter="$3" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    2>/dev/null | awk '/_median/ { n = $1; sub(/\/real_time_median$/, "", n); sub(/_median$/, "", n); print n " (" $3 ")", $2 }'
}
engine() {  # isa batch prompt gen key label
  local v
  v=$(TOKENMILL_ISA=$1 run "$MODEL" "$2" "$3" "$4" "$5")
  printf "%s %.1f\n" "$6" "${v:-nan}"
}
echo "amx_ab: $(lscpu | sed -n 's/^Model name: *//p'), commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds" >&2
for r in $(seq "$ROUNDS"); do
  for isa in avx512 amx; do
    {
      gbench "$isa" "$B/bench_moe" 'olmoe/(Q4_0|Q8_0)/n:(4|16|64)/threads:2'
      gbench "$isa" "$B/bench_matmul" 'BM_Gemm/(Q4_0|Q8_0)/896x896/n:(16|64)/threads:1'
      if [ -n "$MODEL" ]; then
        engine "$isa" 16 128 128 gen_tokens_per_s "engine 16 streams x 128 generated, tok/s"
        engine "$isa" 1 512 1 prompt_tokens_per_s "engine prompt 512, tok/s"
      fi
    } >>"$OUT/$isa"
    echo "amx_ab: round $r $isa done" >&2
  done
done
printf '| figure | avx512 | amx | amx / avx512 | rounds (avx512 / amx) |\n|---|---|---|---|---|\n'
awk '{ $NF = ""; sub(/ $/, ""); print }' "$OUT/avx512" | awk '!seen[$0]++' | while IFS= read -r fig; do
  a=$(grep -F -- "$fig " "$OUT/avx512" | awk '{ print $NF }')
  m=$(grep -F -- "$fig " "$OUT/amx" | awk '{ print $NF }')
  ma=$(echo "$a" | median) mm=$(echo "$m" | median)
  awk -v f="$fig" -v a="$ma" -v m="$mm" -v ra="$(echo $a)" -v rm="$(echo $m)" \
    'BEGIN { printf "| %s | %.4g | %.4g | %.3f | %s / %s |\n", f, a, m, (a > 0 ? m / a : 0), ra, rm }'
done
