// The memory budget of several models, measured: on-demand models load and unload under
// --memory-limit while the server's memory (PSS from /proc/PID/smaps: anonymous memory plus the model
// files' pages, a page mapped twice counted once, as the budget counts a file shared by two models)
// is sampled every few milliseconds; above what the server used before any model loaded it never
// exceeds the limit, the budget's own figure covers what is measured, and unloading gives the
// memory back.
//
// Three ~24 MB Q8_0 models: a and a2 map one file, b another. Each engine packs its own copy of the
// weights (anonymous memory), so a2 costs as much as a: with the limit (64 MiB) two of the three fit,
// never all three (an accounting that counted the shared file once let all three in: ~86 MB).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startServer, scrape, metric, sourceDir, binary, sleep } from './lib/server.mjs';
import { ownMemory } from './lib/memory.mjs';

const MiB = 1 << 20;
const LIMIT = 64 * MiB;
const VOCAB = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-membudget-'));
let server = null;
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
  fs.rmSync(dir, { recursive: true, force: true });
});

function dummy(file, seed) {
  const r = spawnSync(binary, ['dummy', '--arch', 'llama', '--vocab', VOCAB, '--n-embd', '640', '--n-layer', '4',
                               '--n-head', '8', '--n-ff', '2048', '--n-ctx', '512', '--dtype', 'Q8_0',
                               '--seed', String(seed), '--threads', '2', '-o', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

// The server's anonymous memory and the model files' pages (lib/memory.mjs), each page once however
// many mappings of the process share it.
const pss = (pid) => ownMemory(pid, [dir]);

test('on-demand models load and unload within the measured memory budget', async (t) => {
  if (!fs.existsSync('/proc/self/smaps')) return t.skip('no /proc/PID/smaps');
  const A = path.join(dir, 'a.gguf');
  const B = path.join(dir, 'b.gguf');
  dummy(A, 1);
  dummy(B, 2);
  const cfg = path.join(dir, 'models.yaml');
  const od = 'kv_cache_memory: 4MiB, residency: on_demand';
  fs.writeFileSync(cfg, `memory_limit: ${LIMIT}
models:
  - {name: warm, file: ${VOCAB}, kv_cache_memory: 1MiB, residency: on_demand}
  - {name: a, file: ${A}, ${od}}
  - {name: a2, file: ${A}, ${od}}
  - {name: b, file: ${B}, ${od}}
`);
  // The request memory (--buffer-memory) comes out of the limit too: a small share here, so that two
  // of the three models fit.
  server = await startServer(['--models-file', cfg, '--threads', '1', '--buffer-memory', '4MiB']);
  const pid = server.proc.pid;
  const unload = async (model) => {
    const r = await fetch(`${server.url}/models/unload`, { method: 'POST', body: JSON.stringify({ model }),
                                                           headers: { 'Content-Type': 'application/json' } });
    assert.equal(r.status, 200, await r.text());
  };
  // The code of loading and serving a model faults in on first use (file pages of the binary):
  // a tiny model loaded, used and unloaded first, so the start figure includes them.
  const post = (model) => fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
  });
  assert.equal((await post('warm')).status, 200);
  await unload('warm');
  await sleep(200);
  const base = pss(pid);
  let peak = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        peak = Math.max(peak, pss(pid) - base);
      } catch {
        return;  // the server is gone (a failed assertion stopped it)
      }
      await sleep(3);
    }
  })();
  t.after(() => { sampling = false; });
  const complete = async (model) => {
    const r = await post(model);
    assert.equal(r.status, 200, await r.text());
  };
  const states = async () => Object.fromEntries(((await (await fetch(`${server.url}/v1/models`)).json()).data)
    .filter((m) => m.id !== 'warm').map((m) => [m.id, m.state]));
  // The budget's figure must cover what the server holds beyond its start (a little slack for
  // its own working memory: HTTP buffers, activations of a four-token batch).
  const covered = async (what) => {
    await sleep(50);
    const used = metric(await scrape(server.url), 'tokenmill:models_memory_bytes');
    const real = pss(pid) - base;
    assert.ok(used <= LIMIT, `${what}: the budget's figure ${used} is over the limit`);
    assert.ok(real <= used + 6 * MiB, `${what}: measured ${(real / MiB).toFixed(1)} MiB, counted ${(used / MiB).toFixed(1)} MiB`);
    return real;
  };

  await complete('a');
  await complete('a2');
  assert.deepEqual(await states(), { a: 'loaded', a2: 'loaded', b: 'unloaded' });
  const two = await covered('a + a2');
  assert.ok(two > 40 * MiB, `two models measured ${(two / MiB).toFixed(1)} MiB: the weights are not in memory?`);
  await complete('b');  // a (least recently used) makes room
  assert.deepEqual(await states(), { a: 'unloaded', a2: 'loaded', b: 'loaded' });
  await covered('a2 + b');
  await complete('a');  // a2 goes
  await complete('b');
  await complete('a2');  // a (used before b) goes
  assert.deepEqual(await states(), { a: 'unloaded', a2: 'loaded', b: 'loaded' });
  await covered('a2 + b again');
  for (const model of ['a2', 'b']) await unload(model);
  await sleep(100);
  sampling = false;
  await sampler;
  const left = pss(pid) - base;
  t.diagnostic(`PSS above the start: a + a2 ${(two / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB ` +
               `(limit ${LIMIT / MiB}), after unloading ${(left / MiB).toFixed(1)} MiB`);
  assert.ok(peak <= LIMIT, `peak ${(peak / MiB).toFixed(1)} MiB above the start, limit ${LIMIT / MiB} MiB`);
  assert.ok(left < 8 * MiB, `${(left / MiB).toFixed(1)} MiB still held after unloading every model`);
  const m = await scrape(server.url);
  assert.equal(metric(m, 'tokenmill:model_loads_total'), 6);  // warm, a, a2, b, a, a2
  assert.equal(metric(m, 'tokenmill:models_memory_bytes'), 0);
});
