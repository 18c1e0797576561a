// Sliding windows, gemma2, gemma3 and YaRN against llama.cpp (node-llama-cpp's prebuilt CPU library)
// on tiny random models from `tokenmill dummy` (256-wide rows), over a sequence of 133 positions, far
// past the windows (16 positions):
//   gemma2: every other layer sliding, attention and final logit soft-capping, post-norms, GeGLU;
//   gemma3: per-head q/k norms, sliding and global layers with their own RoPE (base 10000 unscaled
//           vs 1e6 with linear x2), 3 layers with pattern 3, and 6 layers with the default pattern 6;
//   YaRN (rope.scaling.type yarn, factor 4 over an original context of 32) on llama and qwen2.
// F32 files with weights of standard deviation 0.05 (logits not flat): mean KL(llama.cpp || tokenmill)
// over the positions < 1e-4, top-1 agreement >= 99.5 %, relrms (rms difference over the logits'
// spread, worst position) < 5e-3 (measured 2026-12-02: KLD 4e-8 .. 1e-7, relrms 5e-4 .. 8e-4, top-1
// 100 %). F16 files, and for gemma Q8_0 and Q4_K_M from `tokenmill quantize` (default weights; both
// sides round activations differently): KLD < 1e-4, relrms < 0.1, top-1 >= 90 %.
// Mistral's window on llama (llama.attention.sliding_window): llama.cpp ignores the key and attends
// to every position, so the two agree within the window (checked) and part past it (printed).
//
// Exit 0 pass, 1 fail, 77 skipped (node-llama-cpp not installed or its binary cannot load here).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { checkDummyFamily, checker, llamaLogits, loadLlama, positions, storiesSequence, summary, tm, tmLogits } from './common.mjs';

const llama = await loadLlama();
const { failures, check } = checker();
const fmt = (x) => x.toExponential(2);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-llamacpp-swa-'));
try {
  const { stories, seq } = storiesSequence();
  const dims = ['--n-vocab', '512', '--n-embd', '256', '--n-head', '4', '--n-head-kv', '2', '--n-ff', '512',
    '--n-ctx', '256', '--vocab', stories];
  const window = 16;
  const models = {
    gemma2: ['--arch', 'gemma2', '--n-layer', '3', '--sliding-window', String(window)],
    'gemma3 (pattern 3)': ['--arch', 'gemma3', '--n-layer', '3', '--sliding-window', String(window), '--swa-pattern', '3',
      '--rope-theta', '1000000', '--rope-scaling', 'linear', '--rope-factor', '2'],
    'gemma3 (6 layers)': ['--arch', 'gemma3', '--n-layer', '6', '--sliding-window', String(window), '--rope-theta', '1000000'],
    'llama YaRN': ['--arch', 'llama', '--n-layer', '2', '--rope-scaling', 'yarn', '--rope-factor', '4', '--rope-orig-ctx', '32'],
    'qwen2 YaRN': ['--arch', 'qwen2', '--n-layer', '2', '--rope-scaling', 'yarn', '--rope-factor', '4', '--rope-orig-ctx', '32'],
  };
  for (const [name, args] of Object.entries(models))
    await checkDummyFamily(llama, check, dir, name, [...dims, ...args], seq, name.startsWith('gemma') ? ['Q8_0', 'Q4_K_M'] : []);
  // Mistral's window on llama: the same up to the window, llama.cpp attends to everything past it
  {
    const f = path.join(dir, 'llama-swa-F32.gguf');
    tm(['dummy', ...dims, '--arch', 'llama', '--n-layer', '2', '--sliding-window', String(window), '--dtype', 'F32', '-o', f]);
    const pos = positions(tmLogits(f, seq), await llamaLogits(llama, f, seq));
    const inside = summary(pos, 0, window), past = summary(pos, window);
    check(inside.kld < 1e-4 && inside.top1 === 1,
      `llama sliding window ${window} F32, within the window: KLD ${fmt(inside.kld)}, top-1 ${inside.top1}, ` +
      `relrms ${fmt(inside.relrms)} (past it, where llama.cpp ignores llama.attention.sliding_window: KLD ` +
      `${fmt(past.kld)}, top-1 ${(100 * past.top1).toFixed(1)} %)`);
  }
} catch (e) {
  check(false, `error: ${e.stack ?? e.message}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
