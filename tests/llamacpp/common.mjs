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
