// Measures the time to first token of short requests while a long prompt is being prefilled, and the
// inter-token gaps of a stream that was already decoding. Not a ctest test (it takes minutes on a
// real-shaped model); the figures in docs/server.md come from it.
//
//   node tests/e2e/ttft_long_prefill.mjs --model /tmp/qwen-dummy.gguf [--long 4096] [--budget 512]
//                                        [--threshold N] [--threads 2]
// Make the model first, e.g.:
//   build/tokenmill dummy --shape qwen2.5-0.5b --dtype Q8_0 \
//       --vocab tests/data/tokenizers/ggml-vocab-qwen2.gguf -o /tmp/qwen-dummy.gguf
import { startServer, sleep } from './lib/server.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const model = args.model ?? '/tmp/qwen-dummy.gguf';
const longLen = Number(args.long ?? 4096);
const budget = Number(args.budget ?? 512);
const threads = args.threads ?? '2';
const serverArgs = ['--model', model, '--max-model-len', String(longLen + 512), '--max-num-batched-tokens', String(budget),
                    '--threads', threads, '--max-num-seqs', '16'];
if (args.threshold !== undefined) serverArgs.push('--long-prefill-token-threshold', args.threshold);

const server = await startServer(serverArgs, { timeoutMs: 600000 });
const url = `${server.baseURL}/completions`;
const vocab = (await (await fetch(`${server.url}/tokenize`, { method: 'POST', body: '{"prompt":"a"}' })).json());

// Streams a completion; resolves { ttft, gaps, total } in ms (ttft: request sent -> first text chunk).
async function streamed(body, onToken, signal) {
  const t0 = performance.now();
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ ...body, stream: true }), signal });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let ttft = null;
  let last = null;
  const gaps = [];
  let buf = '';
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch {
      break;  // aborted
    }
    const { value, done } = chunk;
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (!j.choices?.length) continue;
      const now = performance.now();
      if (ttft === null) ttft = now - t0;
      else gaps.push(now - last);
      last = now;
      onToken?.(now);
    }
  }
  return { ttft, gaps, total: performance.now() - t0 };
}

const shortBody = (i) => ({ prompt: `Short request number ${i}: hello`, max_tokens: 4, ignore_eos: true, temperature: 0 });
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

// 1. Baseline: short requests alone.
const alone = [];
for (let i = 0; i < 5; i++) alone.push((await streamed(shortBody(i))).ttft);

// 2. A decoding stream, then the long prompt, then short requests one after another until the long
//    prompt has its first token; the decoding stream's gaps are recorded while the long prompt runs.
let longDone = false;
let longStart = Infinity;
const decodeGaps = [];
let lastTok = null;
const stop = new AbortController();
const decoder = streamed({ prompt: 'A stream that keeps decoding', max_tokens: longLen, ignore_eos: true }, (now) => {
  if (lastTok !== null && now > longStart && !longDone) decodeGaps.push(now - lastTok);
  lastTok = now;
}, stop.signal);
await sleep(2000);
const ids = Array.from({ length: longLen }, (_, i) => 1000 + ((i * 7919) % 20000));
longStart = performance.now();
const longReq = streamed({ prompt: ids, max_tokens: 1, temperature: 0 }).then((r) => {
  longDone = true;
  return r;
});
await sleep(200);
const during = [];
while (!longDone) during.push((await streamed(shortBody(100 + during.length))).ttft);
const longR = await longReq;
stop.abort();
await decoder;

const report = {
  model, long_prompt_tokens: longLen, max_num_batched_tokens: budget, threshold: args.threshold ?? 'serve default (budget/2)',
  threads: Number(threads),
  short_ttft_alone_ms: { median: pct(alone, 50), max: Math.max(...alone) },
  long_prompt_ttft_ms: longR.ttft,
  short_ttft_during_long_prefill_ms: { count: during.length, median: pct(during, 50), p90: pct(during, 90), max: Math.max(...during) },
  decoding_stream_itl_during_long_prefill_ms: { count: decodeGaps.length, median: pct(decodeGaps, 50),
                                                max: Math.max(...decodeGaps) },
};
console.log(JSON.stringify(report, null, 2));
await server.stop();
