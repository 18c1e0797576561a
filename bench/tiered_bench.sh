#!/usr/bin/env bash
# Tiered routing vs the large model alone (issue 20's figure): a mixed workload of 70 % short
# questions and 30 % long prompts, sent with `tokenmill bench serve` (a JSONL dataset, streaming
# completions, ignore EOS) to
#   tiered: one server with a small and a large model and the router `auto` (prompts of at least
#           THRESHOLD tokens, counted with the large model's tokenizer, go to the large model, the rest
#           to the small one);
#   large:  one server with the large model alone.
# Prints throughput, TTFT p50/p99 (all requests, then short and long apart) and the share of
# requests each tier answered (tokenmill:router_requests_total, from /metrics, before/after deltas).
#
# Models (random weights of real shapes, `tokenmill dummy`, generated once into bench/models):
#   large: qwen2.5-0.5b Q8_0; small: a qwen2-shaped ~70M model (4 layers, 384 wide, tied, the same vocabulary).
#   LARGE_MODEL=FILE / SMALL_MODEL=FILE use other files (e.g. models/stories260K/stories260K.gguf).
# Threads: tiered splits THREADS between the two (small THREADS/2, large the rest) unless SMALL_THREADS /
# LARGE_THREADS say otherwise (e.g. both THREADS: the cores are shared, the small model's work is short);
# large alone gets all THREADS. Default THREADS: the number of cores.
#
# usage: bench/tiered_bench.sh      env: NUM_PROMPTS (200) CONCURRENCY (8) SHORT_OUT (32) LONG_OUT (64)
#        LONG_WORDS (900) THRESHOLD (256) SEED (1) THREADS PORT (8133) TOKENMILL (build/tokenmill)
#        MAX_MODEL_LEN (4096: both models' context; long prompts must fit) SMALL_THREADS LARGE_THREADS
set -euo pipefail
cd "$(dirname "$0")/.."
TM=${TOKENMILL:-build/tokenmill}
[ -x "$TM" ] || { echo "build tokenmill first (cmake --build build)" >&2; exit 1; }
NUM_PROMPTS=${NUM_PROMPTS:-200} CONCURRENCY=${CONCURRENCY:-8} SHORT_OUT=${SHORT_OUT:-32} LONG_OUT=${LONG_OUT:-64}
LONG_WORDS=${LONG_WORDS:-900} THRESHOLD=${THRESHOLD:-256} SEED=${SEED:-1} PORT=${PORT:-8133}
THREADS=${THREADS:-$(nproc)} MAX_MODEL_LEN=${MAX_MODEL_LEN:-4096}
[ "$SHORT_OUT" -lt "$LONG_OUT" ] || { echo "SHORT_OUT must be below LONG_OUT (they tell the requests apart)" >&2; exit 2; }
VOCAB=${VOCAB:-tests/data/tokenizers/ggml-vocab-qwen2.gguf}
mkdir -p bench/models
LARGE=${LARGE_MODEL:-bench/models/qwen2.5-0.5b-q8_0.gguf}
SMALL=${SMALL_MODEL:-bench/models/qwen2-small-70m-q8_0.gguf}
[ -f "$LARGE" ] || "$TM" dummy --shape qwen2.5-0.5b --dtype Q8_0 --vocab "$VOCAB" -o "$LARGE" >&2
[ -f "$SMALL" ] || "$TM" dummy --arch qwen2 --tied --n-vocab 151936 --n-embd 384 --n-layer 4 --n-head 6 --n-head-kv 2 --n-ff 1536 \
  --n-ctx 32768 --rope-theta 1000000 --dtype Q8_0 --vocab "$VOCAB" -o "$SMALL" >&2

OUT=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; if [ -n "${KEEP:-}" ]; then echo "kept $OUT" >&2; else rm -rf "$OUT"; fi; }
trap cleanup EXIT

# The dataset: 70 % short questions, 30 % long prompts (a passage of LONG_WORDS words and a question),
# shuffled with SEED; max_tokens per line.
node - "$OUT/mixed.jsonl" "$NUM_PROMPTS" "$LONG_WORDS" "$SHORT_OUT" "$LONG_OUT" "$SEED" <<'EOF'
const [file, n, longWords, shortOut, longOut, seed] = process.argv.slice(2);
let s = Number(seed) * 2654435761 % 4294967296 || 1;
const rnd = () => ((s = (s * 1664525 + 1013904223) % 4294967296) / 4294967296);
const questions = ['What is the capital of France?', 'How many legs does a spider have?', 'Translate "good morning" to Spanish.',
  'What is 17 times 3?', 'Name a primary colour.', 'Who wrote Hamlet?', 'What does CPU stand for?', 'Is a tomato a fruit?'];
const words = 'the a model server request token memory budget route small large queue batch cache prompt answer time'.split(' ');
const lines = [];
const total = Number(n), nLong = Math.round(total * 0.3);
for (let i = 0; i < total; i++) {
  const q = questions[Math.floor(rnd() * questions.length)];
  if (i < nLong) {
    const passage = Array.from({ length: Number(longWords) }, () => words[Math.floor(rnd() * words.length)]).join(' ');
    lines.push({ prompt: `Read the passage and answer.\n\n${passage}\n\nQuestion: ${q}\nAnswer:`, max_tokens: Number(longOut) });
  } else {
    lines.push({ prompt: `Question: ${q}\nAnswer:`, max_tokens: Number(shortOut) });
  }
}
for (let i = lines.length - 1; i > 0; i--) {  // Fisher-Yates
  const j = Math.floor(rnd() * (i + 1));
  [lines[i], lines[j]] = [lines[j], lines[i]];
}
require('fs').writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
EOF

cat >"$OUT/models.yaml" <<EOF
models:
  - {name: small, file: $(realpath "$SMALL"), threads: ${SMALL_THREADS:-$(( THREADS / 2 > 0 ? THREADS / 2 : 1 ))}, max_model_len: $MAX_MODEL_LEN}
  - {name: large, file: $(realpath "$LARGE"), threads: ${LARGE_THREADS:-$(( THREADS - THREADS / 2 > 0 ? THREADS - THREADS / 2 : 1 ))}, max_model_len: $MAX_MODEL_LEN}
routers:
  - name: auto
    default: small
    tokenizer_model: large
    rules:
      - {name: long, min_prompt_tokens: $THRESHOLD, model: large}
EOF

scrape() { curl -sf "http://127.0.0.1:$PORT/metrics" | grep '^tokenmill:router_requests_total' || true; }
run() {  # name model serve-args...
  local name=$1 model=$2; shift 2
  "$TM" serve --port "$PORT" "$@" >"$OUT/$name.log" 2>&1 &
  PID=$!
  "$TM" bench serve --base-url "http://127.0.0.1:$PORT" --model "$model" --endpoint completions \
    --dataset jsonl --dataset-path "$OUT/mixed.jsonl" --num-prompts "$NUM_PROMPTS" --max-concurrency "$CONCURRENCY" \
    --ignore-eos --seed "$SEED" --num-warmups 0 --ready-check-timeout-sec 600 --metrics-interval 0 --no-progress \
    --json "$OUT/$name.json" >/dev/null 2>"$OUT/$name.err" ||
    { echo "bench serve against $name failed:" >&2; cat "$OUT/$name.err" "$OUT/$name.log" >&2; exit 1; }
  scrape >"$OUT/$name.metrics"
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
}
run tiered auto --models-file "$OUT/models.yaml"
run large large --model "large=$(realpath "$LARGE")" --threads "$THREADS" --max-model-len "$MAX_MODEL_LEN"

# Figures from the JSON reports (+ short/long TTFT apart, by each request's max_tokens) and the
# routing counters (the server started fresh, so the counters are the run's).
node - "$OUT" "$SHORT_OUT" "$LONG_OUT" <<'EOF'
const fs = require('fs');
const [dir, shortOut] = process.argv.slice(2);
const q = (xs, p) => { if (!xs.length) return NaN; const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const f = (v, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : '-');
const rows = [];
for (const name of ['tiered', 'large']) {
  const j = JSON.parse(fs.readFileSync(`${dir}/${name}.json`, 'utf8'));
  const r = j.requests ?? j.scenarios?.[0]?.runs?.[0]?.requests ?? {};  // per-request samples live in the run
  // Short and long requests told apart by their output length (ignore EOS: exactly max_tokens).
  const ttft = r.ttft_ms ?? [], outl = r.output_tokens ?? [], err = r.error ?? [];
  const shortT = [], longT = [];
  ttft.forEach((t, i) => { if (!err[i]) (outl[i] <= Number(shortOut) ? shortT : longT).push(t); });
  let share = '-';
  const m = fs.readFileSync(`${dir}/${name}.metrics`, 'utf8');
  const count = (model) => m.split('\n').filter((l) => l.includes(`model_name="${model}"`))
    .reduce((a, l) => a + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  if (name === 'tiered') {
    const s = count('small'), l = count('large');
    share = `${f((100 * s) / (s + l || 1), 0)} % / ${f((100 * l) / (s + l || 1), 0)} %`;
  } else {
    share = '0 % / 100 %';
  }
  rows.push([name === 'tiered' ? 'tiered (auto: small + large)' : 'large alone', f(j.request_throughput, 2),
             f(j.output_throughput), f(j.ttft_ms?.p50), f(j.ttft_ms?.p99),
             `${f(q(shortT, 0.5))} / ${f(q(shortT, 0.99))}`, `${f(q(longT, 0.5))} / ${f(q(longT, 0.99))}`,
             share, `${j.completed}/${(j.completed ?? 0) + (j.failed ?? 0)}`]);
}
console.log('| setup | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | short TTFT p50 / p99 | long TTFT p50 / p99 | small / large share | completed |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
EOF
echo
echo "tokenmill $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d %H:%M') UTC," \
  "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $THREADS threads; small $(basename "$SMALL"), large $(basename "$LARGE");" \
  "$NUM_PROMPTS prompts (70 % short: ${SHORT_OUT} tokens out; 30 % ~${LONG_WORDS} words: ${LONG_OUT} out), concurrency $CONCURRENCY," \
  "long = at least $THRESHOLD tokens"
