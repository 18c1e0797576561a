// Holds N connections open against a fresh `tokenmill serve` (a third silent, a third with half a
// request line, a third idle keep-alive after a /health), then times /health and a 16-token
// completion beside them and prints the server's added descriptors, RSS and threads as JSON.
//   ulimit -n 20000; node tests/soak/hold.mjs [N=10000] [MODEL]
// Exit status 1 when fewer than N connections are held or either request takes 2 s or more.
import net from 'node:net';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const N = Number(process.argv[2] || 10000);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = process.env.TM_BINARY ?? path.join(root, 'build/tokenmill');
const model = process.argv[3] ?? path.join(root, 'models/stories260K/stories260K.gguf');
const srv = spawn(bin, ['serve', model, '--threads', '2', '--port', '0', '--header-timeout', '300', '--keep-alive-timeout', '300', '--max-connections', String(N + 100)], { stdio: ['ignore', 'pipe', 'pipe'] });
let port = 0, log = '';
srv.stderr.on('data', d => { log += d; const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(log); if (m) port = Number(m[1]); });
srv.stdout.on('data', d => { log += d; });
const sleep = ms => new Promise(r => setTimeout(r, ms));
srv.on('exit', (code) => { if (!/ready/.test(log) || !port) { console.error(`server exited (${code}):\n${log}`); process.exit(1); } });
while (!port || !/ready/.test(log)) await sleep(100);
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${srv.pid}/status`, 'utf8'))[1]);
const fds = () => fs.readdirSync(`/proc/${srv.pid}/fd`).length;
const threads = () => Number(/Threads:\s+(\d+)/.exec(fs.readFileSync(`/proc/${srv.pid}/status`, 'utf8'))[1]);
await fetch(`http://127.0.0.1:${port}/health`);
const rss0 = rss(), fd0 = fds();
const socks = [];
for (let i = 0; i < N; i++) {
  const s = net.connect(port, '127.0.0.1');
  s.on('error', () => {});
  const k = i % 3;
  if (k === 1) s.on('connect', () => s.write('POST /v1/chat/comp'));
  if (k === 2) s.on('connect', () => s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));  // then idle keep-alive
  socks.push(s);
  if (i % 500 === 499) await sleep(50);
}
await sleep(3000);
const held = fds() - fd0;
const t0 = Date.now();
const h = await fetch(`http://127.0.0.1:${port}/health`);
const tHealth = Date.now() - t0;
const t1 = Date.now();
const c = await fetch(`http://127.0.0.1:${port}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Once', max_tokens: 16 }) });
await c.text();
const tComp = Date.now() - t1;
const rss1 = rss();
console.log(JSON.stringify({ sockets: N, server_fds_added: held, health_status: h.status, health_ms: tHealth, completion_status: c.status, completion_ms: tComp, rss_before_kib: rss0, rss_held_kib: rss1, bytes_per_conn: Math.round((rss1 - rss0) * 1024 / N), threads: threads() }));
for (const s of socks) s.destroy();
srv.kill('SIGTERM');
if (held < N || tHealth >= 2000 || tComp >= 2000 || h.status !== 200 || c.status !== 200) process.exit(1);
