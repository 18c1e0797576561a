// llama.cpp loads the LoRA adapters `tokenmill lora dummy` writes and computes what tokenmill computes
// with them: for random F32 models of three families (llama with every matrix, output and token_embd
// adapted; qwen2 (tied output) with every layer matrix; phi3 with its fused attn_qkv and gate/up),
// llama.cpp's logits with the adapter at scale 0.75 (node-llama-cpp's context `lora` option) against
// `tokenmill eval logits --lora` on the base model and on the model `tokenmill lora merge` writes:
// adapter files in F32 and F16; relrms (rms of the difference over the rms spread) under 5e-3 at every position, as for F32 models
// without adapters (llama.cpp rounds queries to f16). Plus: the adapter changes llama.cpp's logits
// (relrms to the base model's > 0.05), so the check cannot pass with the adapter ignored.
//
// Exit 0 pass, 1 fail, 77 skipped (node-llama-cpp not installed or its binary cannot load here).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sourceDir = process.env.TM_SOURCE_DIR ?? path.resolve(here, '../..');
const binary = process.env.TM_BINARY ?? path.join(sourceDir, 'build/tokenmill');

let llama;
try {
  const { getLlama } = await import('node-llama-cpp');
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false });
} catch (e) {
  console.log(`llama.cpp unavailable (npm install --omit=optional --ignore-scripts in tests/llamacpp): ${e.message}: skipped`);
  process.exit(77);
}

const failures = [];
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}
function tm(args) {
  const r = spawnSync(binary, args, { encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`tokenmill ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}
const tmLogits = (file, tokens, extra = []) =>
  tm(['eval', 'logits', '--model', file, '--tokens', tokens.join(','), '--threads', '2', ...extra])
    .trim().split('\n').map((l) => JSON.parse(l).logits);

async function llamaLogits(file, tokens, lora) {
  const model = await llama.loadModel({ modelPath: file });
  try {
    const ctx = await model.createContext({ contextSize: 256, batchSize: 256, threads: 2, ...(lora ? { lora } : {}) });
    const res = await ctx.getSequence().controlledEvaluate(tokens.map((t) => [t, { generateNext: { logits: true } }]));
    const rows = res.map((r) => {
      const l = new Array(r.next.logits.size);
      for (const [t, v] of r.next.logits) l[t] = v;
      return l;
    });
    await ctx.dispose();
    return rows;
  } finally {
    await model.dispose();
  }
}

function relrms(a, b) {  // a against b, over b's spread
  const mb = b.reduce((s, v) => s + v, 0) / b.length;
  let e = 0, d = 0;
  for (let i = 0; i < b.length; i++) {
    e += (a[i] - b[i]) ** 2;
    d += (b[i] - mb) ** 2;
  }
  return Math.sqrt(e / d);
}
const worst = (rows, ref) => Math.max(...rows.map((r, p) => relrms(r, ref[p])));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-llamacpp-lora-'));
try {
  const stories = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
  const seq = [1, 403, 407, 261, 378, 300, 259, 292, 266, 370, 411, 260, 273, 283, 434, 261];
  const dims = ['--n-vocab', '512', '--n-embd', '256', '--n-layer', '2', '--n-head', '4', '--n-head-kv', '2', '--n-ff', '512'];
  const cases = [['llama', 'all', [], 'F32'], ['llama', 'all', [], 'F16'], ['qwen2', 'layers', [], 'F32'],
    ['phi3', 'all', ['--n-ctx', '4096', '--rope-orig-ctx', '512'], 'F32']];
  for (const [arch, targets, extra, type] of cases) {
    const base = path.join(dir, `${arch}.gguf`), ad = path.join(dir, `${arch}-lora-${type}.gguf`);
    const merged = path.join(dir, `${arch}-merged-${type}.gguf`);
    tm(['dummy', '--arch', arch, ...dims, ...(extra.length ? extra : ['--n-ctx', '256']), '--vocab', stories, '--dtype', 'F32', '-o', base]);
    tm(['lora', 'dummy', '-m', base, '-o', ad, '--targets', targets, '--rank', '8', '--alpha', '16', '--spread', '0.05', '--dtype', type]);
    tm(['lora', 'merge', '-m', base, '--lora', `${ad}:0.75`, '-o', merged]);
    const theirs = await llamaLogits(base, seq, { adapters: [{ filePath: ad, scale: 0.75 }] });
    const theirsBase = await llamaLogits(base, seq);
    const mineMerged = tmLogits(merged, seq);
    const mineLora = tmLogits(base, seq, ['--lora', `${ad}:0.75`]);
    const moved = worst(theirsBase, theirs);
    check(moved > 0.05, `${arch} ${type} adapter: the adapter moves llama.cpp's logits (relrms ${moved.toExponential(2)} > 5e-2)`);
    const a = worst(theirs, mineLora), b = worst(theirs, mineMerged);
    check(a < 5e-3, `${arch} ${type} adapter of ${targets}: llama.cpp + adapter vs tokenmill --lora: relrms ${a.toExponential(2)} (< 5e-3)`);
    check(b < 5e-3, `${arch} ${type} adapter of ${targets}: llama.cpp + adapter vs tokenmill's merged model: relrms ${b.toExponential(2)} (< 5e-3)`);
  }
} catch (e) {
  check(false, `error: ${e.stack ?? e.message}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
