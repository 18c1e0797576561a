// Embeddings per second: tokenmill's /v1/embeddings against llama.cpp on the same GGUF and the same
// token sequences, same threads.
//
//   node bench/embed_bench.mjs --model M.gguf [--threads 2] [--n 256] [--len 32] [--batches 1,32,256]
//                              [--llama-server PATH] [--reps 3]
//
// With --llama-server (llama.cpp's own server, bench/build_llamacpp.sh builds it): both servers run on
// free ports and the same client posts requests of B inputs (token id arrays of --len tokens) to each
// `/v1/embeddings` in turn until --n inputs are embedded, alternating server by server and batch by
// batch for --reps rounds; the figure is the median of the rounds (embeddings / wall time, HTTP and
// JSON included). llama-server runs with --embedding, one slot per input of the largest batch
// (--parallel), a context of that many sequences and a batch that holds them all, so it can batch a
// request's inputs as tokenmill does.
// Without it: llama.cpp is node-llama-cpp's prebuilt CPU library (tests/llamacpp: `npm install
// --omit=optional --ignore-scripts` there): an embedding context, getEmbeddingFor on each input in turn
// (one sequence per call, so its figure does not depend on B).
// Prints one JSON object: {"tokenmill": {"1": eps, ...}, "llamacpp": eps or {"1": eps, ...}, "n", "len", "threads"}.
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

async function waitHealthy(url, proc) {
  for (let i = 0; i < 1200; i++) {
    if (proc.exitCode !== null) throw new Error(`${url}: server exited (${proc.exitCode})`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url}: not healthy after 120 s`);
}

async function startServer(cmd, argv) {
  const proc = spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err = (err + d).slice(-4000); });
  const url = `http://127.0.0.1:${argv[argv.indexOf('--port') + 1]}`;
  try {
    await waitHealthy(url, proc);
  } catch (e) {
    proc.kill('SIGKILL');
    throw new Error(`${e.message}\n${err}`);
  }
  return { proc, url };
}

const post = (url, input) => fetch(`${url}/v1/embeddings`, {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input }),
}).then((r) => r.json());

// Embeddings per second for requests of b inputs, --n inputs in all.
async function measure(url, b) {
  const t0 = performance.now();
  for (let i = 0; i < n; i += b) {
    const r = await post(url, inputs.slice(i, Math.min(n, i + b)));
    if (!r.data || r.data.length !== Math.min(n, i + b) - i) throw new Error(JSON.stringify(r).slice(0, 500));
  }
  return n / ((performance.now() - t0) / 1000);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function tokenmill() {
  const port = await freePort();
  const { proc, url } = await startServer(binary, ['serve', '--model', args.model, '--port', String(port),
    '--threads', String(threads)]);
  const out = {};
  try {
    await post(url, inputs.slice(0, 2));  // warm-up
    for (const b of batches) out[b] = await measure(url, b);
  } finally {
    proc.kill('SIGTERM');
  }
  return out;
}

async function againstServer() {
  const maxB = Math.max(...batches), reps = Number(args.reps ?? 3);
  const tm = await startServer(binary, ['serve', '--model', args.model, '--port', String(await freePort()),
    '--threads', String(threads)]);
  const slots = maxB, ctx = slots * (len + 8);
  const lc = await startServer(args['llama-server'], ['-m', args.model, '--embedding', '--port', String(await freePort()),
    '--threads', String(threads), '--threads-batch', String(threads), '--parallel', String(slots), '-c', String(ctx),
    '-b', String(ctx), '-ub', String(ctx), '--no-webui', '--log-disable']);
  const tmr = {}, lcr = {};
  try {
    await post(tm.url, inputs.slice(0, 2));
    await post(lc.url, inputs.slice(0, 2));
    for (let r = 0; r < reps; r++) {
      for (const b of batches) {
        (tmr[b] ??= []).push(await measure(tm.url, b));
        (lcr[b] ??= []).push(await measure(lc.url, b));
        process.stderr.write(`round ${r} batch ${b}: tokenmill ${tmr[b].at(-1).toFixed(1)} llama-server ${lcr[b].at(-1).toFixed(1)}\n`);
      }
    }
  } finally {
    tm.proc.kill('SIGTERM');
    lc.proc.kill('SIGTERM');
  }
  const med = (o) => Object.fromEntries(Object.entries(o).map(([b, xs]) => [b, median(xs)]));
  return { tokenmill: med(tmr), llamacpp: med(lcr), reps };
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

if (args['llama-server']) {
  console.log(JSON.stringify({ ...(await againstServer()), n, len, threads }));
} else {
  const tm = await tokenmill();
  const lc = await llamacpp();
  console.log(JSON.stringify({ tokenmill: tm, llamacpp: lc, n, len, threads }));
}
