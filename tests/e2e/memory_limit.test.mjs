// --memory-limit covers requests too (issue 25, "the process never exceeds --memory-limit (weights +
// KV + buffers) whatever the load"): the request memory (--buffer-memory, bytes received, bodies and
// their parsing, output buffers) is counted, and what does not fit is shed with a 503 JSON error.
// Under a load of 1 MiB bodies from many clients, small streams, and streams whose readers stop,
// the server's memory (PSS, sampled every few ms) never grows past the request budget above what it
// used when idle; without the budget the same load takes several times more (TM_MEMLIMIT_MEASURE=1
// prints both).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { startServer, scrape, metric, sleep } from './lib/server.mjs';
import { ownMemory } from './lib/memory.mjs';

const MiB = 1 << 20;
const BUDGET = 48 * MiB;
const SLACK = 8 * MiB;  // worker threads' stacks and malloc's per-thread bookkeeping, not counted
const CLIENTS = 24;
const SECONDS = 4;
let server = null;
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
});

// The server's anonymous memory (lib/memory.mjs): requests allocate nothing else.
const pss = (pid) => ownMemory(pid);

// A stream whose client reads the head and then stops reading (its socket buffer fills).
function stalledStream(port) {
  const s = net.connect(port, '127.0.0.1');
  const body = JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, stream: true, temperature: 1 });
  s.on('connect', () => {
    s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
  s.once('data', () => s.pause());
  s.on('error', () => {});
  return s;
}

async function load(url, port, pid, base, budget) {
  let peak = 0, sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try { peak = Math.max(peak, pss(pid) - base); } catch { return; }
      await sleep(2);
    }
  })();
  const big = JSON.stringify({ prompt: 'Once upon a time there was a little girl. '.repeat(Math.floor(MiB / 4 / 43)), max_tokens: 1 });
  const tally = { shed: 0, too_long: 0, ok: 0, other: [] };
  const end = Date.now() + SECONDS * 1000;
  const stalled = [];
  for (let i = 0; i < 6; i++) stalled.push(stalledStream(port));
  const bigClient = async () => {
    while (Date.now() < end) {
      const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                        body: big });
      const j = await r.json();
      if (r.status === 503 && j.error?.code === 'memory_full') {
        assert.equal(r.headers.get('retry-after'), '1');
        tally.shed++;
        await sleep(20);
      } else if (r.status === 400 && /context|long|tokens/i.test(j.error?.message ?? '')) {
        tally.too_long++;
      } else {
        tally.other.push(`${r.status} ${JSON.stringify(j).slice(0, 200)}`);
      }
    }
  };
  const smallClient = async () => {
    while (Date.now() < end) {
      const r = await fetch(`${url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16, temperature: 0 }),
      });
      const j = await r.json();
      if (r.status === 200 && j.choices?.[0]?.text?.length > 0) tally.ok++;
      else if (r.status === 503 && j.error?.code === 'memory_full') tally.shed++;
      else tally.other.push(`${r.status} ${JSON.stringify(j).slice(0, 200)}`);
    }
  };
  await Promise.all([...Array.from({ length: CLIENTS }, bigClient), ...Array.from({ length: 4 }, smallClient)]);
  for (const s of stalled) s.destroy();
  sampling = false;
  await sampler;
  return { peak, tally };
}

test('request memory stays within --buffer-memory under a load of large bodies and stalled streams', async (t) => {
  if (!fs.existsSync('/proc/self/smaps')) return t.skip('no /proc/PID/smaps');
  const run = async (budget) => {
    server = await startServer(['--memory-limit', `${budget + 16 * MiB}`, '--buffer-memory', `${budget}`,
                                '--kv-cache-memory', '1MiB', '--http-threads', '64'],
                               { env: JSON.parse(process.env.TM_MEMLIMIT_ENV ?? '{}') });
    const { url, port } = server;
    const pid = server.proc.pid;
    // Code pages and the allocator's first arenas fault in with a first small request.
    const warm = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                         body: JSON.stringify({ prompt: 'Hi', max_tokens: 4 }) });
    assert.equal(warm.status, 200);
    await sleep(100);
    const base = pss(pid);
    const r = await load(url, port, pid, base, budget);
    await sleep(300);
    const m = await scrape(url);
    r.counted_peak = metric(m, 'tokenmill:buffer_memory_peak_bytes');
    r.left = metric(m, 'tokenmill:buffer_memory_bytes');
    r.refusals = metric(m, 'tokenmill:buffer_memory_refusals_total');
    // Still serving.
    const after = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                                          body: JSON.stringify({ prompt: 'Once', max_tokens: 4 }) });
    assert.equal(after.status, 200, await after.text());
    assert.equal((await server.stop()).code, 0);
    server = null;
    return r;
  };
  if (process.env.TM_MEMLIMIT_MEASURE) {
    const free = await run(4096 * MiB);
    t.diagnostic(`without a budget: PSS +${(free.peak / MiB).toFixed(1)} MiB, counted peak ` +
                 `${(free.counted_peak / MiB).toFixed(1)} MiB, ${JSON.stringify(free.tally)}`);
  }
  const r = await run(BUDGET);
  t.diagnostic(`budget ${BUDGET / MiB} MiB: PSS +${(r.peak / MiB).toFixed(1)} MiB above idle, counted peak ` +
               `${(r.counted_peak / MiB).toFixed(1)} MiB, refusals ${r.refusals}, ${JSON.stringify(r.tally)}`);
  assert.deepEqual(r.tally.other, []);
  assert.ok(r.tally.shed > 0, 'the load never filled the budget: the test proves nothing');
  assert.ok(r.tally.too_long > 0, 'no large body was handled');
  assert.ok(r.tally.ok > 0, 'no small request was served');
  assert.ok(r.counted_peak <= BUDGET + 2 * MiB, `counted ${(r.counted_peak / MiB).toFixed(1)} MiB`);
  // What is left is the scrape's own connection (its head's bytes).
  assert.ok(r.left < 16 * 1024, `request memory still counted after the load: ${r.left} bytes`);
  assert.ok(r.peak <= BUDGET + SLACK,
            `PSS grew ${(r.peak / MiB).toFixed(1)} MiB above idle; the budget is ${BUDGET / MiB} MiB`);
});
