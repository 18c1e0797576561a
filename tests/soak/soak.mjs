// Soak and fault suite: N clients for T seconds against a real `tokenmill serve`, mixing what real traffic
// and hostile clients do, then checks that nothing was lost or leaked.
//
//   node tests/soak/soak.mjs [--clients 64] [--seconds 60] [--idle 200] [--model FILE] [--json FILE]
//                            [--server-args "..."] [--url http://host:port --api-key KEY]  (an already running server)
//                            [--max-latency 15]  (seconds: the slowest real request allowed, queueing included)
//
// Client actions (each client picks one at random per iteration):
//   stream / complete   greedy chat completions (stream or not) whose text must equal the answer the
//                       server gave to the same prompt alone before the load (0 wrong answers)
//   hangup              a streaming request abandoned after its first chunk
//   slow-reader         a streaming request over a raw socket that stops reading for a while, then closes
//   garbage             random bytes instead of HTTP: the answer must be a 4xx, or the connection closed
//   oversized           a body above --max-body-size: 413 with an OpenAI error body
//   wrong-key           a bad API key: 401 with an OpenAI error body
//   bad-json            a malformed body: 400 with an OpenAI error body
// Beside the clients, `--idle` sockets stay open without sending anything, half of them with half a
// request line (slowloris), and /health is polled every second (its worst latency is reported); the
// server's resident memory is sampled every 30 s (`rss_kib.samples_s_kib`: [seconds, KiB] pairs).
// After the load: running and waiting requests back to 0 and the KV cache empty (from /metrics), the
// process alive, resident memory after the load within 1.5x + 64 MiB of after the warm-up, every
// refusal a JSON error body, and no real request slower than --max-latency. Exit 0 when every check holds, 1 otherwise; a JSON summary is printed
// (and written to --json FILE).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const { startServer, sleep, scrape, sourceDir } = await import(path.join(here, '../e2e/lib/server.mjs'));

function parseArgs(argv) {
  const o = { clients: 64, seconds: 60, idle: 200, model: '', json: '', serverArgs: '', url: '', apiKey: '', seed: 1,
    maxLatency: 15 };
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    const take = () => {
      if (v === undefined) throw new Error(`${k} needs a value`);
      i++;
      return v;
    };
    if (k === '--clients') o.clients = Number(take());
    else if (k === '--seconds') o.seconds = Number(take());
    else if (k === '--idle') o.idle = Number(take());
    else if (k === '--model') o.model = take();
    else if (k === '--json') o.json = take();
    else if (k === '--server-args') o.serverArgs = take();
    else if (k === '--url') o.url = take();
    else if (k === '--api-key') o.apiKey = take();
    else if (k === '--seed') o.seed = Number(take());
    else if (k === '--max-latency') o.maxLatency = Number(take());
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}
const opt = parseArgs(process.argv);

// Deterministic pseudo-random numbers (a run can be repeated).
let rngState = opt.seed >>> 0 || 1;
function rand() {
  rngState ^= rngState << 13;
  rngState >>>= 0;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5;
  rngState >>>= 0;
  return rngState / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];

const key = opt.apiKey || 'soak-key';
let server = null, url = opt.url;
if (!url) {
  const model = opt.model || path.join(sourceDir, 'models/stories260K/stories260K.gguf');
  const extra = opt.serverArgs ? opt.serverArgs.split(/\s+/).filter(Boolean) : [];
  server = await startServer(['--model', model, '--api-key', key, '--max-body-size', '64KiB', ...extra], {
    waitReady: true,
  });
  url = server.url;
}
const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
const modelName = (await (await fetch(`${url}/v1/models`, { headers: auth })).json()).data[0].id;

const counts = {};
const failures = [];
const bump = (k) => (counts[k] = (counts[k] ?? 0) + 1);
function fail(what) {
  if (failures.length < 50) failures.push(what);
  bump('failures');
}

const prompts = ['Once upon a time', 'The little dog', 'Lily wanted to', 'One day, a boy', 'The sun was', 'Tom and Sue'];
const body = (p, stream, extra = {}) =>
  JSON.stringify({ model: modelName, messages: [{ role: 'user', content: p }], max_tokens: 24, temperature: 0, stream, ...extra });

// An OpenAI error body: {"error":{"message":..., "type":..., ...}}.
async function expectErrorBody(res, status, what) {
  const text = await res.text();
  if (res.status !== status) return fail(`${what}: status ${res.status}, want ${status}: ${text.slice(0, 200)}`);
  try {
    const j = JSON.parse(text);
    if (!j.error || typeof j.error.message !== 'string') fail(`${what}: no error.message in ${text.slice(0, 200)}`);
  } catch {
    fail(`${what}: not JSON: ${text.slice(0, 200)}`);
  }
}

async function complete(p) {
  const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth, body: body(p, false) });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
  return (await r.json()).choices[0].message.content;
}

// Reads an SSE stream into its text; `stopAfter` chunks then abandons it.
async function streamText(p, { stopAfter = 0 } = {}) {
  const ac = new AbortController();
  const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth, body: body(p, true), signal: ac.signal });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = '', text = '', chunks = 0, done = false;
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ')) continue;
      const data = ev.slice(6);
      if (data === '[DONE]') {
        done = true;
        continue;
      }
      const j = JSON.parse(data);
      if (j.error) throw new Error(`stream error event: ${data}`);
      text += j.choices?.[0]?.delta?.content ?? '';
      if (stopAfter && ++chunks >= stopAfter) {
        ac.abort();
        return { text, done: false };
      }
    }
  }
  return { text, done };
}

// A raw HTTP/1.1 exchange; resolves with what came back (or '' on a reset).
function raw(bytes, { readPauseMs = 0, holdMs = 0 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(new URL(url).port, '127.0.0.1');
    let got = '';
    const finish = () => {
      s.destroy();
      resolve(got);
    };
    s.setTimeout(30000, finish);
    s.on('error', finish);
    s.on('close', finish);
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (readPauseMs) {
        s.pause();
        setTimeout(finish, readPauseMs);  // the slow reader gives up without reading further
      }
    });
    s.on('connect', () => {
      s.write(bytes);
      if (holdMs) setTimeout(finish, holdMs);
    });
  });
}

const expected = new Map();
for (const p of prompts) expected.set(p, await complete(p));

async function action(kind) {
  const p = pick(prompts);
  switch (kind) {
    case 'complete': {
      const t = await complete(p);
      if (t !== expected.get(p)) fail(`wrong answer (complete) for ${JSON.stringify(p)}: ${JSON.stringify(t)}`);
      break;
    }
    case 'stream': {
      const r = await streamText(p);
      if (!r.done) fail('stream ended without [DONE]');
      if (r.text !== expected.get(p)) fail(`wrong answer (stream) for ${JSON.stringify(p)}: ${JSON.stringify(r.text)}`);
      break;
    }
    case 'hangup':
      await streamText(p, { stopAfter: 1 + Math.floor(rand() * 3) });
      break;
    case 'slow-reader': {
      const b = body(p, true, { max_tokens: 200, ignore_eos: true });
      const req = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
      await raw(req, { readPauseMs: 1000 + Math.floor(rand() * 2000) });
      break;
    }
    case 'garbage': {
      const n = 1 + Math.floor(rand() * 512);
      const junk = Buffer.alloc(n);
      for (let i = 0; i < n; i++) junk[i] = Math.floor(rand() * 256);
      const got = await raw(Buffer.concat([junk, Buffer.from('\r\n\r\n')]));
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(got);
      if (m && !(Number(m[1]) >= 400 && Number(m[1]) < 500)) fail(`garbage answered ${m[1]}`);
      break;
    }
    case 'oversized': {
      const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth, body: body('x'.repeat(70000), false) });
      await expectErrorBody(r, 413, 'oversized body');
      break;
    }
    case 'wrong-key': {
      const r = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST', headers: { ...auth, Authorization: 'Bearer wrong' }, body: body(p, false),
      });
      await expectErrorBody(r, 401, 'wrong key');
      break;
    }
    case 'bad-json': {
      const r = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth, body: '{"model": ' });
      await expectErrorBody(r, 400, 'malformed JSON');
      break;
    }
  }
  bump(kind);
}

// Weights of the actions: mostly real requests.
const mix = [
  ...Array(6).fill('stream'), ...Array(4).fill('complete'), ...Array(2).fill('hangup'), 'slow-reader', 'garbage',
  'oversized', 'wrong-key', 'bad-json',
];

function rssKiB() {
  if (!server) return null;
  try {
    const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.proc.pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const rssStart = rssKiB();
const t0 = Date.now(), deadline = t0 + opt.seconds * 1000;

// Idle and slowloris sockets, held for the whole run.
const idle = [];
for (let i = 0; i < opt.idle; i++) {
  const s = net.connect(new URL(url).port, '127.0.0.1');
  s.on('error', () => {});
  if (i % 2) s.on('connect', () => s.write('POST /v1/chat/comp'));
  idle.push(s);
}

// /health must keep answering while all of this goes on.
// Resident memory is sampled every 30 s too (a leak shows as a curve that keeps climbing).
let healthWorstMs = 0, healthChecks = 0, healthFailures = 0;
const rssSamples = [];
let nextRssSample = Date.now();
const healthLoop = (async () => {
  while (Date.now() < deadline) {
    const s = Date.now();
    if (server && s >= nextRssSample) {
      rssSamples.push([Math.round((s - t0) / 1000), rssKiB()]);
      nextRssSample += 30000;
    }
    try {
      const r = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10000) });
      if (r.status !== 200) healthFailures++;
    } catch {
      healthFailures++;
    }
    healthWorstMs = Math.max(healthWorstMs, Date.now() - s);
    healthChecks++;
    await sleep(1000);
  }
})();

const latencies = [];
async function client() {
  while (Date.now() < deadline) {
    const kind = pick(mix);
    const s = Date.now();
    try {
      await action(kind);
      if (kind === 'stream' || kind === 'complete') latencies.push((Date.now() - s) / 1000);
    } catch (e) {
      if (kind === 'hangup' && e.name === 'AbortError') {
        bump(kind);
        continue;
      }
      fail(`${kind}: ${e.message}`);
    }
  }
}
await Promise.all([...Array.from({ length: opt.clients }, client), healthLoop]);
for (const s of idle) s.destroy();

// Settle: the engine finishes aborted requests at its next step; give it a moment.
let m = {};
const metric = (name) => Object.entries(m).filter(([k]) => k === name || k.startsWith(`${name}{`)).reduce((s, [, v]) => s + v, 0);
for (let i = 0; i < 100; i++) {
  m = await scrape(url);
  if (metric('vllm:num_requests_running') === 0 && metric('vllm:num_requests_waiting') === 0 && metric('vllm:kv_cache_usage_perc') === 0) break;
  await sleep(100);
}
const after = {
  running: metric('vllm:num_requests_running'),
  waiting: metric('vllm:num_requests_waiting'),
  kv_usage: metric('vllm:kv_cache_usage_perc'),
};
if (after.running !== 0) fail(`requests still running after the load: ${after.running}`);
if (after.waiting !== 0) fail(`requests still waiting after the load: ${after.waiting}`);
if (after.kv_usage !== 0) fail(`KV cache not empty after the load: ${after.kv_usage}`);
latencies.sort((a, b) => a - b);
const q = (f) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(f * latencies.length))] : null);
const slowest = latencies.length ? latencies[latencies.length - 1] : null;
if (!latencies.length) fail('no real request completed');
else if (slowest > opt.maxLatency) fail(`the slowest real request took ${slowest.toFixed(1)} s (> --max-latency ${opt.maxLatency})`);
if (healthFailures) fail(`/health failed ${healthFailures} of ${healthChecks} times`);
// A request after the storm still gets the right answer.
const p0 = prompts[0];
if ((await complete(p0)) !== expected.get(p0)) fail('wrong answer after the load');
const rssEnd = rssKiB();
if (server) {
  if (server.exited()) fail(`server exited: ${JSON.stringify(server.exited())}`);
  if (rssStart && rssEnd && rssEnd > rssStart * 1.5 + 64 * 1024) fail(`resident memory grew from ${rssStart} KiB to ${rssEnd} KiB`);
}

const summary = {
  seconds: (Date.now() - t0) / 1000,
  clients: opt.clients,
  idle_connections: opt.idle,
  actions: counts,
  health: { checks: healthChecks, failures: healthFailures, worst_ms: healthWorstMs },
  real_requests: { count: latencies.length, p50_s: q(0.5), p99_s: q(0.99), max_s: slowest },
  after,
  rss_kib: { after_warmup: rssStart, after_load: rssEnd, samples_s_kib: rssSamples },
  failures,
};
console.log(JSON.stringify(summary, null, 1));
if (opt.json) fs.writeFileSync(opt.json, JSON.stringify(summary, null, 1));
if (server) await server.stop();
process.exit(failures.length ? 1 : 0);
