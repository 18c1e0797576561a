// llama.cpp's speed on a GGUF file, measured on this machine with the same threads, for the CPU table
// (bench/cpu_table.sh uses it when llama-bench is not on PATH). llama.cpp is node-llama-cpp's
// prebuilt CPU library (tests/llamacpp: `npm install --omit=optional --ignore-scripts` there).
//
//   node bench/llamacpp_bench.mjs --model M.gguf [--threads 2] [--reps 3] [--what decode,prompt,batched]
//        [--gen 128] [--prompt 512] [--streams 16] [--npp 128] [--ntg 128]
// Prints one JSON object: {"decode_tok_s":..,"prompt_tok_s":..,"batched_tok_s":..,"build":..}, medians.
// decode: 8-token prompt, then `gen` greedy tokens, generated tokens / generation time (like
// llama-bench tg). prompt: `prompt` tokens in one evaluation (llama-bench pp). batched: `streams`
// sequences of one context, each an `npp`-token prompt then `ntg` tokens, all evaluated together
// (node-llama-cpp batches the sequences' tokens into one llama_decode per step, as
// llama-batched-bench does); generated tokens of all streams / time from the first generated token.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../tests/llamacpp/package.json'));
const { getLlama } = await import(require.resolve('node-llama-cpp'));

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const threads = Number(args.threads ?? 2), reps = Number(args.reps ?? 3);
const what = (args.what ?? 'decode,prompt,batched').split(',');
const gen = Number(args.gen ?? 128), pp = Number(args.prompt ?? 512);
const streams = Number(args.streams ?? 16), npp = Number(args.npp ?? 128), ntg = Number(args.ntg ?? 128);

const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', maxThreads: threads });
const model = await llama.loadModel({ modelPath: args.model });
const median = (v) => { const s = [...v].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
// Random ordinary tokens (ids 1000..20999 exist in every vocabulary we use), distinct per stream.
let seed = 12345;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const tokens = (n) => Array.from({ length: n }, () => 1000 + Math.floor(rnd() * 20000));
const now = () => performance.now();

async function decodeOnce() {
  const ctx = await model.createContext({ contextSize: 256, threads, batchSize: 512 });
  const seq = ctx.getSequence();
  let count = 0, t0 = 0;
  for await (const _ of seq.evaluate(tokens(8), { temperature: 0 })) {
    if (count === 0) t0 = now();  // first generated token: the prompt is done
    if (++count > gen) break;
  }
  const s = (now() - t0) / 1000;
  await ctx.dispose();
  return gen / s;
}
async function promptOnce() {
  const ctx = await model.createContext({ contextSize: pp + 16, threads, batchSize: pp });
  const seq = ctx.getSequence();
  const t0 = now();
  await seq.controlledEvaluate(tokens(pp).map((t, i) => (i === pp - 1 ? [t, { generateNext: { token: true } }] : t)));
  const s = (now() - t0) / 1000;
  await ctx.dispose();
  return pp / s;
}
async function batchedOnce() {
  const ctx = await model.createContext({ contextSize: streams * (npp + ntg + 8), sequences: streams, threads,
    batchSize: Math.max(512, streams * npp) });
  let first = 0;
  const runs = Array.from({ length: streams }, async () => {
    const seq = ctx.getSequence();
    let count = 0;
    for await (const _ of seq.evaluate(tokens(npp), { temperature: 0 })) {
      if (count === 0 && first === 0) first = now();
      if (++count >= ntg) break;
    }
  });
  await Promise.all(runs);
  const s = (now() - first) / 1000;
  await ctx.dispose();
  return (streams * (ntg - 1)) / s;
}

const out = { model: args.model, threads, reps, build: 'node-llama-cpp prebuilt (CPU)' };
for (const [key, fn] of [['decode', decodeOnce], ['prompt', promptOnce], ['batched', batchedOnce]]) {
  if (!what.includes(key)) continue;
  const v = [];
  for (let r = 0; r < reps; r++) v.push(await fn());
  out[`${key}_tok_s`] = median(v);
  out[`${key}_runs`] = v.map((x) => Math.round(x * 10) / 10);
}
await model.dispose();
console.log(JSON.stringify(out));
