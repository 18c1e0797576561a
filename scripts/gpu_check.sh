#!/usr/bin/env bash
# The CUDA backend's device checks (issue 26) in one run, for a session that is lent a GPU. Build
# here (no GPU needed) with scripts/gpu_bundle.sh, which puts the CUDA builds of test_gpu and
# tokenmill and the shared libraries they need into .gpu-bundle/, then run this script on the device
# machine (the `device` tool's run, carrying .gpu-bundle):
#
#   LD_LIBRARY_PATH=.gpu-bundle/lib scripts/gpu_check.sh .gpu-bundle/test_gpu .gpu-bundle/tokenmill \
#     .gpu-bundle/bench_gpu_kernels
#
# 1. every GPU test: the kernels against the CPU oracle, the GPU forward against the CPU reference
#    forward on tiny models of every dense and MoE family (gpt-oss too), with and without CUDA graphs,
#    and stories260K's greedy decode (no device visible is a failure here). A failing test is listed
#    and the run goes on -- device time is scarce, later figures are still worth having -- and the
#    script exits 1 at the end;
# 2. with the tokenmill binary: the engine end to end on the GPU (stories260K's greedy text through
#    `generate --device cuda`, with CUDA graphs and with --enforce-eager), then decode speed: random-weight files of the Llama-3-8B shape (BF16,
#    Q8_0) and the Qwen2.5-0.5B shape written to $GPU_CHECK_DIR (default /tmp/tm-gpu), one stream and
#    64 / 256 streams through `bench engine --device cuda`, each line naming the GPU, with the share of
#    the HBM roofline (H200: 4.8 TB/s; GPU_CHECK_BW overrides) for one-stream decode, and one-stream
#    decode again with --enforce-eager (no CUDA graphs) to show what launch overhead costs, the
#    prefill of one long prompt (GPU_CHECK_PROMPT tokens, default 4096) in one step, and the largest
#    batch over an INT8 and an FP8 KV cache (--kv-cache-dtype int8, fp8); before those,
#    with the third binary, the kernels one at a time (bench_gpu_kernels: the GEMV's bandwidth per
#    type, the tensor-core GEMM's and the attentions' rates), seconds in all.
# Environment: GPU_CHECK_SKIP_BENCH=1 stops after step 2's greedy check; a dry run of the whole script on a
# machine without a GPU (to check the script, not the GPU): GPU_CHECK_DEVICE=cuda-emu (device tests
# skip, the engine runs the CUDA kernels on the CPU's emulator of CUDA) or gpu-oracle (the host oracle)
# with GPU_CHECK_SPECS="tiny-llama:Q8_0", GPU_CHECK_BATCHES="1 4" and GPU_CHECK_PROMPT=96.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build-cuda/tests/test_gpu}
TM=${2:-}
KB=${3:-}
[ -x "$BIN" ] || { echo "no test binary at $BIN (build it with -DTM_CUDA=ON, see above)" >&2; exit 2; }
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
OUT=$(mktemp)
status=0
DEV=${GPU_CHECK_DEVICE:-cuda}
# (on a device, the emulator's runs of the same tests are left to the machines without one)
FILTER=; [ "$DEV" = cuda ] && FILTER=--gtest_filter=-*OnEmu.*:*/cuda_emu:CudaEmu.*
TM_SOURCE_DIR=$PWD "$BIN" --gtest_brief=0 $FILTER 2>&1 | tee "$OUT" || status=1  # test data from this checkout
if [ "$DEV" = cuda ] && grep -q "no CUDA device" "$OUT"; then
  echo "gpu_check: the device tests were skipped: no CUDA device visible" >&2
  exit 1
fi
# A failure does not stop the run (device time is scarce: every later figure is still worth having);
# the script exits 1 at the end if anything failed.
fail=0
if grep -q "FAILED" "$OUT" || [ "$status" -ne 0 ]; then
  echo "gpu_check: GPU tests failed:" >&2
  grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT" | sort -u >&2 || true
  fail=1
else
  echo "gpu_check: all GPU tests passed on the device ($GPU)"
fi
[ -n "$TM" ] || exit $fail
[ -x "$TM" ] || { echo "no tokenmill binary at $TM" >&2; exit 2; }

# 2. the engine end to end: stories260K's greedy text (BOS only, 200 tokens, as llama2.c's run.c), with
# decode steps replayed as CUDA graphs (the default) and eagerly
want=$(cat models/stories260K/expected_greedy_200.txt)
for eager in "" --enforce-eager; do
  got=$(timeout 120 "$TM" generate --model models/stories260K/stories260K.gguf --device "$DEV" --prompt "" \
    --max-tokens 200 --temperature 0 --ignore-eos $eager 2>/dev/null || true)
  if [ "$got" = "$want" ]; then echo "gpu_check: generate --device $DEV $eager: stories260K greedy text equals llama2.c's"
  else
    echo "gpu_check: generate --device $DEV $eager: greedy text differs from llama2.c's:" >&2
    printf 'got:  %s\nwant: %s\n' "$got" "$want" >&2
    fail=1
  fi
done
[ "${GPU_CHECK_SKIP_BENCH:-0}" = 1 ] && exit $fail

# 3. speed (bench engine's JSON: gen_tokens_per_s), each figure with the GPU's name
DIR=${GPU_CHECK_DIR:-/tmp/tm-gpu}
BW=${GPU_CHECK_BW:-4.8e12}
if [ -n "$KB" ] && [ "$DEV" != gpu-oracle ]; then  # the kernels one at a time (the emulator: tiny shapes, checks the program only)
  timeout 300 "$KB" "$DEV" "$BW" || { echo "gpu_check: bench_gpu_kernels failed" >&2; fail=1; }
fi
mkdir -p "$DIR"
bench() {  # file batches(comma-separated) [extra flags] -> bench engine's JSON (one model load for all batches)
  timeout 400 "$TM" bench engine --model "$1" --device "$DEV" --batch "$2" --prompt-len 128 --gen-len 128 \
    --repetitions 1 --max-num-batched-tokens 8192 --max-num-seqs 256 --json "${@:3}" 2>/dev/null || true
}
field() {  # json batch -> gen_tokens_per_s of that batch
  { echo "$1" | sed -e 's/},{/}\n{/g' | grep "\"batch\":$2," | sed -e 's/.*"gen_tokens_per_s":\([0-9.eE+-]*\).*/\1/' | tail -1; } || true
}
BATCHES=${GPU_CHECK_BATCHES:-1 64 256}
PROMPT=${GPU_CHECK_PROMPT:-4096}
for spec in ${GPU_CHECK_SPECS:-llama-3-8b:BF16 llama-3-8b:Q8_0 qwen2.5-0.5b:BF16}; do
  shape=${spec%%:*} dtype=${spec##*:} f="$DIR/$shape-$dtype.gguf"
  [ -f "$f" ] || timeout 300 "$TM" dummy --shape "$shape" --dtype "$dtype" -o "$f" >/dev/null 2>&1 || { echo "gpu_check: dummy $spec failed" >&2; fail=1; continue; }
  bytes=$(stat -c %s "$f")
  json=$(bench "$f" "$(echo $BATCHES | tr ' ' ',')")
  for b in $BATCHES; do
    t=$(field "$json" "$b")
    if [ -z "$t" ]; then echo "gpu_check: $GPU $shape $dtype batch $b: no figure (bench engine failed)"; fail=1; continue; fi
    if [ "$b" = 1 ]; then
      awk -v g="$GPU" -v s="$shape" -v d="$dtype" -v t="$t" -v by="$bytes" -v bw="$BW" 'BEGIN {
        printf "gpu_check: %s %s %s decode 1 stream: %.1f tok/s, %.0f GB/s of weights = %.0f %% of %.1f TB/s\n",
          g, s, d, t, t * by / 1e9, 100 * t * by / bw, bw / 1e12 }'
    else
      echo "gpu_check: $GPU $shape $dtype $b streams x 128 generated: $t tok/s"
    fi
  done
  # one stream without CUDA graphs: what launch overhead costs (small models are bound by it)
  e=$(field "$(bench "$f" 1 --enforce-eager)" 1)
  echo "gpu_check: $GPU $shape $dtype decode 1 stream with --enforce-eager (no CUDA graphs): ${e:-no figure} tok/s"
  # a long prompt in one step (TTFT's side: the tensor-core GEMM and the prefill attention's tiles)
  p=$(timeout 300 "$TM" bench engine --model "$f" --device "$DEV" --batch 1 --prompt-len "$PROMPT" --gen-len 1 \
    --repetitions 1 --max-num-batched-tokens "$PROMPT" --max-model-len $((PROMPT + 16)) --json 2>/dev/null || true)
  p=$(echo "$p" | sed -n -e 's/.*"prompt_tokens_per_s":\([0-9.eE+-]*\).*/\1/p' | tail -1)
  echo "gpu_check: $GPU $shape $dtype prefill of one $PROMPT-token prompt: ${p:-no figure} prompt tok/s"
  # the largest batch again over an INT8 and an FP8 KV cache (half the bytes the attention reads per token)
  last=${BATCHES##* }
  if [ "$last" != 1 ] && [ "$dtype" = Q8_0 ]; then  # (one model: device time is scarce)
    for kvt in int8 fp8; do
      q=$(field "$(bench "$f" "$last" --kv-cache-dtype "$kvt")" "$last")
      echo "gpu_check: $GPU $shape $dtype $last streams x 128 generated, --kv-cache-dtype $kvt: ${q:-no figure} tok/s"
    done
  fi
done
exit $fail
