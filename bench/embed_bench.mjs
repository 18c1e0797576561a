// Embeddings per second: tokenmill's /v1/embeddings against llama.cpp (node-llama-cpp's prebuilt CPU
// library, tests/llamacpp: `npm install --omit=optional --ignore-scripts` there) on the same GGUF and
// the same token sequences, same threads.
//
//   node bench/embed_bench.mjs --model M.gguf [--threads 2] [--n 256] [--len 32] [--batches 1,32,256]
//
// tokenmill: `tokenmill serve` on a free port; for each batch size B, requests of B inputs (token id
// arrays of --len tokens) one after another until --n inputs are embedded; embeddings / wall time
// (HTTP and JSON included). llama.cpp: an embedding context (contextSize and batchSize 2 * len),
// getEmbeddingFor on each input in turn: node-llama-cpp evaluates one sequence per call, so its
// figure does not depend on B (llama-server --embedding would batch several sequences of a request).
// Prints one JSON object: {"tokenmill": {"1": eps, ...}, "llamacpp": eps, "n", "len", "threads"}.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../tests/llamacpp/package.json'));
const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const threads = Number(args.threads ?? 2), n = Number(args.n ?? 256), len = Number(args.len ?? 32);
const batches = (args.batches ?? '1,32,256').split(',').map(Number);
const binary = args.binary ?? path.join(here, '../build/tokenmill');

let seed = 4242;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
// [CLS]/BOS-free random ordinary ids: 200.. stay inside every vocabulary the bench uses
const inputs = Array.from({ length: n }, () => Array.from({ length: len }, () => 200 + Math.floor(rnd() * 300)));

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

async function tokenmill() {
  const port = await freePort();
  const proc = spawn(binary, ['serve', '--model', args.model, '--port', String(port), '--threads', String(threads)],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  const out = {};
  try {
    const post = (input) => fetch(`${url}/v1/embeddings`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input }),
    }).then((r) => r.json());
    await post(inputs.slice(0, 2));  // warm-up
    for (const b of batches) {
      const t0 = performance.now();
      for (let i = 0; i < n; i += b) {
        const r = await post(inputs.slice(i, Math.min(n, i + b)));
        if (!r.data) throw new Error(JSON.stringify(r));
      }
      out[b] = n / ((performance.now() - t0) / 1000);
    }
  } finally {
    proc.kill('SIGTERM');
  }
  return out;
}

async function llamacpp() {
  const { getLlama } = await import(require.resolve('node-llama-cpp'));
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error', maxThreads: threads });
  const model = await llama.loadModel({ modelPath: args.model });
  const ctx = await model.createEmbeddingContext({ contextSize: 2 * len + 8, batchSize: 2 * len + 8, threads });
  await ctx.getEmbeddingFor(inputs[0]);  // warm-up
  const t0 = performance.now();
  for (const x of inputs) await ctx.getEmbeddingFor(x);
  const eps = n / ((performance.now() - t0) / 1000);
  await ctx.dispose();
  await model.dispose();
  return eps;
}

const tm = await tokenmill();
const lc = await llamacpp();
console.log(JSON.stringify({ tokenmill: tm, llamacpp: lc, n, len, threads }));
