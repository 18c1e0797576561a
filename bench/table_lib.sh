# Shared by bench/cpu_table.sh and bench/family_table.sh (sourced, not run): one tokenmill `bench engine`
# figure, one llama-bench / llama-batched-bench figure, medians, and where llama.cpp's tools are.
# Expects TM, THREADS, NPP, NTG, LDIR (may be empty), BASE (may be empty).
# bench engine --json -> the value of a key for the given batch
field() { sed -e 's/},{/}\n{/g' | grep "\"batch\":$1," | sed -e "s/.*\"$2\":\([0-9.e+-]*\).*/\1/"; }
run() {  # model batch prompt_len gen_len key   (binary: $RUN_TM, default $TM)
  "${RUN_TM:-$TM}" bench engine --model "$1" --batch "$2" --prompt-len "$3" --gen-len "$4" --threads "$THREADS" \
    --repetitions 1 --max-num-batched-tokens 2048 --json 2>/dev/null | field "$2" "$5"
}

# llama.cpp on the same files when its tools are found (else the quoted figures).
[ -n "$LDIR$BASE" ] || { [ -x build-llamacpp/build/bin/llama-bench ] && LDIR=build-llamacpp/build/bin; }
if [ -n "$BASE" ]; then
  [ -x "$BASE" ] || { echo "--baseline $BASE is not an executable" >&2; exit 1; }
  LB=$BASE LBB=$BASE
elif [ -n "$LDIR" ]; then
  LB=$LDIR/llama-bench LBB=$LDIR/llama-batched-bench
  [ -x "$LB" ] && [ -x "$LBB" ] || { echo "no llama-bench / llama-batched-bench in $LDIR" >&2; exit 1; }
else
  LB=$(command -v llama-bench || true); LBB=$(command -v llama-batched-bench || true)
fi
lcpp_bench() {  # model -p -n -> avg_ts of one repetition
  "$LB" -m "$1" -t "$THREADS" -p "$2" -n "$3" -r 1 -o csv 2>/dev/null |
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /avg_ts/) c = i; next } { v = $c } END { gsub(/"/, "", v); print v }'
}
lcpp_batched() {  # model npl -> S_TG
  # -c: the context the streams need (without it llama.cpp takes the model's trained context for every
  # sequence: 48 GB of KV cache for phi-3.5-mini's 131k).
  "$LBB" -m "$1" -t "$THREADS" -c $(( (NPP + NTG) * $2 )) -npp "$NPP" -ntg "$NTG" -npl "$2" 2>/dev/null |
    awk -F'|' '/S_TG/ { for (i = 1; i <= NF; i++) if ($i ~ /S_TG/) c = i; next } c && $4 ~ /[0-9]/ { gsub(/ /, "", $c); v = $c } END { print v }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

