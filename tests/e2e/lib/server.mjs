// Starts `tokenmill serve` on a free loopback port (--port 0; the port is read from the log), waits
// for GET /health to answer 200, and stops it again. Used by every e2e test file.
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';

const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = process.env.TM_SOURCE_DIR ?? path.resolve(here, '../../..');
export const binary = process.env.TM_BINARY ?? path.join(sourceDir, 'build/tokenmill');

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Starts a server. Returns { port, url, baseURL, proc, log(), stop(signal) }.
export async function startServer(args = [], { env = {}, waitReady = true, timeoutMs = 60000 } = {}) {
  const threads = args.includes('--threads') ? [] : ['--threads', '2'];
  const proc = spawn(binary, ['serve', '--port', '0', ...threads, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  let exited = null;
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  const exitPromise = new Promise((resolve) => proc.on('exit', (code, signal) => resolve((exited = { code, signal }))));
  const deadline = Date.now() + timeoutMs;
  let port = null;
  while (port === null) {
    const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(log);
    if (m) port = Number(m[1]);
    else if (exited) throw new Error(`server exited early (${JSON.stringify(exited)}):\n${log}`);
    else if (Date.now() > deadline) throw new Error(`server did not start:\n${log}`);
    else await sleep(20);
  }
  const url = `http://127.0.0.1:${port}`;
  const server = {
    port,
    url,
    baseURL: `${url}/v1`,
    proc,
    log: () => log,
    exited: () => exited,
    exit: exitPromise,
    async stop(signal = 'SIGTERM') {
      if (!exited) proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 30000);
      const r = await exitPromise;
      clearTimeout(t);
      return r;
    },
  };
  if (waitReady) {
    while (true) {
      try {
        const r = await fetch(`${url}/health`);
        if (r.status === 200) break;
      } catch {}
      if (exited) throw new Error(`server exited (${JSON.stringify(exited)}):\n${log}`);
      if (Date.now() > deadline) throw new Error(`server not healthy in time:\n${log}`);
      await sleep(50);
    }
  }
  return server;
}

// GET /metrics parsed into { 'name{labels}': value }.
export async function scrape(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

// The value of a metric whose name (and optionally label text) matches.
export function metric(m, name, labelPart = '') {
  for (const [k, v] of Object.entries(m)) {
    const base = k.split('{')[0];
    if (base === name && k.includes(labelPart)) return v;
  }
  return undefined;
}

// Raw HTTP/1.1 exchange over a socket: sends `raw` bytes, resolves with the whole response text
// (status line, headers, body) when the server closes or `idleMs` passes without data.
export function rawRequest(port, raw, { idleMs = 1500 } = {}) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let timer = null;
    const finish = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve(buf.toString('latin1'));
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(finish, idleMs);
    };
    sock.on('connect', () => {
      sock.write(raw);
      arm();
    });
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      arm();
    });
    sock.on('end', finish);
    sock.on('close', finish);
    sock.on('error', (e) => (buf.length ? finish() : reject(e)));
  });
}

// Parses an HTTP response text from rawRequest into { status, headers, body } (first response only;
// chunked bodies are de-chunked).
export function parseResponse(text) {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return { status: 0, headers: {}, body: '' };
  const lines = text.slice(0, end).split('\r\n');
  const status = Number(lines[0].split(' ')[1]);
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  let body = text.slice(end + 4);
  if (headers['content-length'] !== undefined) body = body.slice(0, Number(headers['content-length']));
  return { status, headers, body };
}

// `tokenmill generate ... --json` output.
export function generateJson(args) {
  const r = spawnSync(binary, ['generate', '--json', '--threads', '2', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`generate failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Reads an SSE response body (fetch Response) and returns { events: [parsed JSON or '[DONE]'], raw }.
export async function readSse(res) {
  const raw = await res.text();
  const events = [];
  for (const block of raw.split('\n\n')) {
    if (!block.trim()) continue;
    if (!block.startsWith('data: ')) throw new Error(`not an SSE data event: ${JSON.stringify(block)}`);
    const data = block.slice(6);
    events.push(data === '[DONE]' ? '[DONE]' : JSON.parse(data));
  }
  return { events, raw };
}
