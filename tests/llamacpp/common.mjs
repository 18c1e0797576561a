// Shared by the llama.cpp comparisons (swa.mjs, gptoss.mjs, embed.mjs; interop.mjs and lora.mjs keep their own copies for now): llama.cpp
// through node-llama-cpp's prebuilt CPU library, tokenmill through its CLI, and the measures they are
// compared by (relrms, KL divergence, top-1 agreement).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = process.env.TM_SOURCE_DIR ?? path.resolve(here, '../..');
export const binary = process.env.TM_BINARY ?? path.join(sourceDir, 'build/tokenmill');

// llama.cpp, or exit 77 (skipped) when node-llama-cpp is not installed or cannot load here.
export async function loadLlama() {
  try {
    const { getLlama } = await import('node-llama-cpp');
    return await getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false });
  } catch (e) {
    console.log(`llama.cpp unavailable (npm install --omit=optional --ignore-scripts in tests/llamacpp): ${e.message}: skipped`);
    process.exit(77);
  }
}

export function checker() {
  const failures = [];
  const check = (ok, what) => {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
    if (!ok) failures.push(what);
  };
  return { failures, check };
}

export function tm(args) {
  const r = spawnSync(binary, args, { encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`tokenmill ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// tokenmill's next-token logits at every position of `tokens`
export const tmLogits = (file, tokens) => tm(['eval', 'logits', '--model', file, '--tokens', tokens.join(','), '--threads', '2'])
  .trim().split('\n').map((l) => JSON.parse(l).logits);

// llama.cpp's, as dense arrays
export async function llamaLogits(llama, file, tokens, contextSize = 256) {
  const model = await llama.loadModel({ modelPath: file });
  try {
    const ctx = await model.createContext({ contextSize, batchSize: contextSize, threads: 2 });
    const res = await ctx.getSequence().controlledEvaluate(tokens.map((t) => [t, { generateNext: { logits: true } }]));
    const rows = res.map((r) => {
      const out = [];
      for (const [t, v] of r.next.logits) out[t] = v;
      return out;
    });
    await ctx.dispose();
    return rows;
  } finally {
    await model.dispose();
  }
}

export function relrms(a, b) {  // a against b, over b's spread
  const mb = b.reduce((s, v) => s + v, 0) / b.length;
  let e = 0, d = 0;
  for (let i = 0; i < b.length; i++) {
    e += (a[i] - b[i]) ** 2;
    d += (b[i] - mb) ** 2;
  }
  return Math.sqrt(e / d);
}
export const argmax = (a) => a.reduce((bi, v, i) => (v > a[bi] ? i : bi), 0);
function logSoftmax(a) {
  const m = Math.max(...a);
  const lse = m + Math.log(a.reduce((s, v) => s + Math.exp(v - m), 0));
  return a.map((v) => v - lse);
}
// KL(P || Q), P = softmax(ref) (llama.cpp), Q = softmax(model) (tokenmill), in float64.
export function kld(ref, model) {
  const lp = logSoftmax(ref), lq = logSoftmax(model);
  let s = 0;
  for (let i = 0; i < lp.length; i++) s += Math.exp(lp[i]) * (lp[i] - lq[i]);
  return Math.max(0, s);
}

// Per position of `mine` (tokenmill) against `theirs` (llama.cpp): relrms, KL divergence, same top-1.
export function positions(mine, theirs) {
  return mine.map((row, p) => ({ r: relrms(theirs[p], row), kld: kld(theirs[p], row), same: argmax(theirs[p]) === argmax(row) }));
}
// Summary over positions [from, to): worst relrms, mean KLD, top-1 agreement (fraction).
export function summary(pos, from = 0, to = pos.length) {
  const s = pos.slice(from, to);
  return {
    relrms: Math.max(...s.map((x) => x.r)),
    kld: s.reduce((a, x) => a + x.kld, 0) / s.length,
    top1: s.filter((x) => x.same).length / s.length,
    n: s.length,
  };
}

// The token sequence the dummy-family checks run over: stories260K's prompt and its greedy 128
// tokens (133 positions), as ids of its 512-token vocabulary.
export function storiesSequence() {
  const stories = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
  const gen = JSON.parse(tm(['generate', '--model', stories, '--prompt', 'Once upon a time', '--max-tokens', '128',
    '--temperature', '0', '--ignore-eos', '--json']));
  return { stories, seq: [...gen.prompt_tokens, ...gen.tokens] };
}

// One dummy model family against llama.cpp over `seq`: `tokenmill dummy <args>` in F32 with weights
// of sd 0.05 (logits not flat: KLD < 1e-4, top-1 >= 99.5 %, relrms < 5e-3), then in F16 and each of
// `types` from `tokenmill quantize` (default weights; both sides round activations differently:
// KLD < 1e-4, relrms < 0.1, top-1 >= 90 %). Files go to `dir`. Mixtures of experts: routing is
// discrete, and where a token's last chosen expert and the next one are a near tie, either side's
// activation rounding can pick the other and that position differs as much as the experts' outputs
// do (interop.mjs 4e); `routingOutliers` such positions (relrms above 5x the median position's) may
// appear in the rounded files, and the bounds apply to the other positions.
export async function checkDummyFamily(llama, check, dir, name, args, seq, types = [], { routingOutliers = 0 } = {}) {
  const fmt = (x) => x.toExponential(2);
  const slug = name.replace(/[^a-z0-9]+/gi, '-');
  const f32 = path.join(dir, `${slug}-F32.gguf`);
  tm(['dummy', ...args, '--std', '0.05', '--dtype', 'F32', '-o', f32]);
  {
    const s = summary(positions(tmLogits(f32, seq), await llamaLogits(llama, f32, seq)));
    check(s.kld < 1e-4 && s.top1 >= 0.995 && s.relrms < 5e-3,
      `${name} F32: KLD ${fmt(s.kld)} (< 1e-4), top-1 ${(100 * s.top1).toFixed(1)} % of ${s.n} (>= 99.5 %), ` +
      `relrms ${fmt(s.relrms)} (< 5e-3)`);
  }
  const src = path.join(dir, `${slug}-F16.gguf`);
  tm(['dummy', ...args, '--dtype', 'F16', '-o', src]);
  const files = [['F16', src]];
  for (const type of types) {
    const f = path.join(dir, `${slug}-${type}.gguf`);
    tm(['quantize', src, f, '--type', type]);
    files.push([type, f]);
  }
  for (const [type, f] of files) {
    const all = positions(tmLogits(f, seq), await llamaLogits(llama, f, seq));
    // (an outlier: more than 5x the median position's relrms, as interop.mjs 4e counts them)
    const med = [...all.map((x) => x.r)].sort((x, y) => x - y)[Math.floor(all.length / 2)];
    const kept = routingOutliers > 0 ? all.filter((x) => x.r <= 5 * med) : all, out = all.length - kept.length;
    const s = summary(kept);
    const flips = routingOutliers > 0 ? `, ${out} routing outlier(s) (<= ${routingOutliers}) left out` : '';
    check(out <= routingOutliers && s.kld < 1e-4 && s.relrms < 0.1 && s.top1 >= 0.9,
      `${name} ${type}: KLD ${fmt(s.kld)} (< 1e-4), relrms ${fmt(s.relrms)} (< 0.1), ` +
      `top-1 ${(100 * s.top1).toFixed(1)} % of ${s.n}${flips}`);
  }
}
